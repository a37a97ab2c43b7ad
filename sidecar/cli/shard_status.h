#pragma once
// `streamcar status` of a sharded subscription (SHARDING.md C2): the coordinator's view (members,
// epochs, the target and the grants), each shard's installed fence, lag, pending entries and
// dead letters, the shards without an owner, and the last events. Read-only: HGETALL of the
// coordinator keys, XINFO GROUPS per shard, XREVRANGE of the events stream.

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/config/config.h"
#include "sidecar/redis/session.h"

namespace streamcar::cli {

struct ShardStatusMember {
  std::string id;
  std::string instance;  // "" for a dynamic member
  int64_t epoch = 0;
  std::string state;  // STABLE | UNREVOKED | UNRELEASED
  std::vector<int> assigned;
  std::vector<int> revoking;
  std::vector<int> waiting;        // its target shards still held by their previous owners
  int64_t revoking_for_ms = 0;     // since its revocations began (0: none)
  int64_t rebalance_limit_ms = 0;  // how long they may take (rebalance_timeout)
  int64_t session_left_ms = 0;     // until the coordinator expires it (Redis TIME)
  int64_t last_heartbeat_ago_ms = 0;
  std::string pod, host;
};

struct ShardStatusShard {
  int index = 0;
  std::string key;
  std::string owner;   // the coordinator's grant ("" when unowned)
  std::string target;  // where the target assignment wants it
  int64_t grant_token = 0;
  int64_t fence = 0;  // the token installed in the shard's fence key (0: never)
  std::string fence_member;
  std::string state;  // active | stalled (B6.1) | revoking | unowned
  bool group_exists = false;
  int64_t pending = 0;
  std::optional<int64_t> lag;
  int64_t dead_letters = 0;
  // The owner's last report (SHARDING.md B2 `progress`): its last acknowledged (or
  // dead-lettered) id, how long ago that acknowledgement was, and how long ago the report came.
  std::string last_acked_id;
  std::optional<int64_t> acked_ago_ms;
  std::optional<int64_t> reported_ago_ms;
};

struct ShardStatusEvent {
  int64_t time_ms = 0;
  std::string type;
  std::string fields;                         // "shard 4 member c0d1... fence 1742"
  std::map<std::string, std::string> values;  // the same, by field
};

struct ShardedStatus {
  std::string name, stream, group;
  std::string error;  // the coordinator could not be read
  bool coordinator_exists = false;
  int shard_count = 0;
  int64_t group_epoch = 0;
  int64_t assignment_epoch = 0;
  std::vector<ShardStatusMember> members;
  std::vector<ShardStatusShard> shards;
  int64_t unowned = 0;
  int64_t unowned_oldest_ms = 0;
  int64_t rebalances_last_hour = 0;      // grants and revokes in the events stream
  int64_t fenced_ops_last_10m = 0;       // steps members' fences refused, as they reported them
  std::vector<ShardStatusEvent> events;  // newest first

  // STABLE when every member has reached the assignment epoch and nothing is being revoked.
  bool Stable() const;
};

// The keys every subscription's `status --json` object starts with: name, stream, group, error
// (null when none).
void WriteStatusHead(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w, const std::string& name,
                     const std::string& stream, const std::string& group, const std::string& error);

ShardedStatus InspectSharded(redis::Session& redis, const config::Subscription& sub);
void WriteShardedTable(const ShardedStatus& status, int64_t now_ms);
// One object of `status --json`'s "subscriptions" array.
void WriteShardedJson(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w,
                      const ShardedStatus& status);

}  // namespace streamcar::cli

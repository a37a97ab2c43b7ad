#pragma once
// One heartbeat of a member to the coordinator (SHARDING.md B4): the request as the script's
// arguments, and its reply parsed. This file is the wire form of both; the script's own comment
// lists the same positions.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/reply.h"

namespace streamcar::sharding {

// The member epochs with a meaning of their own (KIP-848, KIP-345).
inline constexpr int64_t kJoinEpoch = 0;
inline constexpr int64_t kLeaveEpoch = -1;
inline constexpr int64_t kStaticLeaveEpoch = -2;
// What the script and this file agree on; a newer group state is refused (INVALID_REQUEST).
inline constexpr int kProtocolVersion = 1;
inline constexpr int kSchemaVersion = 1;

enum class HeartbeatStatus {
  kOk,
  kRevokePending,         // drain only: revoke the shards not listed, start nothing
  kSyncMetadata,          // drain only, and heartbeat again at once with a full request
  kFencedMemberEpoch,     // fencing flow: drop everything, rejoin with epoch 0
  kUnknownMemberId,       // the same as fenced
  kUnreleasedInstanceId,  // another live process holds the instance id: back off
  kInvalidRequest,        // configuration mismatch with the group: not ready, back off
};
std::string_view HeartbeatStatusName(HeartbeatStatus status);
inline constexpr std::array<HeartbeatStatus, 7> kHeartbeatStatuses = {
    HeartbeatStatus::kOk,
    HeartbeatStatus::kRevokePending,
    HeartbeatStatus::kSyncMetadata,
    HeartbeatStatus::kFencedMemberEpoch,
    HeartbeatStatus::kUnknownMemberId,
    HeartbeatStatus::kUnreleasedInstanceId,
    HeartbeatStatus::kInvalidRequest};

enum class RevokeState { kDraining, kRevoked };

// What a member reports of a shard it runs (the coordinator keeps it for `status`).
struct ShardProgress {
  int shard = 0;
  std::string last_acked_id;  // "" before the first acknowledgement (or dead letter)
  int64_t in_flight = 0;
  int64_t pending = 0;
  std::optional<Millis> acked_ago;  // since the last acknowledgement; nullopt before the first
  // Entries known to wait in the shard (ProgressReport::Snapshot::Waiting): what the coordinator
  // judges a stall by (B6.1).
  int64_t waiting = 0;
};

// The coordinator's record of a shard's progress (the `progress` hash, one field per shard),
// as the heartbeat script writes it from the owner's reports.
struct ProgressRow {
  std::string member;
  std::string last_acked_id;
  int64_t in_flight = 0;
  int64_t pending = 0;
  int64_t reported_ms = 0;          // Redis TIME of the report
  std::optional<int64_t> acked_ms;  // Redis TIME of the last acknowledgement, as reported
  // B6.1, from rows of members that report what waits: since when entries have waited with no
  // progress, and since when the shard has been judged stalled (nullopt: not).
  int64_t waiting = 0;
  std::optional<int64_t> busy_ms;
  std::optional<int64_t> stalled_ms;
};
// nullopt: not a row the script writes.
std::optional<ProgressRow> ParseProgressRow(std::string_view row);

struct HeartbeatRequest {
  std::string member_id;
  int64_t member_epoch = kJoinEpoch;
  std::string instance_id;  // "": dynamic membership
  std::vector<int> owned;   // starting, running or draining
  std::vector<std::pair<int, RevokeState>> revoking;
  std::vector<std::pair<int, int64_t>> fence_conflicts;  // shard, the installed token
  int64_t metadata_version = 0;
  int shard_count = 0;
  Millis session_timeout{15000};
  Millis rebalance_timeout{60000};
  Millis initial_delay{3000};
  Millis min_assignment_interval{1000};
  Millis heartbeat_interval{3000};
  std::vector<ShardProgress> progress;
  // Steps this member's fences refused since its last heartbeat that reached the script, by op
  // (streamcar_fenced_ops_total's labels): the coordinator's events record them (C2).
  std::map<std::string, int64_t, std::less<>> fenced_ops;
  bool static_takeover_wait = false;  // static_takeover: wait (else immediate)
  Millis stall_timeout{0};            // B6.1: 0, shards are not judged
  bool revoke_stalled = false;
  std::string pod;
  std::string host;
};

struct ShardGrant {
  int shard = 0;
  int64_t token = 0;
  bool operator==(const ShardGrant&) const = default;
};

struct HeartbeatReply {
  HeartbeatStatus status = HeartbeatStatus::kOk;
  int64_t member_epoch = 0;
  int64_t group_epoch = 0;
  int64_t assignment_epoch = 0;
  // The store's version. A member keeps it (and reports it back) only from OK, REVOKE_PENDING
  // and SYNC_METADATA: a refusal may come from a store that rolled back, and adopting its
  // version would hide the rollback from the next request.
  int64_t metadata_version = 0;
  Millis heartbeat_interval{0};
  Millis session_timeout{0};
  Millis rebalance_timeout{0};
  // The member's shards with their fence tokens. A shard the member is draining may be listed
  // again: the target gave it back, and it stays the member's on the same token.
  std::vector<ShardGrant> assigned;
  std::vector<int> pending;  // its target shards still held by previous owners
  std::string detail;        // why, for anything but OK
  // The group, for every member's metrics (SHARDING.md C1).
  int64_t members = 0;
  int64_t unowned_shards = 0;
  Millis unowned_oldest{0};
  int64_t target_computations = 0;
  // This member's reported shards the coordinator judges stalled (B6.1).
  std::vector<int> stalled;
};

redis::Command HeartbeatCommand(const keys::CoordinatorKeys& keys, const HeartbeatRequest& request);
StatusOr<HeartbeatReply> ParseHeartbeatReply(const redis::ReplyView& reply);

}  // namespace streamcar::sharding

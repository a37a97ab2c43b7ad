#pragma once
// A real redis-server and simulated members that heartbeat the coordinator script directly, as
// the member state machine will (SHARDING.md B10.1): each Member keeps what a member keeps
// between heartbeats (its epoch, the shards it runs, the metadata version it saw).

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/connection.h"
#include "sidecar/sharding/heartbeat.h"
#include "sidecar/sharding/heartbeat_script.h"
#include "tests/support/redis_server.h"

namespace streamcar::sharding::testing {

struct GroupTiming {
  int shards = 8;
  Millis session{15000};
  Millis rebalance{60000};
  Millis initial_delay{0};
  Millis min_interval{0};
};

class Member {
 public:
  Member(std::string id, std::string instance = "") : id_(std::move(id)), instance_(instance) {}

  const std::string& id() const { return id_; }
  int64_t epoch() const { return epoch_; }
  // The shards this member runs, with the token of each grant.
  const std::map<int, int64_t>& running() const { return running_; }
  std::set<int> Shards() const {
    std::set<int> out;
    for (const auto& [shard, token] : running_) out.insert(shard);
    return out;
  }
  // The request it would send now: its epoch, the shards it runs, its revocations.
  HeartbeatRequest Request(const GroupTiming& timing) const {
    HeartbeatRequest request;
    request.member_id = id_;
    request.member_epoch = epoch_;
    request.instance_id = instance_;
    for (const auto& [shard, token] : running_) request.owned.push_back(shard);
    for (int shard : revoked_) request.revoking.emplace_back(shard, RevokeState::kRevoked);
    request.fence_conflicts = conflicts_;
    request.metadata_version = metadata_version_;
    request.shard_count = timing.shards;
    request.session_timeout = timing.session;
    request.rebalance_timeout = timing.rebalance;
    request.initial_delay = timing.initial_delay;
    request.min_assignment_interval = timing.min_interval;
    request.heartbeat_interval = Millis(1000);
    request.pod = id_ + "-pod";
    return request;
  }
  // What a well-behaved member does with the reply: OK starts the listed shards and stops the
  // others; REVOKE_PENDING and SYNC_METADATA stop (and, with `revoke_at_once`, revoke) the
  // others and start nothing; FENCED and UNKNOWN drop everything and rejoin with epoch 0.
  void Apply(const HeartbeatReply& reply, bool revoke_at_once = true) {
    revoked_.clear();
    conflicts_.clear();
    // The version of a store that accepted the request; a refusal may come from a rolled-back
    // store, whose version must not hide the rollback (heartbeat.h).
    if (reply.status == HeartbeatStatus::kOk || reply.status == HeartbeatStatus::kRevokePending ||
        reply.status == HeartbeatStatus::kSyncMetadata) {
      metadata_version_ = reply.metadata_version;
    }
    std::map<int, int64_t> listed;
    for (const ShardGrant& grant : reply.assigned) listed[grant.shard] = grant.token;
    switch (reply.status) {
      case HeartbeatStatus::kOk:
        epoch_ = reply.member_epoch;
        StopUnlisted(listed, true);
        for (const auto& [shard, token] : listed) running_[shard] = token;
        break;
      case HeartbeatStatus::kRevokePending:
      case HeartbeatStatus::kSyncMetadata:
        StopUnlisted(listed, revoke_at_once);
        break;
      case HeartbeatStatus::kFencedMemberEpoch:
      case HeartbeatStatus::kUnknownMemberId:
        running_.clear();
        epoch_ = kJoinEpoch;
        break;
      default:
        break;
    }
  }
  void Leave() { epoch_ = kLeaveEpoch; }
  // The fencing flow's end: nothing runs, the next request joins again.
  void Rejoin() {
    running_.clear();
    epoch_ = kJoinEpoch;
  }
  void SetEpoch(int64_t epoch) { epoch_ = epoch; }
  void ReportConflict(int shard, int64_t installed) {
    running_.erase(shard);
    conflicts_.emplace_back(shard, installed);
  }
  void PretendToRun(int shard, int64_t token) { running_[shard] = token; }

 private:
  void StopUnlisted(const std::map<int, int64_t>& listed, bool revoke) {
    if (!revoke) return;
    for (auto it = running_.begin(); it != running_.end();) {
      if (listed.contains(it->first)) {
        ++it;
      } else {
        revoked_.push_back(it->first);
        it = running_.erase(it);
      }
    }
  }

  std::string id_;
  std::string instance_;
  int64_t epoch_ = kJoinEpoch;
  int64_t metadata_version_ = 0;
  std::map<int, int64_t> running_;
  std::vector<int> revoked_;
  std::vector<std::pair<int, int64_t>> conflicts_;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  CoordinatorTest() : keys_(keys::CoordinatorKeysFor("orders", "billing")) {}

  void SetUp() override {
    connection_ = server_.Connect();
    ASSERT_TRUE(connection_->Run(HeartbeatScript().Load()).ok());
  }

  // One heartbeat of `member` as it stands; the reply is applied to it and returned.
  HeartbeatReply Beat(Member& member, bool revoke_at_once = true) {
    return BeatWith(member, member.Request(timing_), revoke_at_once);
  }
  HeartbeatReply BeatWith(Member& member, const HeartbeatRequest& request,
                          bool revoke_at_once = true) {
    auto reply = connection_->Run(HeartbeatCommand(keys_, request));
    EXPECT_TRUE(reply.ok()) << reply.status().message();
    if (!reply.ok()) return {};
    auto parsed = ParseHeartbeatReply(reply->view());
    EXPECT_TRUE(parsed.ok()) << parsed.status().message();
    if (!parsed.ok()) return {};
    member.Apply(*parsed, revoke_at_once);
    return *parsed;
  }
  // Heartbeats every member, round after round, until a round changes nothing.
  void Settle(std::vector<Member*> members, int max_rounds = 10) {
    for (int round = 0; round < max_rounds; ++round) {
      bool changed = false;
      for (Member* member : members) {
        auto before = member->running();
        auto epoch = member->epoch();
        HeartbeatReply reply = Beat(*member);
        changed |= before != member->running() || epoch != member->epoch() ||
                   reply.status != HeartbeatStatus::kOk || !reply.pending.empty();
      }
      if (!changed) return;
    }
    ADD_FAILURE() << "the group did not settle in " << max_rounds << " rounds";
  }

  std::map<std::string, std::string> Hash(const std::string& key) {
    std::map<std::string, std::string> out;
    auto reply = server_.Run({"HGETALL", key});
    for (size_t i = 0; i + 1 < reply.view().Size(); i += 2) {
      out[std::string(reply.view()[i].Str())] = std::string(reply.view()[i + 1].Str());
    }
    return out;
  }
  // The target assignment: member id -> its shards.
  std::map<std::string, std::set<int>> Target() {
    std::map<std::string, std::set<int>> out;
    for (const auto& [shard, member] : Hash(keys_.target)) out[member].insert(std::stoi(shard));
    return out;
  }
  int64_t MetaField(const std::string& field) {
    auto reply = server_.Run({"HGET", keys_.meta, field});
    return reply.view().IsNil() ? 0 : std::stoll(std::string(reply.view().Str()));
  }
  // How many events of `type` the audit stream holds.
  // The fields of each event of `type`, oldest first.
  std::vector<std::map<std::string, std::string>> EventFields(const std::string& type) {
    auto reply = server_.Run({"XRANGE", keys_.events, "-", "+"});
    std::vector<std::map<std::string, std::string>> out;
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      std::map<std::string, std::string> values;
      for (size_t k = 0; k + 1 < fields.Size(); k += 2) {
        values[std::string(fields[k].Str())] = std::string(fields[k + 1].Str());
      }
      if (values["type"] == type) out.push_back(std::move(values));
    }
    return out;
  }
  int Events(const std::string& type) {
    auto reply = server_.Run({"XRANGE", keys_.events, "-", "+"});
    int count = 0;
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      auto fields = reply.view()[i][1];
      if (fields.Size() >= 2 && fields[1].Str() == type) ++count;
    }
    return count;
  }

  ::streamcar::testing::RedisServer server_;
  std::unique_ptr<redis::Connection> connection_;
  keys::CoordinatorKeys keys_;
  GroupTiming timing_;
};

}  // namespace streamcar::sharding::testing

// The member state machine (sidecar/sharding/membership.h) against the real heartbeat and fenced
// scripts: members join, leave gracefully and crash on a fixed schedule while a simulated runtime
// installs each grant with the real fenced install and drains at once. After every heartbeat no
// shard is held by two live members (I2: revoke before assign), every active shard's token is the
// one installed (I1), and the group converges with every shard active on exactly one live member.

#include <thread>

#include "sidecar/sharding/fenced_ops.h"
#include "sidecar/sharding/fenced_script.h"
#include "sidecar/sharding/membership.h"
#include "tests/integration/sharding/coordinator_fixture.h"

namespace streamcar::sharding::testing {
namespace {

constexpr int kShards = 16;

class SimulatedMember {
 public:
  SimulatedMember(std::string id, const Clock& clock)
      : id_(id),
        membership_({.member_id = id,
                     .shard_count = kShards,
                     .session_timeout = Millis(600),
                     .rebalance_timeout = Millis(3000),
                     .heartbeat_interval = Millis(100),
                     .initial_delay = Millis(0),
                     .min_assignment_interval = Millis(0)},
                    clock) {}

  const std::string& id() const { return id_; }
  Membership& membership() { return membership_; }
  bool crashed = false;

  // One heartbeat and everything it leads to, heartbeats asked for "at once" included.
  void Beat(redis::Connection& redis, const keys::CoordinatorKeys& keys) {
    for (int round = 0; round < 5 && !crashed; ++round) {
      if (membership_.state() == MemberState::kLeft) return;
      auto reply = redis.Run(HeartbeatCommand(keys, membership_.NextRequest()));
      ASSERT_TRUE(reply.ok()) << reply.status().message();
      auto parsed = ParseHeartbeatReply(reply->view());
      ASSERT_TRUE(parsed.ok()) << parsed.status().message();
      if (!Handle(redis, membership_.OnReply(*parsed))) return;
    }
  }

  // The runtime's part, instantly: install (then claim) each start, drain each revocation.
  // Returns whether a heartbeat is due at once.
  bool Handle(redis::Connection& redis, const MemberActions& actions) {
    bool again = actions.heartbeat_now;
    for (const ShardGrant& grant : actions.start) {
      FencedShardOps ops(keys::ShardKey(keys::DefaultKeyPattern("orders"), grant.shard), "billing",
                         id_, grant.token, id_, membership_.member_epoch());
      auto reply = redis.Run(ops.EnsureGroup("0"));
      if (reply.ok()) {
        membership_.ShardStarted(grant.shard);
      } else {
        auto installed = FencedShardOps::FencedBy(reply.status());
        EXPECT_TRUE(installed.has_value()) << reply.status().message();
        if (installed) {
          again |= membership_.ShardInstallRefused(grant.shard, *installed).heartbeat_now;
        }
      }
    }
    for (int shard : actions.drain) again |= membership_.ShardDrained(shard).heartbeat_now;
    return again;
  }

 private:
  std::string id_;
  Membership membership_;
};

class MembershipScriptTest : public CoordinatorTest {
 protected:
  void SetUp() override {
    CoordinatorTest::SetUp();
    for (const auto* script : FencedScripts()) ASSERT_TRUE(connection_->Run(script->Load()).ok());
  }

  int64_t InstalledToken(int shard) {
    auto reply = server_.Run(
        {"HGET",
         keys::FenceKey(keys::ShardKey(keys::DefaultKeyPattern("orders"), shard), "billing"),
         "token"});
    return reply.view().IsNil() ? 0 : std::stoll(std::string(reply.view().Str()));
  }

  // I2 among live members, and I1 for every active shard.
  void CheckInvariants(std::vector<std::unique_ptr<SimulatedMember>>& members) {
    std::map<int, std::string> holder;
    for (auto& member : members) {
      if (member->crashed || member->membership().state() == MemberState::kLeft) continue;
      for (const auto& [shard, state] : member->membership().shards()) {
        if (state == ShardState::kRevoked) continue;
        auto [it, inserted] = holder.emplace(shard, member->id());
        EXPECT_TRUE(inserted) << "shard " << shard << " held by " << it->second << " and "
                              << member->id();
        if (state == ShardState::kActive) {
          EXPECT_EQ(member->membership().TokenOf(shard), InstalledToken(shard))
              << "shard " << shard << " of " << member->id();
        }
      }
    }
  }

  SystemClock clock_;
};

TEST_F(MembershipScriptTest, JoinsLeavesAndCrashesKeepOneLiveOwnerPerShardAndConverge) {
  std::vector<std::unique_ptr<SimulatedMember>> members;
  int next_id = 0;
  auto add = [&] {
    members.push_back(std::make_unique<SimulatedMember>("m" + std::to_string(next_id++), clock_));
  };
  // The oldest member still running normally: the next to leave or crash.
  auto oldest = [&]() -> SimulatedMember* {
    for (auto& member : members) {
      const MemberState state = member->membership().state();
      if (!member->crashed && state != MemberState::kLeaving && state != MemberState::kLeft) {
        return member.get();
      }
    }
    return nullptr;
  };
  for (int i = 0; i < 3; ++i) add();
  // One change every 10 rounds (a fixed schedule, not a time budget: the same churn however slow
  // the build); at least three members keep running.
  enum class Change { kJoin, kLeave, kCrash };
  const std::vector<Change> schedule = {
      Change::kJoin,  Change::kCrash, Change::kJoin,  Change::kLeave, Change::kJoin,
      Change::kCrash, Change::kJoin,  Change::kLeave, Change::kJoin,  Change::kCrash,
      Change::kJoin,  Change::kLeave, Change::kJoin,  Change::kLeave, Change::kJoin};
  int joins = 0, leaves = 0, crashes = 0;
  for (size_t round = 0; round < schedule.size() * 10; ++round) {
    if (round % 10 == 5) {
      switch (schedule[round / 10]) {
        case Change::kJoin:
          add();
          ++joins;
          break;
        case Change::kLeave:
          if (SimulatedMember* member = oldest()) {
            member->Handle(*connection_, member->membership().Leave());
            ++leaves;
          }
          break;
        case Change::kCrash:
          if (SimulatedMember* member = oldest()) {
            member->crashed = true;  // kill -9: it never heartbeats again
            ++crashes;
          }
          break;
      }
    }
    for (auto& member : members) {
      member->Beat(*connection_, keys_);
      CheckInvariants(members);
    }
    std::this_thread::sleep_for(Millis(20));
  }
  EXPECT_EQ(joins, 8);
  EXPECT_EQ(leaves, 4);
  EXPECT_EQ(crashes, 3);

  // Converge: crashed members expire (600 ms), their shards go to the live ones.
  const auto settle_by = SteadyClock::now() + Millis(3000);
  bool converged = false;
  while (!converged && SteadyClock::now() < settle_by) {
    for (auto& member : members) member->Beat(*connection_, keys_);
    CheckInvariants(members);
    std::map<int, int> active;
    converged = true;
    for (auto& member : members) {
      if (member->crashed || member->membership().state() == MemberState::kLeft) continue;
      converged &= member->membership().state() == MemberState::kStable;
      for (const auto& [shard, state] : member->membership().shards()) {
        if (state == ShardState::kActive) ++active[shard];
      }
    }
    converged &= active.size() == static_cast<size_t>(kShards);
    std::this_thread::sleep_for(Millis(50));
  }
  EXPECT_TRUE(converged) << joins << " joins, " << leaves << " leaves, " << crashes << " crashes";
  EXPECT_EQ(Hash(keys_.free).size(), 0u) << "no shard is left unowned";
}

}  // namespace
}  // namespace streamcar::sharding::testing

// Stalled owners (SHARDING.md B6.1) in the coordinator script, against a real redis-server: a
// shard whose owner reports entries waiting and no progress for the stall timeout is judged
// stalled on Redis's clock; an idle shard and one making progress are not; with revoke_stalled
// the shard goes to another member at once with a larger fence, and its stalled owner stays in
// the group. Timeouts are a few hundred milliseconds of real Redis TIME.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/integration/sharding/coordinator_fixture.h"

namespace streamcar::sharding::testing {
namespace {

constexpr Millis kStall{600};

class StallScriptTest : public CoordinatorTest {
 protected:
  // A heartbeat of `member` reporting `shard` with `last` acknowledged (before the test began:
  // no time given) and `waiting` entries.
  HeartbeatReply Report(Member& member, int shard, const std::string& last, int64_t waiting,
                        bool revoke = false, bool revoke_at_once = true) {
    HeartbeatRequest request = member.Request(timing_);
    request.progress = {{.shard = shard,
                         .last_acked_id = last,
                         .in_flight = waiting > 0 ? 1 : 0,
                         .pending = waiting,
                         .waiting = waiting}};
    request.stall_timeout = kStall;
    request.revoke_stalled = revoke;
    return BeatWith(member, request, revoke_at_once);
  }
  std::optional<ProgressRow> Row(int shard) {
    return ParseProgressRow(Hash(keys_.progress)[std::to_string(shard)]);
  }
  // The revocations for a stall, among the coordinator's events (a join's revocations are not).
  std::vector<std::map<std::string, std::string>> StallRevokes() {
    auto revokes = EventFields("revoke");
    std::erase_if(revokes, [](auto& fields) { return fields["reason"] != "stalled"; });
    return revokes;
  }
  static void Sleep(Millis time) { std::this_thread::sleep_for(time); }
};

TEST_F(StallScriptTest, EntriesWaitingWithoutProgressForTheTimeoutMarkTheShardStalled) {
  Member a("a"), b("b");
  Settle({&a, &b});
  const int shard = *a.Shards().begin();
  EXPECT_TRUE(Report(a, shard, "1-0", 3).stalled.empty()) << "waiting, but only just";
  ASSERT_TRUE(Row(shard));
  EXPECT_EQ(Row(shard)->waiting, 3);
  EXPECT_TRUE(Row(shard)->busy_ms);
  EXPECT_FALSE(Row(shard)->stalled_ms);
  Sleep(kStall + Millis(100));
  const HeartbeatReply reply = Report(a, shard, "1-0", 3);
  EXPECT_EQ(reply.stalled, std::vector<int>{shard});
  ASSERT_TRUE(Row(shard) && Row(shard)->stalled_ms);
  EXPECT_GE(*Row(shard)->stalled_ms - *Row(shard)->busy_ms, kStall.count());
  ASSERT_EQ(EventFields("stalled").size(), 1u);
  EXPECT_EQ(EventFields("stalled")[0]["shard"], std::to_string(shard));
  // Without revoke_stalled it is only reported: the owner keeps it on its token.
  EXPECT_EQ(reply.status, HeartbeatStatus::kOk);
  EXPECT_TRUE(a.running().contains(shard));
  EXPECT_EQ(Hash(keys_.owner)[std::to_string(shard)], "a");
  // Still stalled a heartbeat later, since the same moment, with no second event.
  const int64_t since = *Row(shard)->stalled_ms;
  EXPECT_EQ(Report(a, shard, "1-0", 3).stalled, std::vector<int>{shard});
  EXPECT_EQ(*Row(shard)->stalled_ms, since);
  EXPECT_EQ(EventFields("stalled").size(), 1u);
  // An acknowledgement is progress: no longer stalled.
  EXPECT_TRUE(Report(a, shard, "2-0", 2).stalled.empty());
  EXPECT_FALSE(Row(shard)->stalled_ms);
  // So is one of a lower id than the last (another key's, acknowledged out of order): its time
  // is after the clock started.
  Sleep(kStall + Millis(100));
  HeartbeatRequest request = a.Request(timing_);
  request.progress = {
      {.shard = shard, .last_acked_id = "2-0", .pending = 2, .acked_ago = Millis(0), .waiting = 2}};
  request.stall_timeout = kStall;
  EXPECT_TRUE(BeatWith(a, request).stalled.empty());
}

TEST_F(StallScriptTest, AnIdleShardIsNeverStalled) {
  Member a("a");
  Settle({&a});
  const int shard = *a.Shards().begin();
  Report(a, shard, "1-0", 0);
  Sleep(kStall + Millis(100));
  EXPECT_TRUE(Report(a, shard, "1-0", 0).stalled.empty());
  EXPECT_FALSE(Row(shard)->busy_ms);
  EXPECT_FALSE(Row(shard)->stalled_ms);
  // Entries arriving after a long idle time start the clock then, not at the last ack.
  EXPECT_TRUE(Report(a, shard, "1-0", 1).stalled.empty());
  // Off (stall timeout 0): never judged.
  Sleep(kStall + Millis(100));
  HeartbeatRequest request = a.Request(timing_);
  request.progress = {{.shard = shard, .last_acked_id = "1-0", .pending = 1, .waiting = 1}};
  EXPECT_TRUE(BeatWith(a, request).stalled.empty());
  EXPECT_EQ(EventFields("stalled").size(), 0u);
}

TEST_F(StallScriptTest, SlowButRealProgressIsNotAStall) {
  Member a("a");
  Settle({&a});
  const int shard = *a.Shards().begin();
  // One acknowledgement every third of the stall timeout, for twice the timeout.
  for (int i = 1; i <= 7; ++i) {
    EXPECT_TRUE(Report(a, shard, std::to_string(i) + "-0", 10).stalled.empty()) << i;
    Sleep(kStall / 3);
  }
  EXPECT_EQ(EventFields("stalled").size(), 0u);
}

TEST_F(StallScriptTest, RevokeStalledGivesTheShardToAnotherMemberWithALargerFence) {
  Member a("a"), b("b");
  Settle({&a, &b});
  const int shard = *a.Shards().begin();
  const int64_t old_token = a.running().at(shard);
  const size_t b_before = b.Shards().size();
  Report(a, shard, "1-0", 3, /*revoke=*/true);
  Sleep(kStall + Millis(100));
  // The member drains it (revoke_at_once false: it still reports the shard as its own).
  const HeartbeatReply reply = Report(a, shard, "1-0", 3, true, /*revoke_at_once=*/false);
  EXPECT_EQ(reply.stalled, std::vector<int>{shard});
  EXPECT_EQ(reply.status, HeartbeatStatus::kRevokePending) << reply.detail;
  for (const ShardGrant& grant : reply.assigned) EXPECT_NE(grant.shard, shard);
  EXPECT_FALSE(Hash(keys_.owner).contains(std::to_string(shard))) << "freed at once";
  EXPECT_EQ(Hash(keys_.target)[std::to_string(shard)], "b");
  ASSERT_EQ(StallRevokes().size(), 1u);
  EXPECT_EQ(StallRevokes()[0]["member"], "a");
  EXPECT_EQ(StallRevokes()[0]["shard"], std::to_string(shard));
  EXPECT_EQ(StallRevokes()[0]["to"], "b");
  // The receiver's next heartbeat grants it, above the stalled owner's token.
  Beat(b);
  ASSERT_TRUE(b.running().contains(shard));
  EXPECT_GT(b.running().at(shard), old_token);
  EXPECT_EQ(b.Shards().size(), b_before + 1);
  // The stalled owner still reporting the shard while it drains is not stale ownership, and
  // it has no rebalance deadline for it: it stays a member, and ends up OK once drained.
  EXPECT_EQ(Beat(a, /*revoke_at_once=*/false).status, HeartbeatStatus::kRevokePending);
  EXPECT_EQ(Beat(a).status, HeartbeatStatus::kRevokePending);  // still draining; then drained
  EXPECT_EQ(Beat(a).status, HeartbeatStatus::kOk);             // reported REVOKED
  EXPECT_FALSE(a.running().contains(shard));
  EXPECT_TRUE(Hash(keys_.members).contains("a"));
  EXPECT_EQ(Hash(keys_.owner)[std::to_string(shard)], "b") << "a's revocation frees nothing of b's";
}

TEST_F(StallScriptTest, AMemberWithEveryShardStalledStaysInTheGroup) {
  Member a("a"), b("b");
  Settle({&a, &b});
  const std::set<int> mine = a.Shards();
  auto report_all = [&](bool revoke_at_once) {
    HeartbeatRequest request = a.Request(timing_);
    for (int shard : mine) {
      if (a.running().contains(shard)) {
        request.progress.push_back(
            {.shard = shard, .last_acked_id = "1-0", .pending = 2, .waiting = 2});
      }
    }
    request.stall_timeout = kStall;
    request.revoke_stalled = true;
    return BeatWith(a, request, revoke_at_once);
  };
  report_all(false);
  Sleep(kStall + Millis(100));
  EXPECT_EQ(report_all(false).stalled.size(), mine.size());
  for (int shard : mine) EXPECT_EQ(Hash(keys_.target)[std::to_string(shard)], "b");
  // Far past the rebalance deadline a revocation would have: still a member (B6.1).
  timing_.rebalance = Millis(300);
  Sleep(Millis(400));
  Beat(b);
  EXPECT_NE(Beat(a, false).status, HeartbeatStatus::kUnknownMemberId);
  EXPECT_TRUE(Hash(keys_.members).contains("a"));
  EXPECT_EQ(b.Shards().size(), static_cast<size_t>(timing_.shards));
  EXPECT_EQ(Events("fenced"), 0);
}

TEST_F(StallScriptTest, ALoneMemberKeepsItsStalledShardAndOnlyReportsIt) {
  Member a("a");
  Settle({&a});
  const int shard = *a.Shards().begin();
  Report(a, shard, "1-0", 3, true);
  Sleep(kStall + Millis(100));
  const HeartbeatReply reply = Report(a, shard, "1-0", 3, true);
  EXPECT_EQ(reply.stalled, std::vector<int>{shard});
  EXPECT_EQ(reply.status, HeartbeatStatus::kOk);
  EXPECT_TRUE(a.running().contains(shard)) << "no other member to take it";
  EXPECT_EQ(StallRevokes().size(), 0u);
}

}  // namespace
}  // namespace streamcar::sharding::testing

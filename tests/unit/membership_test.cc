// The member side of a sharded subscription (SHARDING.md B6, B7) as pure logic on a ManualClock:
// what each reply and shard event makes the runtime do, what the next request reports, and the
// local lease.

#include "sidecar/sharding/membership.h"

#include <gtest/gtest.h>

namespace streamcar::sharding {
namespace {

HeartbeatReply Reply(HeartbeatStatus status, int64_t epoch, std::vector<ShardGrant> assigned,
                     int64_t metadata_version = 1) {
  HeartbeatReply reply;
  reply.status = status;
  reply.member_epoch = epoch;
  reply.assigned = std::move(assigned);
  reply.metadata_version = metadata_version;
  reply.session_timeout = Millis(10000);
  reply.heartbeat_interval = Millis(2000);
  return reply;
}
HeartbeatReply Ok(int64_t epoch, std::vector<ShardGrant> assigned, int64_t version = 1) {
  return Reply(HeartbeatStatus::kOk, epoch, std::move(assigned), version);
}

class MembershipTest : public ::testing::Test {
 protected:
  MembershipOptions Options(std::string instance = "") {
    return {.member_id = "m1", .instance_id = std::move(instance), .shard_count = 8};
  }
  // Joins and starts `grants`, all active.
  void JoinWith(Membership& member, std::vector<ShardGrant> grants, int64_t epoch = 2) {
    member.NextRequest();
    MemberActions actions = member.OnReply(Ok(epoch, grants));
    for (const ShardGrant& grant : actions.start) member.ShardStarted(grant.shard);
  }
  std::vector<int> Ints(std::initializer_list<int> values) { return values; }

  ManualClock clock_;
};

TEST_F(MembershipTest, AJoinStartsTheListedShardsAndReportsThemOnceActive) {
  Membership member(Options(), clock_);
  HeartbeatRequest join = member.NextRequest();
  EXPECT_EQ(join.member_epoch, kJoinEpoch);
  EXPECT_TRUE(join.owned.empty());
  MemberActions actions = member.OnReply(Ok(2, {{0, 11}, {3, 12}}));
  EXPECT_EQ(actions.start, (std::vector<ShardGrant>{{0, 11}, {3, 12}}));
  EXPECT_EQ(member.state(), MemberState::kReconciling);
  member.ShardStarted(0);
  member.ShardStarted(3);
  EXPECT_EQ(member.state(), MemberState::kStable);
  HeartbeatRequest next = member.NextRequest();
  EXPECT_EQ(next.member_epoch, 2);
  EXPECT_EQ(next.owned, Ints({0, 3}));
  EXPECT_EQ(member.TokenOf(3), 12);
  EXPECT_TRUE(member.OnReply(Ok(2, {{0, 11}, {3, 12}})).start.empty()) << "nothing twice";
}

TEST_F(MembershipTest, AShardNoLongerListedDrainsThenIsReportedRevokedUntilAccepted) {
  Membership member(Options(), clock_);
  JoinWith(member, {{0, 11}, {1, 12}});
  member.NextRequest();
  MemberActions actions = member.OnReply(Ok(3, {{0, 11}}));
  EXPECT_EQ(actions.drain, Ints({1}));
  HeartbeatRequest draining = member.NextRequest();
  EXPECT_EQ(draining.owned, Ints({0, 1})) << "a draining shard is still held";
  ASSERT_EQ(draining.revoking.size(), 1u);
  EXPECT_EQ(draining.revoking[0], (std::pair{1, RevokeState::kDraining}));
  EXPECT_TRUE(member.ShardDrained(1).heartbeat_now);
  HeartbeatRequest revoked = member.NextRequest();
  EXPECT_EQ(revoked.owned, Ints({0}));
  EXPECT_EQ(revoked.revoking[0], (std::pair{1, RevokeState::kRevoked}));
  member.OnReply(Ok(3, {{0, 11}}));
  EXPECT_TRUE(member.NextRequest().revoking.empty()) << "accepted: reported no more";
  EXPECT_EQ(member.state(), MemberState::kStable);
}

TEST_F(MembershipTest, RevokePendingAndSyncMetadataStartNothing) {
  Membership member(Options(), clock_);
  JoinWith(member, {{0, 11}, {1, 12}});
  member.NextRequest();
  MemberActions pending =
      member.OnReply(Reply(HeartbeatStatus::kRevokePending, 2, {{0, 11}, {5, 40}}));
  EXPECT_TRUE(pending.start.empty());
  EXPECT_EQ(pending.drain, Ints({1}));
  EXPECT_EQ(member.state(), MemberState::kDrainOnly);
  EXPECT_EQ(member.member_epoch(), 2);
  member.NextRequest();
  MemberActions sync = member.OnReply(Reply(HeartbeatStatus::kSyncMetadata, 2, {{0, 11}}));
  EXPECT_TRUE(sync.heartbeat_now);
  EXPECT_TRUE(sync.start.empty());
  EXPECT_EQ(member.state(), MemberState::kDrainOnly);
  member.ShardDrained(1);
  member.NextRequest();
  member.OnReply(Ok(3, {{0, 11}}));
  EXPECT_EQ(member.state(), MemberState::kStable) << "a later OK ends DRAIN_ONLY";
}

TEST_F(MembershipTest, FencedOrUnknownDropsEverythingAndRejoinsWithEpochZero) {
  for (HeartbeatStatus status :
       {HeartbeatStatus::kFencedMemberEpoch, HeartbeatStatus::kUnknownMemberId}) {
    Membership member(Options(), clock_);
    JoinWith(member, {{0, 11}, {1, 12}});
    member.NextRequest();
    MemberActions actions = member.OnReply(Reply(status, 0, {}, 0));
    EXPECT_EQ(actions.drop, Ints({0, 1}));
    EXPECT_TRUE(actions.heartbeat_now);
    EXPECT_EQ(member.state(), MemberState::kJoining);
    EXPECT_FALSE(member.LeaseValid());
    HeartbeatRequest rejoin = member.NextRequest();
    EXPECT_EQ(rejoin.member_epoch, kJoinEpoch);
    EXPECT_TRUE(rejoin.owned.empty());
    EXPECT_EQ(rejoin.metadata_version, 1) << "a refusal's version is not adopted";
  }
}

TEST_F(MembershipTest, TheLeaseIsEightTenthsOfTheSessionFromTheMomentTheRequestWasBuilt) {
  Membership member(Options(), clock_);
  member.NextRequest();
  clock_.Advance(Millis(1000));  // the reply takes a second
  member.OnReply(Ok(2, {{0, 11}}));
  member.ShardStarted(0);
  clock_.Advance(Millis(6999));
  EXPECT_TRUE(member.LeaseValid());
  EXPECT_EQ(member.LeaseRemaining(), Millis(1));
  EXPECT_TRUE(member.CheckLease().drop.empty());
  clock_.Advance(Millis(1));
  EXPECT_FALSE(member.LeaseValid()) << "8 s after the request, whatever the reply's delay";
  MemberActions lost = member.CheckLease();
  EXPECT_EQ(lost.drop, Ints({0}));
  EXPECT_EQ(member.state(), MemberState::kLost);
  EXPECT_EQ(member.NextRequest().member_epoch, kJoinEpoch);
  EXPECT_TRUE(member.CheckLease().drop.empty()) << "once";
}

TEST_F(MembershipTest, ARefusedInstallIsReportedAsAConflictUntilAccepted) {
  Membership member(Options(), clock_);
  member.NextRequest();
  member.OnReply(Ok(2, {{0, 3}, {1, 4}}));
  member.ShardStarted(1);
  MemberActions refused = member.ShardInstallRefused(0, 17);
  EXPECT_TRUE(refused.heartbeat_now);
  EXPECT_EQ(refused.drop, Ints({0})) << "the refused shard's loop goes";
  HeartbeatRequest request = member.NextRequest();
  EXPECT_EQ(request.fence_conflicts, (std::vector<std::pair<int, int64_t>>{{0, 17}}));
  EXPECT_EQ(request.owned, Ints({1}));
  member.OnReply(Reply(HeartbeatStatus::kSyncMetadata, 2, {{1, 4}}));
  EXPECT_TRUE(member.NextRequest().fence_conflicts.empty());
}

TEST_F(MembershipTest, AFencedDataOperationDropsOnlyThatShard) {
  Membership member(Options(), clock_);
  JoinWith(member, {{0, 11}, {1, 12}});
  MemberActions actions = member.ShardFenced(1, 30);
  EXPECT_EQ(actions.drop, Ints({1}));
  EXPECT_TRUE(actions.heartbeat_now);
  EXPECT_EQ(member.NextRequest().owned, Ints({0}));
  EXPECT_TRUE(member.ShardFenced(1, 30).drop.empty()) << "once";
}

TEST_F(MembershipTest, ADrainingShardGivenBackResumesOnItsToken) {
  Membership member(Options(), clock_);
  JoinWith(member, {{0, 11}, {1, 12}});
  member.NextRequest();
  EXPECT_EQ(member.OnReply(Ok(3, {{0, 11}})).drain, Ints({1}));
  member.NextRequest();
  MemberActions back = member.OnReply(Ok(4, {{0, 11}, {1, 12}}));
  EXPECT_EQ(back.resume, Ints({1}));
  EXPECT_TRUE(back.start.empty());
  // A new run installs and claims it again: STARTING until that is done, as after a grant.
  EXPECT_EQ(member.shards().at(1), ShardState::kStarting);
  EXPECT_EQ(member.state(), MemberState::kReconciling);
  member.ShardStarted(1);
  EXPECT_EQ(member.shards().at(1), ShardState::kActive);
  EXPECT_EQ(member.state(), MemberState::kStable);
}

TEST_F(MembershipTest, AHeldShardListedWithAnotherTokenIsDroppedAndStartedAgain) {
  Membership member(Options(), clock_);
  JoinWith(member, {{0, 11}});
  member.NextRequest();
  MemberActions actions = member.OnReply(Ok(3, {{0, 15}}));
  EXPECT_EQ(actions.drop, Ints({0}));
  EXPECT_EQ(actions.start, (std::vector<ShardGrant>{{0, 15}}));
  EXPECT_EQ(member.TokenOf(0), 15);
}

TEST_F(MembershipTest, LeavingDrainsEveryShardThenLeavesWithTheRightEpoch) {
  for (const std::string instance : {"", "pod-a"}) {
    Membership member(Options(instance), clock_);
    JoinWith(member, {{0, 11}, {1, 12}});
    MemberActions leave = member.Leave();
    EXPECT_EQ(leave.drain, Ints({0, 1}));
    EXPECT_EQ(member.state(), MemberState::kLeaving);
    EXPECT_EQ(member.NextRequest().member_epoch, 2) << "still a member while draining";
    EXPECT_TRUE(member.OnReply(Ok(3, {{0, 11}, {1, 12}, {2, 13}})).start.empty())
        << "a leaving member starts nothing and resumes nothing";
    member.ShardDrained(0);
    EXPECT_EQ(member.NextRequest().member_epoch, 3) << "shard 1 still drains";
    member.OnReply(Ok(3, {{1, 12}}));
    member.ShardDrained(1);
    // Everything drained: the leave itself frees the shards (no REVOKED round first).
    HeartbeatRequest last = member.NextRequest();
    EXPECT_EQ(last.member_epoch, instance.empty() ? kLeaveEpoch : kStaticLeaveEpoch);
    EXPECT_TRUE(last.owned.empty());
    member.OnReply(Ok(0, {}));
    EXPECT_EQ(member.state(), MemberState::kLeft);
  }
}

TEST_F(MembershipTest, TheHeartbeatIntervalComesFromTheReplyWithJitterBelowIt) {
  Membership member(Options(), clock_);
  EXPECT_EQ(member.NextHeartbeatDelay(1.0), Millis(3000)) << "the configured interval first";
  member.NextRequest();
  member.OnReply(Ok(2, {}));
  EXPECT_EQ(member.NextHeartbeatDelay(0.0), Millis(1600));
  EXPECT_EQ(member.NextHeartbeatDelay(1.0), Millis(2000));
}

TEST_F(MembershipTest, RefusalsOfTheInstanceOrTheConfigurationChangeNothing) {
  Membership member(Options("pod-a"), clock_);
  member.NextRequest();
  for (HeartbeatStatus status :
       {HeartbeatStatus::kUnreleasedInstanceId, HeartbeatStatus::kInvalidRequest}) {
    MemberActions actions = member.OnReply(Reply(status, 0, {{0, 1}}, 9));
    EXPECT_TRUE(actions.start.empty());
    EXPECT_EQ(member.state(), MemberState::kJoining);
    EXPECT_EQ(member.NextRequest().metadata_version, 0);
  }
}

// B4.1: INVALID_REQUEST and UNRELEASED_INSTANCE_ID hold nothing; the member backs off (never
// sooner than one interval, doubling, jittered, capped at a minute or the session timeout) and
// an accepted reply ends it.
TEST_F(MembershipTest, RefusedJoinsBackOffUpToTheirCapAndAnAcceptedReplyEndsIt) {
  MembershipOptions options = Options("orders-0");
  options.heartbeat_interval = Millis(1000);
  options.session_timeout = Millis(6000);
  Membership member(options, clock_);
  EXPECT_EQ(member.NextHeartbeatDelay(0.999), Millis(999)) << "the plain interval first";
  Millis last{0};
  for (int refusal = 1; refusal <= 12; ++refusal) {
    member.NextRequest();
    HeartbeatReply invalid = Reply(HeartbeatStatus::kInvalidRequest, 0, {});
    invalid.heartbeat_interval = Millis(0);  // a refusal carries no timing
    EXPECT_TRUE(member.OnReply(invalid).start.empty());
    clock_.Advance(Millis(1000));
    const Millis longest = member.NextHeartbeatDelay(0.999);
    EXPECT_GE(member.NextHeartbeatDelay(0.0), Millis(1000)) << refusal;
    EXPECT_LE(longest, Millis(60000)) << refusal;
    EXPECT_GE(longest, last) << refusal;
    last = longest;
  }
  EXPECT_GT(last, Millis(50000)) << "grew to the cap";
  EXPECT_EQ(member.refusals(), 12);
  EXPECT_EQ(member.refused_with(), HeartbeatStatus::kInvalidRequest);
  EXPECT_EQ(member.RefusedFor(), Millis(12000)) << "since the first refusal";
  EXPECT_FALSE(member.last_accepted());

  // Another process holds the instance id: the wait is capped at the session timeout.
  member.NextRequest();
  HeartbeatReply unreleased = Reply(HeartbeatStatus::kUnreleasedInstanceId, 0, {});
  unreleased.heartbeat_interval = Millis(0);
  member.OnReply(unreleased);
  EXPECT_LE(member.NextHeartbeatDelay(0.999), Millis(6000));

  member.NextRequest();
  EXPECT_EQ(member.OnReply(Ok(2, {{1, 7}})).start, (std::vector<ShardGrant>{{1, 7}}));
  EXPECT_EQ(member.refusals(), 0);
  EXPECT_FALSE(member.refused_with());
  EXPECT_EQ(member.RefusedFor(), Millis(0));
  EXPECT_LE(member.NextHeartbeatDelay(0.999), Millis(2000)) << "back to the interval";
}

}  // namespace
}  // namespace streamcar::sharding

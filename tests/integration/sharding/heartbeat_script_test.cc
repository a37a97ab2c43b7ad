// The coordinator's heartbeat script (SHARDING.md B4, B10.1) against a real redis-server: the
// initial delay, revoke before assign, the KIP-848 epoch rules, expiry, static membership, the
// repair after a wipe, and the herd.

#include <thread>

#include "sidecar/sharding/fenced_ops.h"
#include "sidecar/sharding/fenced_script.h"
#include "tests/integration/sharding/coordinator_fixture.h"

namespace streamcar::sharding::testing {
namespace {

using Status = HeartbeatStatus;

std::set<int> ShardsOf(const HeartbeatReply& reply) {
  std::set<int> out;
  for (const ShardGrant& grant : reply.assigned) out.insert(grant.shard);
  return out;
}

TEST_F(CoordinatorTest, TheInitialDelayGivesNoAssignmentThenOneBalancedTarget) {
  timing_.initial_delay = Millis(400);
  Member a("a"), b("b"), c("c");
  for (Member* member : {&a, &b, &c}) {
    HeartbeatReply reply = Beat(*member);
    EXPECT_EQ(reply.status, Status::kOk);
    EXPECT_TRUE(reply.assigned.empty()) << "assigned inside the initial delay";
    EXPECT_GT(reply.member_epoch, 0) << "a joined member has an epoch";
  }
  EXPECT_EQ(MetaField("targets"), 0);
  std::this_thread::sleep_for(Millis(450));
  Settle({&a, &b, &c});
  EXPECT_EQ(MetaField("targets"), 1) << "one target for the three joins";
  std::multiset<size_t> sizes = {a.Shards().size(), b.Shards().size(), c.Shards().size()};
  EXPECT_EQ(sizes, (std::multiset<size_t>{2, 3, 3}));
  std::set<int> all;
  for (Member* member : {&a, &b, &c}) all.merge(member->Shards());
  EXPECT_EQ(all.size(), 8u);
  EXPECT_EQ(Events("revoke"), 0);
  EXPECT_EQ(a.epoch(), MetaField("assignment_epoch"));
}

// C2's "assignment epoch 42 (member c0d1…9a joined)": each target event names the membership
// change that moved the group epoch since the previous target, or counts them when several did.
TEST_F(CoordinatorTest, EachTargetNamesTheMembershipChangeThatMovedIt) {
  Member a("a"), b("b");
  Settle({&a});
  Beat(b);
  Settle({&a, &b});
  b.Leave();
  Beat(b);
  Settle({&a});
  const auto targets = EventFields("target");
  ASSERT_EQ(targets.size(), 3u);
  const std::vector<std::pair<std::string, std::string>> causes = {
      {"a", "joined"}, {"b", "joined"}, {"b", "left"}};
  for (size_t i = 0; i < targets.size(); ++i) {
    auto at = [&](const char* field) {
      auto it = targets[i].find(field);
      return it == targets[i].end() ? std::string("(none)") : it->second;
    };
    EXPECT_EQ(at("member"), causes[i].first) << i;
    EXPECT_EQ(at("change"), causes[i].second) << i;
    EXPECT_EQ(at("changes"), "1") << i;
  }
}

TEST_F(CoordinatorTest, ATargetAfterSeveralChangesCountsThem) {
  timing_.initial_delay = Millis(300);
  Member a("a"), b("b"), c("c");
  for (Member* member : {&a, &b, &c}) Beat(*member);
  std::this_thread::sleep_for(Millis(350));
  Settle({&a, &b, &c});
  const auto targets = EventFields("target");
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].at("changes"), "3");
  EXPECT_FALSE(targets[0].contains("change")) << "no one member's change to name";
}

TEST_F(CoordinatorTest, AJoinerGetsNothingUntilTheDonorsHaveRevoked) {
  Member a("a"), b("b");
  Settle({&a, &b});
  ASSERT_EQ(a.Shards().size() + b.Shards().size(), 8u);
  const int64_t fence_before = MetaField("fence_seq");

  Member c("c");
  HeartbeatReply joined = Beat(c);
  EXPECT_EQ(joined.status, Status::kOk);
  EXPECT_TRUE(joined.assigned.empty());
  EXPECT_EQ(joined.pending.size(), 2u) << "c's target shards are still held by a and b";

  // The donors are told to revoke; they drain first (still running the shards).
  HeartbeatReply to_a = Beat(a, /*revoke_at_once=*/false);
  EXPECT_EQ(to_a.status, Status::kRevokePending) << to_a.detail;
  EXPECT_EQ(ShardsOf(to_a).size(), 3u) << "the shards a keeps are listed";
  EXPECT_TRUE(Beat(c).assigned.empty()) << "nothing is granted while a still drains";

  // Now a reports its revocation; c gets the shard with a token above every earlier one.
  a.Apply(to_a, /*revoke_at_once=*/true);
  EXPECT_EQ(Beat(a).status, Status::kOk);
  HeartbeatReply granted = Beat(c);
  ASSERT_EQ(granted.assigned.size(), 1u);
  EXPECT_GT(granted.assigned[0].token, fence_before);
  Settle({&a, &b, &c});
  EXPECT_EQ(a.Shards().size() + b.Shards().size() + c.Shards().size(), 8u);
  for (int shard : c.Shards()) {
    EXPECT_FALSE(a.Shards().contains(shard) || b.Shards().contains(shard)) << shard;
  }
}

TEST_F(CoordinatorTest, EpochRulesFenceAheadAndUnknownMembers) {
  Member a("a");
  Settle({&a});
  const int64_t epoch = a.epoch();
  Member ahead = a;
  ahead.SetEpoch(epoch + 5);
  EXPECT_EQ(Beat(ahead).status, Status::kFencedMemberEpoch);
  Member stranger("stranger");
  stranger.SetEpoch(3);
  HeartbeatReply unknown = Beat(stranger);
  EXPECT_EQ(unknown.status, Status::kUnknownMemberId);
  EXPECT_TRUE(stranger.running().empty());
  EXPECT_EQ(stranger.epoch(), kJoinEpoch) << "the fencing flow rejoins with epoch 0";
}

TEST_F(CoordinatorTest, ALostReplyIsRepeatedWithThePreviousEpochButNoOlderOne) {
  Member a("a");
  Settle({&a});
  Member b("b");
  Beat(b);  // a new target: a must give shards up, then moves to the new epoch
  HeartbeatReply told = Beat(a, /*revoke_at_once=*/false);
  ASSERT_EQ(told.status, Status::kRevokePending);
  a.Apply(told, /*revoke_at_once=*/true);
  const Member lost = a;  // the request whose reply will be lost
  HeartbeatReply moved = Beat(a);
  ASSERT_EQ(moved.status, Status::kOk);
  ASSERT_GT(a.epoch(), lost.epoch());

  Member repeat = lost;  // the member never saw `moved`: it sends its previous epoch again
  HeartbeatReply again = Beat(repeat);
  EXPECT_EQ(again.status, Status::kOk) << again.detail;
  EXPECT_EQ(again.member_epoch, a.epoch());

  Member older = lost;
  older.SetEpoch(lost.epoch() - 1);
  ASSERT_GT(older.epoch(), 0);
  EXPECT_EQ(Beat(older).status, Status::kFencedMemberEpoch);
}

TEST_F(CoordinatorTest, SessionExpiryFreesTheShardsForTheSurvivors) {
  timing_.session = Millis(300);
  Member a("a"), b("b");
  Settle({&a, &b});
  ASSERT_EQ(a.Shards().size(), 4u);
  std::this_thread::sleep_for(Millis(150));
  Beat(a);  // a keeps its session; b falls silent
  std::this_thread::sleep_for(Millis(250));
  Settle({&a});
  EXPECT_EQ(a.Shards().size(), 8u);
  EXPECT_EQ(Events("fenced"), 1);
  HeartbeatReply late = Beat(b);
  EXPECT_EQ(late.status, Status::kUnknownMemberId) << "b was expired: it must rejoin";
}

TEST_F(CoordinatorTest, ARevokingMemberIsFencedAtTheRebalanceTimeout) {
  timing_.rebalance = Millis(300);
  Member a("a"), b("b");
  Settle({&a});
  Beat(b);
  HeartbeatReply told = Beat(a, /*revoke_at_once=*/false);
  ASSERT_EQ(told.status, Status::kRevokePending);
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(Millis(100));
    Beat(b);  // b heartbeats on; a keeps draining without reporting REVOKED or heartbeating
  }
  Settle({&b});
  EXPECT_EQ(b.Shards().size(), 8u);
  auto events = server_.Run({"XRANGE", keys_.events, "-", "+"});
  bool rebalance_timeout = false;
  for (size_t i = 0; i < events.view().Size(); ++i) {
    auto fields = events.view()[i][1];
    for (size_t f = 0; f + 1 < fields.Size(); f += 2) {
      if (fields[f].Str() == "reason" && fields[f + 1].Str() == "rebalance_timeout") {
        rebalance_timeout = true;
      }
    }
  }
  EXPECT_TRUE(rebalance_timeout);
  EXPECT_EQ(Beat(a).status, Status::kUnknownMemberId);
}

TEST_F(CoordinatorTest, AShardNeitherAssignedNorRevokingIsStaleOwnership) {
  Member a("a"), b("b");
  Settle({&a, &b});
  int foreign = *b.Shards().begin();
  a.PretendToRun(foreign, 1);
  HeartbeatReply reply = Beat(a);
  EXPECT_EQ(reply.status, Status::kFencedMemberEpoch);
  EXPECT_NE(reply.detail.find("stale ownership"), std::string::npos) << reply.detail;
  EXPECT_FALSE(Hash(keys_.members).contains("a")) << "the member is removed";
}

TEST_F(CoordinatorTest, LeavingFreesTheShardsAndTheRestTakeThemOver) {
  Member a("a"), b("b");
  Settle({&a, &b});
  b.Leave();
  EXPECT_EQ(Beat(b).status, Status::kOk);
  b.Leave();
  EXPECT_EQ(Beat(b).status, Status::kOk) << "leaving twice is harmless";
  EXPECT_FALSE(Hash(keys_.members).contains("b"));
  Settle({&a});
  EXPECT_EQ(a.Shards().size(), 8u);
  EXPECT_EQ(Hash(keys_.owner).size(), 8u);
}

TEST_F(CoordinatorTest, AStaticMemberComingBackGetsItsShardsWithoutARebalance) {
  Member a("a-1", "pod-a"), b("b-1", "pod-b");
  Settle({&a, &b});
  const std::set<int> b_shards = b.Shards();
  const int64_t targets = MetaField("targets");
  b.SetEpoch(kStaticLeaveEpoch);
  EXPECT_EQ(Beat(b).status, Status::kOk);
  EXPECT_EQ(Hash(keys_.owner).size(), 4u) << "b's shards are freed";
  Beat(a);
  EXPECT_EQ(a.Shards().size(), 4u) << "b's shards stay reserved for its instance";

  Member b2("b-2", "pod-b");  // the restarted pod: a new process, the same instance id
  Settle({&a, &b2});
  EXPECT_EQ(b2.Shards(), b_shards);
  EXPECT_EQ(MetaField("targets"), targets) << "no target computation";
}

TEST_F(CoordinatorTest, AnInstanceHeldByALiveProcessWaitsOrIsTakenOver) {
  Member a("a-1", "pod-a");
  Settle({&a});
  Member twin("a-2", "pod-a");
  HeartbeatRequest wait = twin.Request(timing_);
  wait.static_takeover_wait = true;
  HeartbeatReply waited = BeatWith(twin, wait);
  EXPECT_EQ(waited.status, Status::kUnreleasedInstanceId) << waited.detail;

  // immediate: the newcomer takes the target over; the old process is removed.
  Settle({&twin});
  EXPECT_EQ(twin.Shards().size(), 8u);
  EXPECT_EQ(Beat(a).status, Status::kUnknownMemberId);

  // Two live processes sharing the id flip it back and forth: after 3 flips in 60 s, refused.
  HeartbeatReply last;
  for (int flip = 0; flip < 6; ++flip) {
    Member& joiner = flip % 2 == 0 ? a : twin;
    joiner.Rejoin();
    last = Beat(joiner);
    if (last.status == Status::kUnreleasedInstanceId) break;
  }
  EXPECT_EQ(last.status, Status::kUnreleasedInstanceId);
  EXPECT_NE(last.detail.find("two live processes"), std::string::npos) << last.detail;
}

TEST_F(CoordinatorTest, ConfigurationMismatchesAreInvalidRequestsThatWriteNothing) {
  Member a("a");
  Settle({&a});
  const auto meta_before = Hash(keys_.meta);
  Member other("other");
  HeartbeatRequest wrong_count = other.Request(timing_);
  wrong_count.shard_count = 16;
  HeartbeatReply refused = BeatWith(other, wrong_count);
  EXPECT_EQ(refused.status, Status::kInvalidRequest);
  EXPECT_NE(refused.detail.find("8 shards"), std::string::npos) << refused.detail;
  EXPECT_FALSE(Hash(keys_.members).contains("other"));

  HeartbeatRequest owned_on_join = other.Request(timing_);
  owned_on_join.owned = {1};
  EXPECT_EQ(BeatWith(other, owned_on_join).status, Status::kInvalidRequest);
  HeartbeatRequest bad_shard = a.Request(timing_);
  bad_shard.owned.push_back(99);
  EXPECT_EQ(BeatWith(a, bad_shard).status, Status::kInvalidRequest);
  EXPECT_EQ(Hash(keys_.meta), meta_before) << "a refused request writes nothing";
  HeartbeatRequest too_many = other.Request(timing_);
  too_many.shard_count = keys::kMaxShards + 1;
  EXPECT_EQ(BeatWith(other, too_many).status, Status::kInvalidRequest);
  server_.Run({"HSET", keys_.meta, "schema", "2"});
  HeartbeatReply newer = Beat(a);
  EXPECT_EQ(newer.status, Status::kInvalidRequest);
  EXPECT_NE(newer.detail.find("schema 2"), std::string::npos) << newer.detail;
}

// B5.1 with the real fenced install: after the coordinator's keys are lost, its new counter
// issues tokens below the installed fences; the install answers STALE, the member reports the
// conflict, and the repair issues a token above the installed one, which installs.
TEST_F(CoordinatorTest, AWipedCoordinatorIssuesTokensAboveTheInstalledOnesAfterAConflict) {
  timing_.shards = 2;
  for (const auto* script : FencedScripts()) ASSERT_TRUE(connection_->Run(script->Load()).ok());
  Member a("a");
  // Each grant is installed on its shard, as a member's takeover does; a STALE install is
  // reported as a conflict. Returns the shards whose install was refused.
  auto install_all = [&]() {
    std::set<int> refused;
    for (const auto& [shard, token] : std::map<int, int64_t>(a.running())) {
      FencedShardOps ops(keys::ShardKey(keys::DefaultKeyPattern("orders"), shard), "billing",
                         "pod-a", token, a.id(), a.epoch());
      auto reply = connection_->Run(ops.EnsureGroup("0"));
      if (reply.ok()) continue;
      auto installed = FencedShardOps::FencedBy(reply.status());
      EXPECT_TRUE(installed.has_value()) << reply.status().message();
      refused.insert(shard);
      a.ReportConflict(shard, installed.value_or(0));
    }
    return refused;
  };
  // Three rounds of grants (the member leaves and rejoins): the fences reach tokens 5 and 6.
  for (int round = 0; round < 3; ++round) {
    Settle({&a});
    ASSERT_EQ(a.running().size(), 2u);
    EXPECT_TRUE(install_all().empty());
    if (round < 2) {
      a.Leave();
      Beat(a);
    }
  }
  const int64_t highest = std::max(a.running().at(0), a.running().at(1));
  ASSERT_EQ(highest, 6);

  for (const std::string_view key : keys_.InOrder()) server_.Run({"DEL", std::string(key)});
  EXPECT_EQ(Beat(a).status, Status::kUnknownMemberId);
  HeartbeatReply rejoined = Beat(a);  // its metadata version is ahead of the new store
  EXPECT_EQ(rejoined.status, Status::kSyncMetadata) << rejoined.detail;
  Settle({&a});
  ASSERT_EQ(a.running().size(), 2u);
  EXPECT_LT(a.running().at(0), 5) << "the new counter starts low";
  EXPECT_EQ(install_all(), (std::set<int>{0, 1})) << "both installs are stale";
  HeartbeatReply conflict = Beat(a);
  EXPECT_EQ(conflict.status, Status::kSyncMetadata);
  Settle({&a});
  ASSERT_EQ(a.running().size(), 2u);
  EXPECT_GT(a.running().at(0), highest);
  EXPECT_GT(a.running().at(1), highest);
  EXPECT_TRUE(install_all().empty()) << "the repaired tokens install";
}

TEST_F(CoordinatorTest, ProgressIsRecordedOnlyForTheReportersOwnShards) {
  Member a("a"), b("b");
  Settle({&a, &b});
  HeartbeatRequest request = a.Request(timing_);
  const int mine = *a.Shards().begin();
  const int theirs = *b.Shards().begin();
  request.progress = {{mine, "5-0", 1, 2, Millis(1500)}, {theirs, "9-0", 0, 0, Millis(0)}};
  BeatWith(a, request);
  auto progress = Hash(keys_.progress);
  ASSERT_TRUE(progress.contains(std::to_string(mine)));
  const auto row = sharding::ParseProgressRow(progress[std::to_string(mine)]);
  ASSERT_TRUE(row) << progress[std::to_string(mine)];
  EXPECT_EQ(row->member, "a");
  EXPECT_EQ(row->last_acked_id, "5-0");
  EXPECT_EQ(row->in_flight, 1);
  EXPECT_EQ(row->pending, 2);
  // How long ago the member acknowledged becomes a time on Redis's clock.
  ASSERT_TRUE(row->acked_ms);
  EXPECT_EQ(*row->acked_ms, row->reported_ms - 1500);
  EXPECT_FALSE(progress.contains(std::to_string(theirs)));
}

// C2 "fenced ops (10m)": the data plane's refusals happen in each shard's slot; members report
// them and the coordinator records one event per report, from a member it knows or not.
TEST_F(CoordinatorTest, ReportedFencedOpsBecomeOneEventAndMalformedItemsAreDropped) {
  Member a("a");
  Settle({&a});
  HeartbeatRequest request = a.Request(timing_);
  request.fenced_ops = {{"ack", 1}, {"read", 2}};
  BeatWith(a, request);
  HeartbeatRequest none = a.Request(timing_);
  BeatWith(a, none);  // nothing to report: no event

  // A forged report: only the well-formed item counts.
  HeartbeatRequest forged = a.Request(timing_);
  forged.fenced_ops = {{"READ", 2}, {"retry", 3}, {"", 4}, {"ack", -1}, {"x", 1000000000}};
  BeatWith(a, forged);

  std::vector<std::pair<std::string, std::string>> reports;  // count, ops
  auto events = server_.Run({"XRANGE", keys_.events, "-", "+"});
  for (size_t i = 0; i < events.view().Size(); ++i) {
    auto fields = events.view()[i][1];
    std::map<std::string, std::string> values;
    for (size_t f = 0; f + 1 < fields.Size(); f += 2) {
      values[std::string(fields[f].Str())] = std::string(fields[f + 1].Str());
    }
    if (values["type"] != "fenced_ops") continue;
    EXPECT_EQ(values["member"], "a");
    reports.emplace_back(values["count"], values["ops"]);
  }
  const std::vector<std::pair<std::string, std::string>> expected = {{"3", "ack:1,read:2"},
                                                                     {"3", "retry:3"}};
  EXPECT_EQ(reports, expected);
}

TEST_F(CoordinatorTest, TheGroupFiguresCountMembersAndUnownedShards) {
  timing_.initial_delay = Millis(300);
  Member a("a"), b("b");
  Beat(a);
  std::this_thread::sleep_for(Millis(100));
  HeartbeatReply waiting = Beat(b);
  EXPECT_EQ(waiting.members, 2);
  EXPECT_EQ(waiting.unowned_shards, 8) << "nothing is granted inside the initial delay";
  EXPECT_GE(waiting.unowned_oldest.count(), 100);
  EXPECT_LT(waiting.unowned_oldest.count(), 5000);
  std::this_thread::sleep_for(Millis(250));
  Settle({&a, &b});
  HeartbeatReply settled = Beat(a);
  EXPECT_EQ(settled.unowned_shards, 0);
  EXPECT_EQ(settled.unowned_oldest.count(), 0);
  b.Leave();
  Beat(b);
  HeartbeatReply after_leave = Beat(a);  // b's shards wait for the recomputed target's grant
  EXPECT_EQ(after_leave.members, 1);
  Settle({&a});
  EXPECT_EQ(Beat(a).unowned_shards, 0);
}

TEST_F(CoordinatorTest, AnEmptyLastAckedIdIsStillRecordedAsProgress) {
  Member a("a");
  Settle({&a});
  HeartbeatRequest request = a.Request(timing_);
  request.progress = {{0, "", 1, 3}};
  BeatWith(a, request);
  auto progress = Hash(keys_.progress);
  ASSERT_TRUE(progress.contains("0"));
  EXPECT_EQ(progress["0"].rfind("a||1|3|", 0), 0u) << progress["0"];
  const auto row = sharding::ParseProgressRow(progress["0"]);
  ASSERT_TRUE(row) << progress["0"];
  EXPECT_FALSE(row->acked_ms) << "no acknowledgement yet";
}

TEST_F(CoordinatorTest, LaterRevocationsDoNotPushTheRebalanceDeadlineBack) {
  timing_.rebalance = Millis(2000);
  Member a("a"), b("b"), c("c");
  Settle({&a});
  Beat(b);
  ASSERT_EQ(Beat(a, /*revoke_at_once=*/false).status, Status::kRevokePending);
  const std::string deadline(server_.Run({"ZSCORE", keys_.sessions, "a"}).view().Str());
  std::this_thread::sleep_for(Millis(50));
  Beat(c);  // a second target: a has more to revoke
  HeartbeatReply more = Beat(a, /*revoke_at_once=*/false);
  ASSERT_EQ(more.status, Status::kRevokePending);
  EXPECT_EQ(std::string(server_.Run({"ZSCORE", keys_.sessions, "a"}).view().Str()), deadline);
}

TEST_F(CoordinatorTest, AShardTheTargetGivesBackWhileDrainingStaysOnItsToken) {
  Member a("a"), b("b");
  Settle({&a});
  const std::map<int, int64_t> before = a.running();
  Beat(b);
  HeartbeatReply told = Beat(a, /*revoke_at_once=*/false);  // a drains b's four shards
  ASSERT_EQ(told.status, Status::kRevokePending);
  b.Leave();
  Beat(b);
  HeartbeatReply back = Beat(a);  // the next target gives everything back to a
  EXPECT_EQ(back.status, Status::kOk) << back.detail;
  EXPECT_EQ(a.running(), before) << "the same shards on the same tokens";
  EXPECT_EQ(Events("kept"), 4);
}

TEST_F(CoordinatorTest, AFlipHistorySurvivesTheHoldersRejoin) {
  Member a("a-1", "pod-a"), twin("a-2", "pod-a");
  Settle({&a});
  for (Member* joiner : {&twin, &a, &twin}) {  // three takeovers within 60 s
    joiner->Rejoin();
    ASSERT_EQ(Beat(*joiner).status, Status::kOk);
  }
  twin.Rejoin();  // the holder is fenced and rejoins under its own id
  ASSERT_EQ(Beat(twin).status, Status::kOk);
  a.Rejoin();
  HeartbeatReply refused = Beat(a);
  EXPECT_EQ(refused.status, Status::kUnreleasedInstanceId) << refused.detail;
}

TEST_F(CoordinatorTest, TheLargestShardCountStartsAGroup) {
  timing_.shards = keys::kMaxShards;
  Member a("a");
  HeartbeatReply first = Beat(a);
  ASSERT_EQ(first.status, Status::kOk) << first.detail;
  EXPECT_EQ(first.assigned.size(), static_cast<size_t>(keys::kMaxShards));
  EXPECT_EQ(Hash(keys_.target).size(), static_cast<size_t>(keys::kMaxShards));
}

// B10.4 at the script level: ten members joining within the initial delay cause one target
// computation, one grant per shard and no revocation.
TEST_F(CoordinatorTest, AHerdJoiningWithinTheInitialDelayComputesOneTarget) {
  timing_.shards = 16;
  timing_.initial_delay = Millis(500);
  timing_.min_interval = Millis(200);
  std::vector<Member> herd;
  for (int i = 0; i < 10; ++i) herd.emplace_back("m" + std::to_string(i));
  for (Member& member : herd) {
    Beat(member);
    std::this_thread::sleep_for(Millis(20));
  }
  std::this_thread::sleep_for(Millis(550));
  std::vector<Member*> all;
  for (Member& member : herd) all.push_back(&member);
  Settle(all);
  EXPECT_EQ(MetaField("targets"), 1);
  EXPECT_EQ(Events("grant"), 16);
  EXPECT_EQ(Events("revoke"), 0);
}

TEST_F(CoordinatorTest, WithoutTheInitialDelayTheHerdRevokesAsItGrows) {
  timing_.shards = 16;
  std::vector<Member> herd;
  for (int i = 0; i < 10; ++i) herd.emplace_back("m" + std::to_string(i));
  std::vector<Member*> all;
  for (Member& member : herd) {
    all.push_back(&member);
    Settle(all);
  }
  EXPECT_EQ(MetaField("targets"), 10);
  EXPECT_GT(Events("revoke"), 0);
}

}  // namespace
}  // namespace streamcar::sharding::testing

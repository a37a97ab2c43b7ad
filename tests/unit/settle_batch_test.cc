#include "sidecar/runtime/settle_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sidecar/redis/settle_scripts.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::runtime {
namespace {

using streamcar::testing::ArgsOf;
using streamcar::testing::Arr;
using streamcar::testing::Bulk;
using streamcar::testing::EntryResp;
using streamcar::testing::Err;
using streamcar::testing::Int;
using streamcar::testing::Nil;
using streamcar::testing::ReplyOf;
using Step = SettlePlan::Step;

std::vector<std::string> Ids(const std::string& prefix, size_t n) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(prefix + std::to_string(i) + "-0");
  return ids;
}

StreamEntry Entry(const std::string& id) {
  StreamEntry e;
  e.id = id;
  e.fields.push_back({"k", "v"});
  return e;
}

redis::DeadLetterMeta Meta(const std::string& reason) {
  return {reason, "422", "bad", 1, 1'700'000'000'000};
}

// The replies `resp` (one RESP reply each), as a connection hands them over.
redis::BatchResult Replies(const std::vector<std::string>& resp) {
  redis::BatchResult result;
  for (const auto& r : resp) result.replies.push_back(ReplyOf(r));
  return result;
}

class SettleBatchTest : public ::testing::Test {
 protected:
  SettlePlan Plan(SettleWork work, redis::AckMode mode = redis::AckMode::kAckOnly) {
    return SettleBatch(ops_, mode, {"orders:dlq", 0}, std::move(work));
  }

  redis::PlainOps ops_{"orders", "billing", "c1"};
  StreamEntry dead_entry_ = Entry("7-0");
};

TEST(SettleClassTest, NamesAreTheMetricLabels) {
  EXPECT_EQ(Name(SettleClass::kLostLease), "lost_lease");
  EXPECT_EQ(Name(SettleClass::kDefinite), "definite");
  EXPECT_EQ(Name(SettleClass::kAmbiguous), "ambiguous");
}

// Scripts load first, the keepalive next, then acks, gone acks, dead letters, retry claims.
TEST_F(SettleBatchTest, StepsComeInOrderWithTheirSpans) {
  SettleWork work;
  work.acks = {"1-0", "2-0"};
  work.gone_acks = {"3-0"};
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("rejected")});
  work.retry_claims = {"4-0"};
  work.keepalive = {"4-0", "5-0"};
  work.load_scripts = true;
  SettlePlan plan = Plan(std::move(work));
  const size_t loads = redis::SettleScripts().size();
  ASSERT_EQ(plan.commands.size(), loads + 5);
  ASSERT_EQ(plan.spans.size(), 6u);
  EXPECT_TRUE(plan.loads_scripts());
  EXPECT_EQ(plan.spans[0].step, Step::kLoadScripts);
  EXPECT_EQ(ArgsOf(plan.commands[0])[0], "SCRIPT");
  EXPECT_EQ(plan.spans[1].step, Step::kKeepAlive);
  EXPECT_EQ(ArgsOf(plan.commands[loads])[1], redis::KeepAliveScript().sha());
  EXPECT_EQ(plan.spans[2].step, Step::kAck);
  EXPECT_EQ(ArgsOf(plan.commands[loads + 1]),
            (std::vector<std::string>{"XACK", "orders", "billing", "1-0", "2-0"}));
  EXPECT_EQ(plan.spans[3].step, Step::kGoneAck);
  EXPECT_EQ(plan.spans[3].ids, (std::vector<std::string>{"3-0"}));
  EXPECT_EQ(plan.spans[4].step, Step::kDeadLetter);
  EXPECT_EQ(plan.spans[4].meta.reason, "rejected");
  EXPECT_EQ(ArgsOf(plan.commands[loads + 3])[1], redis::DeadLetterScript().sha());
  EXPECT_EQ(plan.spans[5].step, Step::kRetryClaim);
  EXPECT_EQ(ArgsOf(plan.commands[loads + 4])[1], redis::RetryClaimScript().sha());
  for (size_t i = 1; i < plan.spans.size(); ++i) {
    EXPECT_EQ(plan.spans[i].begin, plan.spans[i - 1].end);
  }
  EXPECT_EQ(plan.spans.back().end, plan.commands.size());
}

// Acks alone use no script: no SCRIPT LOAD in front of them, even when asked.
TEST_F(SettleBatchTest, AcksAloneLoadNoScripts) {
  SettleWork work;
  work.acks = {"1-0"};
  work.load_scripts = true;
  SettlePlan plan = Plan(std::move(work));
  EXPECT_FALSE(plan.loads_scripts());
  EXPECT_EQ(plan.commands.size(), 1u);
}

TEST_F(SettleBatchTest, IdsAreChunkedAtAThousandPerCommand) {
  SettleWork work;
  work.acks = Ids("a", 2500);
  work.keepalive = Ids("k", 1001);
  work.retry_claims = Ids("r", 1000);
  SettlePlan plan = Plan(std::move(work), redis::AckMode::kAckThenDelete);
  std::vector<std::pair<Step, size_t>> spans;
  for (const auto& span : plan.spans) spans.emplace_back(span.step, span.ids.size());
  EXPECT_EQ(spans, (std::vector<std::pair<Step, size_t>>{{Step::kKeepAlive, 1000},
                                                         {Step::kKeepAlive, 1},
                                                         {Step::kAck, 1000},
                                                         {Step::kAck, 1000},
                                                         {Step::kAck, 500},
                                                         {Step::kRetryClaim, 1000}}));
  // MULTI XACK XDEL EXEC per chunk.
  EXPECT_EQ(plan.spans[2].end - plan.spans[2].begin, 4u);
  EXPECT_EQ(ArgsOf(plan.commands[plan.spans[2].begin + 1]).size(), 3u + 1000u);
  EXPECT_EQ(plan.spans[4].ids.back(), "a2499-0");
  EXPECT_EQ(plan.commands.size(), 2u + 3u * 4u + 1u);
}

TEST_F(SettleBatchTest, EveryStepApplied) {
  SettleWork work;
  work.keepalive = {"4-0", "5-0", "6-0"};
  work.acks = {"1-0", "2-0"};
  work.gone_acks = {"3-0"};
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("rejected")});
  work.retry_claims = {"4-0", "5-0", "6-0"};
  SettlePlan plan = Plan(std::move(work));
  SettleResult r = ApplySettleReplies(
      plan, Replies({Arr({Bulk("6-0")}), Int(2), Int(1), Int(1),
                     // 4-0 claimed, 5-0 claimed with its payload gone, 6-0 lost.
                     Arr({Arr({EntryResp("4-0", {"k", "v"}), Arr({Bulk("5-0"), Nil()})}),
                          Arr({Bulk("6-0")})})}));
  EXPECT_EQ(r.keepalive_lost, (std::vector<std::string>{"6-0"}));
  EXPECT_EQ(r.acked, (std::vector<std::string>{"1-0", "2-0"}));
  EXPECT_EQ(r.gone_acked, (std::vector<std::string>{"3-0"}));
  ASSERT_EQ(r.dead_lettered.size(), 1u);
  EXPECT_EQ(r.dead_lettered[0].id, "7-0");
  EXPECT_EQ(r.dead_lettered[0].meta.reason, "rejected");
  EXPECT_EQ(r.claimed, (std::vector<std::string>{"4-0"}));
  EXPECT_EQ(r.claimed_gone, (std::vector<std::string>{"5-0"}));
  EXPECT_EQ(r.claim_lost, (std::vector<std::string>{"6-0"}));
  EXPECT_EQ(r.Count(SettleClass::kLostLease), 1u);
  EXPECT_EQ(r.Count(SettleClass::kDefinite), 0u);
  EXPECT_EQ(r.Count(SettleClass::kAmbiguous), 0u);
  EXPECT_TRUE(r.definite.empty());
  EXPECT_TRUE(r.ambiguous.empty());
  EXPECT_TRUE(r.unsent.empty());
  EXPECT_FALSE(r.scripts_missing());
}

// Redis 6.2 answers a claim of a deleted entry with a nil element: ours, payload gone.
TEST_F(SettleBatchTest, AClaimAnsweredWithNilIsPayloadGone) {
  SettleWork work;
  work.retry_claims = {"4-0", "5-0"};
  SettleResult r = ApplySettleReplies(
      Plan(std::move(work)), Replies({Arr({Arr({Nil(), EntryResp("5-0", {"k", "v"})}), Arr({})})}));
  EXPECT_EQ(r.claimed, (std::vector<std::string>{"5-0"}));
  EXPECT_EQ(r.claimed_gone, (std::vector<std::string>{"4-0"}));
}

TEST_F(SettleBatchTest, ADeadLetterNoLongerOursIsALostLease) {
  SettleWork work;
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("dropped")});
  SettleResult r = ApplySettleReplies(Plan(std::move(work)), Replies({Int(0)}));
  EXPECT_TRUE(r.dead_lettered.empty());
  EXPECT_EQ(r.dead_letter_lost, (std::vector<std::string>{"7-0"}));
  EXPECT_EQ(r.Count(SettleClass::kLostLease), 1u);
}

// A job whose entry the ledger no longer holds writes nothing.
TEST_F(SettleBatchTest, ADeadLetterWithoutItsEntryIsLeftOut) {
  SettleWork work;
  work.dead_letters.push_back({"7-0", nullptr, Meta("dropped")});
  EXPECT_TRUE(Plan(std::move(work)).empty());
}

// Every step's error reply is "definite", with its text; nothing is applied.
TEST_F(SettleBatchTest, ErrorRepliesAreDefinitePerStep) {
  SettleWork work;
  work.keepalive = {"4-0", "5-0"};
  work.acks = {"1-0", "2-0"};
  work.gone_acks = {"3-0"};
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("rejected")});
  work.retry_claims = {"4-0"};
  SettleResult r = ApplySettleReplies(
      Plan(std::move(work)),
      Replies({Err("NOPERM keepalive"), Err("OOM command not allowed"), Err("READONLY replica"),
               Err("WRONGTYPE Operation against a key"), Err("NOGROUP No such key")}));
  EXPECT_EQ(r.definite.acks, (std::vector<std::string>{"1-0", "2-0"}));
  EXPECT_EQ(r.definite.gone_acks, (std::vector<std::string>{"3-0"}));
  EXPECT_EQ(r.ack_error, "READONLY replica");
  ASSERT_EQ(r.definite.dead_letters.size(), 1u);
  EXPECT_EQ(r.definite.dead_letters[0].error, "WRONGTYPE Operation against a key");
  EXPECT_EQ(r.definite.dead_letters[0].meta.reason, "rejected");
  EXPECT_EQ(r.definite.retry_claims, (std::vector<std::string>{"4-0"}));
  EXPECT_EQ(r.claim_error, "NOGROUP No such key");
  EXPECT_TRUE(r.keepalive_failed());
  EXPECT_EQ(r.keepalive_error, "NOPERM keepalive");
  EXPECT_EQ(r.Count(SettleClass::kDefinite), 2u + 2u + 1u + 1u + 1u);
  EXPECT_TRUE(r.acked.empty());
  EXPECT_TRUE(r.gone_acked.empty());
  EXPECT_TRUE(r.claimed.empty());
  EXPECT_TRUE(r.claimed_gone.empty()) << "an error is unknown, never gone (SPEC 3.2)";
  EXPECT_TRUE(r.ambiguous.empty());
}

// XACK + XDEL in MULTI/EXEC: an error queued or inside EXEC refuses the whole chunk.
TEST_F(SettleBatchTest, AnErrorInsideExecIsDefinite) {
  SettleWork work;
  work.acks = {"1-0"};
  work.gone_acks = {"2-0"};
  SettlePlan plan = Plan(std::move(work), redis::AckMode::kAckThenDelete);
  SettleResult r =
      ApplySettleReplies(plan, Replies({"+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
                                        Arr({Int(1), Err("OOM command not allowed")}), "+OK\r\n",
                                        "+QUEUED\r\n", "+QUEUED\r\n", Arr({Int(1), Int(1)})}));
  EXPECT_EQ(r.definite.acks, (std::vector<std::string>{"1-0"}));
  EXPECT_EQ(r.ack_error, "OOM command not allowed");
  EXPECT_EQ(r.gone_acked, (std::vector<std::string>{"2-0"}));
}

// NOSCRIPT: nothing ran; not a failure of any class.
TEST_F(SettleBatchTest, NoScriptIsNotAFailure) {
  SettleWork work;
  work.keepalive = {"4-0"};
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("rejected")});
  work.retry_claims = {"4-0"};
  const std::string noscript = Err("NOSCRIPT No matching script. Please use EVAL.");
  SettleResult r =
      ApplySettleReplies(Plan(std::move(work)), Replies({noscript, noscript, noscript}));
  EXPECT_TRUE(r.scripts_missing());
  EXPECT_TRUE(r.noscript.keepalive);
  ASSERT_EQ(r.noscript.dead_letters.size(), 1u);
  EXPECT_EQ(r.noscript.dead_letters[0].id, "7-0");
  EXPECT_EQ(r.noscript.retry_claims, (std::vector<std::string>{"4-0"}));
  EXPECT_EQ(r.Count(SettleClass::kDefinite), 0u);
  EXPECT_FALSE(r.keepalive_failed());
  EXPECT_TRUE(r.definite.empty());
}

TEST_F(SettleBatchTest, AFailedScriptLoadIsReported) {
  SettleWork work;
  work.keepalive = {"4-0"};
  work.load_scripts = true;
  SettlePlan plan = Plan(std::move(work));
  std::vector<std::string> replies(redis::SettleScripts().size(), Bulk("sha"));
  replies[1] = Err("NOPERM this user has no permissions to run the 'script|load' command");
  replies.push_back(Arr({}));
  SettleResult r = ApplySettleReplies(plan, Replies(replies));
  EXPECT_TRUE(r.scripts_answered);
  EXPECT_NE(r.scripts_error.find("NOPERM"), std::string::npos);
  EXPECT_TRUE(r.keepalive_lost.empty());
  EXPECT_FALSE(r.keepalive_failed());
}

// The connection broke after the keepalive and the first ack chunk were answered: those are
// applied; what was sent without a whole answer is ambiguous (the MULTI chunk half-answered too).
TEST_F(SettleBatchTest, APrefixIsAppliedAndTheRestIsAmbiguous) {
  SettleWork work;
  work.keepalive = {"4-0"};
  work.acks = Ids("a", 1001);
  work.gone_acks = {"3-0"};
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("rejected")});
  work.retry_claims = {"4-0"};
  SettlePlan plan = Plan(std::move(work), redis::AckMode::kAckThenDelete);
  redis::BatchResult result = Replies({Arr({}), "+OK\r\n", "+QUEUED\r\n", "+QUEUED\r\n",
                                       Arr({Int(1000), Int(1000)}), "+OK\r\n", "+QUEUED\r\n"});
  result.failure = Status(StatusCode::kTimeout, "redis command timed out");
  SettleResult r = ApplySettleReplies(plan, result);
  EXPECT_EQ(r.acked.size(), 1000u);
  EXPECT_EQ(r.ambiguous.acks, (std::vector<std::string>{"a1000-0"}));
  EXPECT_EQ(r.ambiguous.gone_acks, (std::vector<std::string>{"3-0"}));
  ASSERT_EQ(r.ambiguous.dead_letters.size(), 1u);
  EXPECT_EQ(r.ambiguous.retry_claims, (std::vector<std::string>{"4-0"}));
  EXPECT_FALSE(r.ambiguous.keepalive);
  EXPECT_EQ(r.failure, "redis command timed out");
  EXPECT_EQ(r.Count(SettleClass::kAmbiguous), 4u);
  EXPECT_TRUE(r.unsent.empty());
}

// A keepalive sent without an answer is ambiguous but releases nothing: it is not counted.
TEST_F(SettleBatchTest, AnUnansweredKeepaliveIsNotCounted) {
  SettleWork work;
  work.keepalive = {"4-0", "5-0"};
  redis::BatchResult result;
  result.failure = Status(StatusCode::kIo, "connection reset");
  SettleResult r = ApplySettleReplies(Plan(std::move(work)), result);
  EXPECT_TRUE(r.ambiguous.keepalive);
  EXPECT_EQ(r.Count(SettleClass::kAmbiguous), 0u);
}

// Nothing reached Redis: no step is ambiguous, everything is kept for after the reconnect.
TEST_F(SettleBatchTest, NotWrittenIsNeitherAmbiguousNorDefinite) {
  SettleWork work;
  work.keepalive = {"4-0"};
  work.acks = {"1-0"};
  work.gone_acks = {"3-0"};
  work.dead_letters.push_back({"7-0", &dead_entry_, Meta("rejected")});
  work.retry_claims = {"4-0"};
  redis::BatchResult result;
  result.written = false;
  result.failure = Status(StatusCode::kIo, "redis unreachable");
  SettleResult r = ApplySettleReplies(Plan(std::move(work)), result);
  EXPECT_TRUE(r.ambiguous.empty());
  EXPECT_TRUE(r.definite.empty());
  EXPECT_EQ(r.unsent.acks, (std::vector<std::string>{"1-0"}));
  EXPECT_EQ(r.unsent.gone_acks, (std::vector<std::string>{"3-0"}));
  EXPECT_EQ(r.unsent.dead_letters.size(), 1u);
  EXPECT_EQ(r.unsent.retry_claims, (std::vector<std::string>{"4-0"}));
  EXPECT_TRUE(r.unsent.keepalive);
  for (auto c : {SettleClass::kLostLease, SettleClass::kDefinite, SettleClass::kAmbiguous}) {
    EXPECT_EQ(r.Count(c), 0u) << Name(c);
  }
}

TEST_F(SettleBatchTest, UndoReadsCountsWhatWasTakenBack) {
  SettleWork work;
  work.undo_reads = Ids("u", 1500);
  SettlePlan plan = Plan(std::move(work));
  ASSERT_EQ(plan.commands.size(), 2u);
  EXPECT_EQ(ArgsOf(plan.commands[0])[1], redis::UndoReadsScript().sha());
  SettleResult r = ApplySettleReplies(plan, Replies({Int(998), Int(500)}));
  EXPECT_EQ(r.undone, 1498);
  r = ApplySettleReplies(plan, Replies({Int(3), Err("BUSY script")}));
  EXPECT_EQ(r.undone, 3);
  EXPECT_EQ(r.undo_error, "BUSY script");
  EXPECT_EQ(r.Count(SettleClass::kDefinite), 0u) << "shutdown's undo is not a settlement";
}

}  // namespace
}  // namespace streamcar::runtime

// The fenced read's two steps as pure logic (FencedShardOps::WatchFence, CheckFence, ReadWatched,
// ParseWatchedRead): what each step sends, and what each answer means. The same steps run
// against a real redis-server in tests/integration/sharding/fenced_script_test.cc.

#include <gtest/gtest.h>

#include <vector>

#include "sidecar/sharding/fenced_ops.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::sharding {
namespace {

using testing::ArgsOf;
using testing::Bulk;
using testing::Err;
using testing::Nil;
using testing::NilArray;
using testing::ReplyOf;

const std::string kOk = "+OK\r\n";
const std::string kQueued = "+QUEUED\r\n";

std::vector<redis::Reply> Replies(const std::vector<std::string>& resp) {
  std::vector<redis::Reply> out;
  for (const auto& r : resp) out.push_back(ReplyOf(r));
  return out;
}

FencedShardOps Ops() { return FencedShardOps("orders:{3}", "billing", "pod-a", 7, "m1", 1); }

// The transaction opens in the first step: a read is never sent behind a MULTI not yet answered.
TEST(FencedRead, TheFirstStepWatchesTheFenceReadsItsTokenAndOpensTheTransaction) {
  const auto watch = Ops().WatchFence();
  ASSERT_EQ(watch.size(), 4u);
  EXPECT_EQ(ArgsOf(watch[0]), (std::vector<std::string>{"UNWATCH"}));
  EXPECT_EQ(ArgsOf(watch[1]), (std::vector<std::string>{"WATCH", Ops().fence_key()}));
  EXPECT_EQ(ArgsOf(watch[2]), (std::vector<std::string>{"HGET", Ops().fence_key(), "token"}));
  EXPECT_EQ(ArgsOf(watch[3]), (std::vector<std::string>{"MULTI"}));
  const auto read = Ops().ReadWatched(100);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(ArgsOf(read[0]),
            (std::vector<std::string>{"XREADGROUP", "GROUP", "billing", "pod-a", "COUNT", "100",
                                      "STREAMS", "orders:{3}", ">"}));
  EXPECT_EQ(ArgsOf(read[2]), (std::vector<std::string>{"EXEC"}));
}

TEST(FencedRead, TheCheckPassesOnlyForThisTokenWithTheTransactionOpen) {
  auto ours = Ops().CheckFence(Replies({kOk, kOk, Bulk("7"), kOk}));
  EXPECT_TRUE(ours.status.ok());
  EXPECT_TRUE(ours.in_transaction);

  auto newer = Ops().CheckFence(Replies({kOk, kOk, Bulk("9"), kOk}));
  EXPECT_EQ(FencedShardOps::FencedBy(newer.status), 9);
  EXPECT_TRUE(newer.in_transaction) << "open: the caller must DISCARD it";

  auto none = Ops().CheckFence(Replies({kOk, kOk, Nil(), kOk}));
  EXPECT_EQ(FencedShardOps::FencedBy(none.status), 0) << "no fence reads as token 0";
}

// An ACL user allowed WATCH but not MULTI: the refusal is the answer, no transaction is open, and
// the caller sends no read (it would run on its own, unchecked).
TEST(FencedRead, ARefusedMultiIsTheRefusalWithNoTransactionOpen) {
  auto refused = Ops().CheckFence(
      Replies({kOk, kOk, Bulk("7"), Err("NOPERM User app has no permissions to run 'multi'")}));
  EXPECT_TRUE(refused.status.IsServerError("NOPERM")) << refused.status.message();
  EXPECT_FALSE(refused.in_transaction);
  auto moved =
      Ops().CheckFence(Replies({kOk, Err("MOVED 3 10.0.0.2:6379"), Err("MOVED 3 x:1"), kOk}));
  EXPECT_TRUE(moved.status.IsServerError("MOVED"));
  EXPECT_TRUE(moved.in_transaction);
}

// A transaction left open (its close was refused, a LOADING server): the next round's commands
// are queued and its MULTI refused as nested. Still open: the caller closes it.
TEST(FencedRead, ATransactionLeftOpenIsSeenAndClosed) {
  auto nested = Ops().CheckFence(Replies({kQueued, Err("ERR WATCH inside MULTI is not allowed"),
                                          kQueued, Err("ERR MULTI calls can not be nested")}));
  EXPECT_FALSE(nested.status.ok());
  EXPECT_TRUE(nested.in_transaction);
  EXPECT_EQ(ArgsOf(FencedShardOps::CloseTransaction()), (std::vector<std::string>{"EXEC"}));
}

TEST(FencedRead, TheTransactionsAnswerIsTheEntriesTheTailOrNothingRun) {
  auto entries = FencedShardOps::ParseWatchedRead(Replies(
      {kQueued, kQueued,
       testing::Arr(
           {testing::Arr({testing::Arr(
                {Bulk("orders:{3}"), testing::Arr({testing::EntryResp("5-1", {"n", "1"})})})}),
            testing::Arr({testing::EntryResp("5-1", {"n", "1"})})})}));
  ASSERT_TRUE(entries.ok()) << entries.status().message();
  ASSERT_TRUE(entries->has_value());
  ASSERT_EQ((*entries)->entries.size(), 1u);
  EXPECT_EQ((*entries)->entries[0].id, "5-1");

  auto empty = FencedShardOps::ParseWatchedRead(
      Replies({kQueued, kQueued,
               testing::Arr({NilArray(), testing::Arr({testing::EntryResp("4-0", {"n", "0"})})})}));
  ASSERT_TRUE(empty.ok() && empty->has_value());
  EXPECT_TRUE((*empty)->entries.empty());
  EXPECT_EQ((*empty)->tail_id, "4-0");

  auto not_run = FencedShardOps::ParseWatchedRead(Replies({kQueued, kQueued, NilArray()}));
  ASSERT_TRUE(not_run.ok());
  EXPECT_FALSE(not_run->has_value()) << "EXEC ran nothing: the fence was written";

  auto refused = FencedShardOps::ParseWatchedRead(
      Replies({Err("ASK 3 10.0.0.3:6379"), kQueued,
               Err("EXECABORT Transaction discarded because of previous errors.")}));
  EXPECT_TRUE(refused.status().IsServerError("ASK")) << "the queued command's refusal, first";
}

}  // namespace
}  // namespace streamcar::sharding

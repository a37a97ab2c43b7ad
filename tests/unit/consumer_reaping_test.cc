// The pure half of consumer reaping (SPEC 4.6, redis/consumer_reaping.h): which consumers a pass
// sends to the script, and how the listing and the script's reply are read.

#include "sidecar/redis/consumer_reaping.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string_view>

#include "sidecar/runtime/consumer_reaper.h"
#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::Arr;
using testing::Bulk;
using testing::Err;
using testing::Int;
using testing::ReplyOf;

constexpr Millis kHour{3'600'000};

TEST(ReapCandidates, OnlyOthersWithNothingPendingIdleAboveTheThreshold) {
  const std::vector<ConsumerInfo> consumers = {
      {"me", 0, 9'000'000},      // self, however old
      {"old", 0, 7'200'000},     // the one
      {"holder", 3, 7'200'000},  // pending entries
      {"young", 0, 60'000},      // recent
      {"edge", 0, 3'600'000},    // exactly the threshold: not above it
      {"older", 0, 86'400'000},
  };
  EXPECT_EQ(ReapCandidates(consumers, "me", kHour), (std::vector<std::string>{"old", "older"}));
  EXPECT_TRUE(ReapCandidates({}, "me", kHour).empty());
}

TEST(NeedsRefresh, OnlyWhenMissingOrQuietWithNothingPending) {
  constexpr Millis kMinute{60'000};
  EXPECT_TRUE(NeedsRefresh({}, "me", kMinute));  // a peer removed it
  EXPECT_TRUE(NeedsRefresh(std::vector<ConsumerInfo>{{"me", 0, 60'001}}, "me", kMinute));
  EXPECT_FALSE(NeedsRefresh(std::vector<ConsumerInfo>{{"me", 0, 60'000}}, "me", kMinute));
  // With entries pending it is never a candidate, and a read of its own list would count them a
  // delivery.
  EXPECT_FALSE(NeedsRefresh(std::vector<ConsumerInfo>{{"me", 2, 9'000'000}}, "me", kMinute));
  EXPECT_TRUE(
      NeedsRefresh(std::vector<ConsumerInfo>{{"other", 0, 5}, {"me", 0, 90'000}}, "me", kMinute));
}

TEST(ParseConsumers, ReadsTheFlatRowsOfXinfoConsumers) {
  const auto reply = ReplyOf(Arr({
      Arr({Bulk("name"), Bulk("a"), Bulk("pending"), Int(0), Bulk("idle"), Int(7'200'123),
           Bulk("inactive"), Int(7'200'123)}),
      Arr({Bulk("name"), Bulk("b"), Bulk("pending"), Int(2), Bulk("idle"), Int(5)}),
  }));
  auto consumers = ParseConsumers(reply.view());
  ASSERT_TRUE(consumers.ok()) << consumers.status().message();
  ASSERT_EQ(consumers->size(), 2u);
  EXPECT_EQ((*consumers)[0].name, "a");
  EXPECT_EQ((*consumers)[0].pending, 0);
  EXPECT_EQ((*consumers)[0].idle_ms, 7'200'123);
  EXPECT_EQ((*consumers)[1].name, "b");
  EXPECT_EQ((*consumers)[1].pending, 2);
  EXPECT_TRUE(ParseConsumers(ReplyOf(Arr({})).view())->empty());
  EXPECT_EQ(ParseConsumers(ReplyOf(Err("NOGROUP No such key")).view()).status().code(),
            StatusCode::kServerError);
  // A row without its idle time is not guessed at.
  EXPECT_FALSE(ParseConsumers(ReplyOf(Arr({Arr({Bulk("name"), Bulk("a")})})).view()).ok());
}

TEST(ParseReap, ReadsOneVerdictPerName) {
  const auto reply =
      ReplyOf(Arr({Bulk("a"),       Bulk("removed"), Int(7'200'000), Int(0),         Bulk("b"),
                   Bulk("pending"), Int(12),         Int(1),         Bulk("me"),     Bulk("self"),
                   Int(9),          Int(0),          Bulk("c"),      Bulk("active"), Int(10),
                   Int(0),          Bulk("d"),       Bulk("gone"),   Int(0),         Int(0)}));
  auto results = ParseReap(reply.view());
  ASSERT_TRUE(results.ok()) << results.status().message();
  ASSERT_EQ(results->size(), 5u);
  EXPECT_EQ((*results)[0].verdict, ReapVerdict::kRemoved);
  EXPECT_EQ((*results)[0].idle_ms, 7'200'000);
  EXPECT_EQ((*results)[1].verdict, ReapVerdict::kPending);
  EXPECT_EQ((*results)[1].pending, 1);
  EXPECT_EQ((*results)[2].verdict, ReapVerdict::kSelf);
  EXPECT_EQ((*results)[3].verdict, ReapVerdict::kActive);
  EXPECT_EQ((*results)[4].verdict, ReapVerdict::kGone);
  EXPECT_EQ(ReapVerdictName(ReapVerdict::kPending), "pending");
  EXPECT_FALSE(ParseReap(ReplyOf(Arr({Bulk("a"), Bulk("eaten"), Int(1), Int(0)})).view()).ok());
  EXPECT_FALSE(ParseReap(ReplyOf(Arr({Bulk("a"), Bulk("removed")})).view()).ok());
  // A script refused by the ACL is that error, for the caller to class (redis::IsAclRefusal).
  EXPECT_TRUE(ParseReap(ReplyOf(Err("NOPERM this user has no permissions")).view())
                  .status()
                  .IsServerError("NOPERM"));
}

TEST(ReapConsumers, IsOneScriptCallWhoseOneKeyIsTheStream) {
  const std::vector<std::string> names = {"a", "b"};
  const Command command = ReapConsumers("orders", "billing", "pod-1", kHour, names);
  Command expected = ReapScript().Call({"orders"});
  expected.Arg("billing").Arg("pod-1").Arg(int64_t{3'600'000}).Arg("a").Arg("b");
  EXPECT_EQ(command.Encode(), expected.Encode());
  EXPECT_EQ(command.name(), "EVALSHA");
}

TEST(MissingAclRule, NamesTheRefusedCommandElseEveryRuleOfTheStep) {
  constexpr std::string_view kRules = "+xinfo|consumers +xgroup|delconsumer";
  // Sent as it is (NOPERM), and refused inside a script by Redis 7.2+ / Valkey: named.
  EXPECT_EQ(MissingAclRule(Status(StatusCode::kServerError,
                                  "NOPERM this user has no permissions to run the 'evalsha' "
                                  "command"),
                           kRules),
            "+evalsha");
  EXPECT_EQ(MissingAclRule(Status(StatusCode::kServerError,
                                  "ERR ACL failure in script: this user has no permissions to run "
                                  "the 'xgroup|delconsumer' command script: 6019..., on "
                                  "@user_script:15."),
                           kRules),
            "+xgroup|delconsumer");
  // Refused inside a script by Redis 7.0: which command is not said.
  EXPECT_EQ(MissingAclRule(Status(StatusCode::kServerError,
                                  "ERR The user executing the script can't run this command or "
                                  "subcommand script: 6019..., on @user_script:15."),
                           kRules),
            kRules);
}

// The first pass's offset (runtime/consumer_reaper.h): in [0, kEvery), spread over all of it.
TEST(FirstPassOffset, IsUniformOverAMinute) {
  using runtime::ConsumerReaper;
  constexpr Millis kEvery = ConsumerReaper::kEvery;
  EXPECT_EQ(ConsumerReaper::FirstPassOffset(0), Millis(0));
  EXPECT_EQ(ConsumerReaper::FirstPassOffset(59'999), Millis(59'999));
  EXPECT_EQ(ConsumerReaper::FirstPassOffset(60'000), Millis(0));
  EXPECT_LT(ConsumerReaper::FirstPassOffset(std::numeric_limits<uint64_t>::max()), kEvery);
  // Seeded draws, as a rollout's replicas make: every ten seconds of the minute gets some.
  std::mt19937_64 random(30);
  std::array<int, 6> per_ten_seconds{};
  for (int i = 0; i < 600; ++i) {
    const Millis offset = ConsumerReaper::FirstPassOffset(random());
    ASSERT_GE(offset, Millis(0));
    ASSERT_LT(offset, kEvery);
    ++per_ten_seconds.at(static_cast<size_t>(offset.count() / 10'000));
  }
  for (const int count : per_ten_seconds) EXPECT_GT(count, 60);
}

TEST(FirstPassOffset, TheTestHookSetsItWhenBelowAMinute) {
  using runtime::ConsumerReaper;
  ::setenv("STREAMCAR_TEST_REAP_OFFSET", "1500ms", 1);
  EXPECT_EQ(ConsumerReaper::FirstPassOffsetForProcess(), Millis(1500));
  ::setenv("STREAMCAR_TEST_REAP_OFFSET", "2m", 1);  // not an offset in [0, kEvery): random
  EXPECT_LT(ConsumerReaper::FirstPassOffsetForProcess(), ConsumerReaper::kEvery);
  ::unsetenv("STREAMCAR_TEST_REAP_OFFSET");
  EXPECT_LT(ConsumerReaper::FirstPassOffsetForProcess(), ConsumerReaper::kEvery);
}

}  // namespace
}  // namespace streamcar::redis

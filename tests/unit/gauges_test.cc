// The pending/lag/oldest-pending gauges as a build/apply pair, on canned XINFO GROUPS, XPENDING
// and XRANGE replies, with wall time from a manual clock.

#include "sidecar/runtime/gauges.h"

#include <gtest/gtest.h>
#include <prometheus/gauge.h>

#include <string>
#include <vector>

#include "tests/unit/resp_reply.h"

namespace streamcar::runtime {
namespace {

using testing::ArgsOf;
using testing::Arr;
using testing::Bulk;
using testing::Err;
using testing::Int;
using testing::Nil;
using testing::NilArray;
using testing::ReplyOf;

// One row of XINFO GROUPS (RESP2: a flat key/value array); `lag` is a RESP item (Int or Nil).
std::string GroupRow(const std::string& name, int64_t pending, const std::string& last_id,
                     const std::string& lag) {
  return Arr({Bulk("name"), Bulk(name), Bulk("consumers"), Int(1), Bulk("pending"), Int(pending),
              Bulk("last-delivered-id"), Bulk(last_id), Bulk("entries-read"), Int(5), Bulk("lag"),
              lag});
}

// An XRANGE reply of `n` entries.
std::string Entries(int n) {
  std::vector<std::string> entries;
  for (int i = 0; i < n; ++i) entries.push_back(testing::EntryResp(std::to_string(i) + "-0", {}));
  return Arr(entries);
}

// The XPENDING summary: nothing pending ...
const std::string kNonePending = Arr({Int(0), Nil(), Nil(), NilArray()});
// ... or `count` entries, the smallest id `smallest`.
std::string PendingFrom(int64_t count, const std::string& smallest) {
  return Arr({Int(count), Bulk(smallest), Bulk("9999999999999-0"),
              Arr({Arr({Bulk("c1"), Bulk(std::to_string(count))})})});
}

class GaugesTest : public ::testing::Test {
 protected:
  // Sends what is due at `now` and answers it with `resp` (and a beat's XPENDING with
  // `pending`); returns the arguments of the first command sent.
  std::vector<std::string> Beat(SteadyTime now, const std::string& resp,
                                const std::string& pending = kNonePending) {
    auto commands = gauges_.Commands(now);
    if (commands.empty()) return {};
    std::vector<redis::Reply> replies;
    replies.push_back(ReplyOf(resp));
    if (ArgsOf(commands.front()).front() == "XINFO") {
      EXPECT_EQ(commands.size(), 2u);
      replies.push_back(ReplyOf(pending));
    } else {
      EXPECT_EQ(commands.size(), 1u);
    }
    gauges_.Apply(replies, now);
    return ArgsOf(commands.front());
  }
  double Pending() const { return metrics_.pending->Value(); }
  double Lag() const { return metrics_.lag->Value(); }
  double Oldest() const { return metrics_.oldest_pending->Value(); }

  const SteadyTime t0_ = SteadyTime{} + std::chrono::hours(1);
  redis::PlainOps ops_{"orders", "billing", "c1"};
  admin::Metrics registry_;
  admin::SubscriptionMetrics& metrics_ = registry_.ForSubscription("orders");
  ManualClock clock_;
  Gauges gauges_{ops_, &metrics_, clock_};
};

const std::vector<std::string> kInfo = {"XINFO", "GROUPS", "orders"};
const std::vector<std::string> kPendingSummary = {"XPENDING", "orders", "billing"};

TEST_F(GaugesTest, EveryFiveSecondsOneXinfoGroupsSetsPendingAndLag) {
  EXPECT_LE(gauges_.NextDue(), t0_);  // the first beat is due at once
  auto commands = gauges_.Commands(t0_);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(ArgsOf(commands.front()), kInfo);
  EXPECT_EQ(ArgsOf(commands.back()), kPendingSummary);
  EXPECT_TRUE(gauges_.Commands(t0_).empty());  // one batch at a time
  std::vector<redis::Reply> replies;
  replies.push_back(
      ReplyOf(Arr({GroupRow("audit", 9, "1-0", Int(9)), GroupRow("billing", 3, "5-0", Int(2))})));
  replies.push_back(ReplyOf(kNonePending));
  gauges_.Apply(replies, t0_);
  EXPECT_EQ(Pending(), 3);
  EXPECT_EQ(Lag(), 2);

  EXPECT_EQ(gauges_.NextDue(), t0_ + Gauges::kInterval);
  EXPECT_TRUE(gauges_.Commands(t0_ + Millis(4999)).empty());
  // A beat whose reply is slow: the next beat waits for it.
  ASSERT_EQ(gauges_.Commands(t0_ + Gauges::kInterval).size(), 2u);
  EXPECT_TRUE(gauges_.Commands(t0_ + 2 * Gauges::kInterval).empty());
  gauges_.Apply({}, t0_ + 2 * Gauges::kInterval);
  EXPECT_EQ(Beat(t0_ + 2 * Gauges::kInterval, Arr({GroupRow("billing", 0, "9-0", Int(0))})), kInfo);
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(Lag(), 0);
}

// Redis says nil (entries deleted in the unread range, or before 7.0): the lag is counted after
// the group's last-delivered-id, capped, at once, then at most once a minute.
TEST_F(GaugesTest, ANilLagIsCountedAfterTheLastDeliveredIdAtMostOnceAMinute) {
  EXPECT_EQ(Beat(t0_, Arr({GroupRow("billing", 4, "5-0", Nil())})), kInfo);
  EXPECT_EQ(Pending(), 4);
  EXPECT_LE(gauges_.NextDue(), t0_);  // the count follows at once
  EXPECT_EQ(Beat(t0_, Entries(7)),
            (std::vector<std::string>{"XRANGE", "orders", "(5-0", "+", "COUNT", "10000"}));
  EXPECT_EQ(Lag(), 7);
  EXPECT_EQ(gauges_.NextDue(), t0_ + Gauges::kInterval);

  // The next beats within the minute: pending follows, the lag keeps the counted value.
  for (SteadyTime at = t0_ + Gauges::kInterval; at < t0_ + Gauges::kLagCountInterval;
       at += Gauges::kInterval) {
    EXPECT_EQ(Beat(at, Arr({GroupRow("billing", 5, "6-0", Nil())})), kInfo);
    EXPECT_TRUE(gauges_.Commands(at).empty());
    EXPECT_EQ(Pending(), 5);
    EXPECT_EQ(Lag(), 7);
  }
  const SteadyTime minute = t0_ + Gauges::kLagCountInterval;
  EXPECT_EQ(Beat(minute, Arr({GroupRow("billing", 5, "6-0", Nil())})), kInfo);
  EXPECT_EQ(Beat(minute, Entries(2)),
            (std::vector<std::string>{"XRANGE", "orders", "(6-0", "+", "COUNT", "10000"}));
  EXPECT_EQ(Lag(), 2);

  // Once Redis has a lag of its own again, it is used as it is, without a count.
  EXPECT_EQ(Beat(minute + Gauges::kInterval, Arr({GroupRow("billing", 5, "6-0", Int(11))})), kInfo);
  EXPECT_TRUE(gauges_.Commands(minute + Gauges::kInterval).empty());
  EXPECT_EQ(Lag(), 11);
}

TEST_F(GaugesTest, ErrorsOtherGroupsAndOutagesKeepTheGauges) {
  Beat(t0_, Arr({GroupRow("billing", 3, "5-0", Int(2))}));
  SteadyTime at = t0_;
  for (const std::string& resp : {Arr({GroupRow("audit", 9, "1-0", Int(9))}),
                                  Err("ERR no such key"), Err("NOGROUP No such key"), Bulk("x")}) {
    at += Gauges::kInterval;
    EXPECT_EQ(Beat(at, resp), kInfo) << resp;
    EXPECT_EQ(Pending(), 3) << resp;
    EXPECT_EQ(Lag(), 2) << resp;
  }
  // The connection failed before the reply arrived: nothing changes, the next beat is sent.
  at += Gauges::kInterval;
  ASSERT_EQ(gauges_.Commands(at).size(), 2u);
  gauges_.Apply({}, at);
  EXPECT_EQ(Pending(), 3);
  at += Gauges::kInterval;
  EXPECT_EQ(Beat(at, Arr({GroupRow("billing", 8, "5-0", Int(1))})), kInfo);
  EXPECT_EQ(Pending(), 8);
}

TEST_F(GaugesTest, AFailedLagCountKeepsTheLagAndWaitsTheMinute) {
  Beat(t0_, Arr({GroupRow("billing", 3, "5-0", Int(2))}));
  const SteadyTime at = t0_ + Gauges::kInterval;
  Beat(at, Arr({GroupRow("billing", 3, "5-0", Nil())}));
  ASSERT_EQ(gauges_.Commands(at).size(), 1u);  // the count ...
  gauges_.Apply({}, at);                       // ... lost with the connection
  EXPECT_EQ(Lag(), 2);
  EXPECT_EQ(Beat(at + Gauges::kInterval, Arr({GroupRow("billing", 3, "5-0", Nil())})), kInfo);
  EXPECT_TRUE(gauges_.Commands(at + Gauges::kInterval).empty());  // no count before the minute
  EXPECT_EQ(Lag(), 2);
}

// The oldest pending entry's age: the clock's wall time minus its id's milliseconds, from the
// same beat as pending and lag.
TEST_F(GaugesTest, TheOldestPendingAgeIsWallTimeMinusTheSmallestIdsTime) {
  EXPECT_EQ(Oldest(), 0);  // the series exists at 0 before the first beat
  const int64_t written = clock_.WallMillis() - 90'500;
  const std::string id = std::to_string(written) + "-3";
  EXPECT_EQ(Beat(t0_, Arr({GroupRow("billing", 2, id, Int(0))}), PendingFrom(2, id)), kInfo);
  EXPECT_DOUBLE_EQ(Oldest(), 90.5);

  // Between beats the gauge holds; the next beat sees the wall clock moved on.
  clock_.Advance(Millis(5000));
  EXPECT_TRUE(gauges_.Commands(t0_ + Millis(4999)).empty());
  EXPECT_DOUBLE_EQ(Oldest(), 90.5);
  Beat(t0_ + Gauges::kInterval, Arr({GroupRow("billing", 2, id, Int(0))}), PendingFrom(2, id));
  EXPECT_DOUBLE_EQ(Oldest(), 95.5);

  // Its writer's clock was ahead of this one: 0, never negative.
  const std::string ahead = std::to_string(clock_.WallMillis() + 2000) + "-0";
  Beat(t0_ + 2 * Gauges::kInterval, Arr({GroupRow("billing", 1, ahead, Int(0))}),
       PendingFrom(1, ahead));
  EXPECT_EQ(Oldest(), 0);
  Beat(t0_ + 3 * Gauges::kInterval, Arr({GroupRow("billing", 1, id, Int(0))}), PendingFrom(1, id));
  EXPECT_GT(Oldest(), 0);

  // Nothing pending: 0.
  Beat(t0_ + 4 * Gauges::kInterval, Arr({GroupRow("billing", 0, id, Int(0))}), kNonePending);
  EXPECT_EQ(Oldest(), 0);
}

TEST_F(GaugesTest, AnXpendingErrorOrAMissingReplyKeepsTheOldestPendingAge) {
  const std::string id = std::to_string(clock_.WallMillis() - 10'000) + "-0";
  const std::string row = Arr({GroupRow("billing", 1, id, Int(0))});
  Beat(t0_, row, PendingFrom(1, id));
  EXPECT_DOUBLE_EQ(Oldest(), 10);
  clock_.Advance(Millis(5000));
  SteadyTime at = t0_;
  for (const std::string& resp :
       {Err("NOGROUP No such key"), Bulk("x"), Arr({Int(1), Bulk("not-an-id"), Nil(), Nil()})}) {
    at += Gauges::kInterval;
    EXPECT_EQ(Beat(at, row, resp), kInfo) << resp;
    EXPECT_DOUBLE_EQ(Oldest(), 10) << resp;
  }
  // Only XINFO's reply arrived (a prefix): pending is applied, the age kept.
  at += Gauges::kInterval;
  ASSERT_EQ(gauges_.Commands(at).size(), 2u);
  std::vector<redis::Reply> prefix;
  prefix.push_back(ReplyOf(Arr({GroupRow("billing", 4, id, Int(0))})));
  gauges_.Apply(prefix, at);
  EXPECT_EQ(Pending(), 4);
  EXPECT_DOUBLE_EQ(Oldest(), 10);
}

TEST_F(GaugesTest, InflightIsWhatTheLoopPasses) {
  gauges_.SetInflight(42);
  EXPECT_EQ(metrics_.inflight->Value(), 42);
  gauges_.SetInflight(0);
  EXPECT_EQ(metrics_.inflight->Value(), 0);
}

}  // namespace
}  // namespace streamcar::runtime

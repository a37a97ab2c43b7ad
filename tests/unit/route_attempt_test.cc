// One command's route: redirects, transient errors with capped backoff until the deadline, lost
// connections. Error texts as redis-server 7.0.15 sends them.

#include "sidecar/redis/topology/route_attempt.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using Next = RouteAttempt::Next;
using testing::Bulk;
using testing::Err;
using testing::ReplyOf;

const keys::NodeAddress kA{"10.0.0.1", 7000};
const keys::NodeAddress kB{"10.0.0.2", 7001};
const keys::NodeAddress kC{"10.0.0.3", 7002};

class RouteAttemptTest : public ::testing::Test {
 protected:
  SteadyTime now_ = SteadyTime() + std::chrono::hours(1);
  SteadyTime deadline_ = now_ + Millis(1000);

  Next Feed(RouteAttempt& attempt, const std::string& resp) {
    const Reply reply = ReplyOf(resp);
    return attempt.OnReply(reply.view(), now_);
  }
};

TEST_F(RouteAttemptTest, AValueOrAnErrorOfTheCommandIsTheAnswer) {
  RouteAttempt attempt(105, kA, deadline_);
  EXPECT_EQ(attempt.target(), kA);
  EXPECT_EQ(Feed(attempt, Bulk("v")), Next::kDone);
  EXPECT_EQ(Feed(attempt, Err("NOGROUP No such key 'orders' or consumer group 'g'")), Next::kDone);
  EXPECT_EQ(Feed(attempt, Err("NOSCRIPT No matching script. Please use EVAL.")), Next::kDone);
  EXPECT_EQ(Feed(attempt, Err("CROSSSLOT Keys in request don't hash to the same slot")),
            Next::kDone);
  EXPECT_EQ(Feed(attempt, Err("UNBLOCKED the stream key no longer exists")), Next::kDone);
  EXPECT_EQ(attempt.last_kind(), ReplyKind::kUnblocked);
  EXPECT_EQ(attempt.redirects(), 0);
  EXPECT_EQ(attempt.retries(), 0);
}

TEST_F(RouteAttemptTest, MovedSendsToTheNewOwnerFromNowOn) {
  RouteAttempt attempt(12182, kA, deadline_);
  EXPECT_EQ(Feed(attempt, Err("MOVED 12182 10.0.0.2:7001")), Next::kSendTo);
  EXPECT_EQ(attempt.target(), kB);
  EXPECT_EQ(attempt.redirect().slot, 12182);
  EXPECT_EQ(attempt.redirect().to, kB);
  EXPECT_EQ(attempt.redirects(), 1);
  // A transient error afterwards retries on the new owner, not the old.
  EXPECT_EQ(Feed(attempt, Err("LOADING Redis is loading the dataset in memory")),
            Next::kRetryAfter);
  EXPECT_EQ(attempt.target(), kB);
  EXPECT_EQ(Feed(attempt, Bulk("v")), Next::kDone);
}

TEST_F(RouteAttemptTest, AskHoldsForOneSendAndDoesNotMoveTheSlot) {
  RouteAttempt attempt(12182, kA, deadline_);
  EXPECT_EQ(Feed(attempt, Err("ASK 12182 10.0.0.2:7001")), Next::kSendAskingTo);
  EXPECT_EQ(attempt.target(), kB);
  EXPECT_EQ(attempt.redirect().to, kB);
  // The importing node says TRYAGAIN (a multi-key script with a key still on the source): the
  // retry goes to the map's owner again, which will ASK again once the keys have moved.
  EXPECT_EQ(Feed(attempt, Err("TRYAGAIN Multiple keys request during rehashing of slot")),
            Next::kRetryAfter);
  EXPECT_EQ(attempt.target(), kA);
  EXPECT_EQ(Feed(attempt, Err("ASK 12182 10.0.0.2:7001")), Next::kSendAskingTo);
  EXPECT_EQ(Feed(attempt, Bulk("v")), Next::kDone);
  EXPECT_EQ(attempt.target(), kA);  // the next command of this attempt would go home
  EXPECT_EQ(attempt.redirects(), 2);
}

TEST_F(RouteAttemptTest, TheSixthRedirectFails) {
  RouteAttempt attempt(1, kA, deadline_);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Feed(attempt, Err(i % 2 == 0 ? "MOVED 1 10.0.0.2:7001" : "ASK 1 10.0.0.3:7002")),
              i % 2 == 0 ? Next::kSendTo : Next::kSendAskingTo)
        << i;
  }
  EXPECT_EQ(Feed(attempt, Err("MOVED 1 10.0.0.1:7000")), Next::kFail);
  EXPECT_NE(attempt.failure().find("more than 5 redirects for slot 1"), std::string::npos)
      << attempt.failure();
  EXPECT_FALSE(attempt.maybe_applied());
  // A custom limit.
  RouteAttempt strict(1, kA, deadline_, RouteLimits{.max_redirects = 0});
  EXPECT_EQ(Feed(strict, Err("MOVED 1 10.0.0.2:7001")), Next::kFail);
}

TEST_F(RouteAttemptTest, RedirectsToAnUnknownEndpoint) {
  // unknown-endpoint: "" is the host that answered, with the announced port.
  RouteAttempt attempt(1, kA, deadline_);
  EXPECT_EQ(Feed(attempt, Err("ASK 1 10.0.0.2:7001")), Next::kSendAskingTo);
  EXPECT_EQ(Feed(attempt, Err("MOVED 1 :7005")), Next::kSendTo);
  EXPECT_EQ(attempt.target(), (keys::NodeAddress{"10.0.0.2", 7005}));
  // "?" (hostnames preferred, none set): no host to go to; the map (with ips) must be read.
  EXPECT_EQ(Feed(attempt, Err("MOVED 1 ?:7006")), Next::kRefreshAndRetry);
  EXPECT_EQ(attempt.retry_after(), Millis(0));
  attempt.Retarget(kC);
  EXPECT_EQ(attempt.target(), kC);
}

TEST_F(RouteAttemptTest, TransientErrorsBackOffUntilTheDeadline) {
  RouteAttempt attempt(1, kA, deadline_);  // 1000 ms
  const Millis expected[] = {Millis(20), Millis(40), Millis(80), Millis(160), Millis(320)};
  for (const Millis delay : expected) {
    ASSERT_EQ(Feed(attempt, Err("TRYAGAIN Multiple keys request during rehashing of slot")),
              Next::kRetryAfter);
    EXPECT_EQ(attempt.retry_after(), delay);
    EXPECT_EQ(attempt.target(), kA);
    now_ += delay;
  }
  // 620 ms gone: the next wait (500, capped) would end past the deadline.
  EXPECT_EQ(Feed(attempt, Err("CLUSTERDOWN The cluster is down")), Next::kFail);
  EXPECT_EQ(attempt.last_kind(), ReplyKind::kClusterDown);
  EXPECT_NE(attempt.failure().find("clusterdown on slot 1 until the deadline (5 retries)"),
            std::string::npos)
      << attempt.failure();
}

TEST_F(RouteAttemptTest, BackoffIsCapped) {
  RouteAttempt attempt(1, kA, now_ + Millis(60000));
  Millis last{0};
  for (int i = 0; i < 12; ++i) {
    ASSERT_EQ(Feed(attempt, Err("MASTERDOWN Link with MASTER is down and "
                                "replica-serve-stale-data is set to 'no'.")),
              Next::kRetryAfter);
    last = attempt.retry_after();
    now_ += last;
  }
  EXPECT_EQ(last, Millis(500));
}

TEST_F(RouteAttemptTest, ReadOnlyMeansTheMasterMovedAway) {
  RouteAttempt attempt(1, kA, deadline_);
  EXPECT_EQ(Feed(attempt, Err("READONLY You can't write against a read only replica.")),
            Next::kRefreshAndRetry);
  EXPECT_EQ(attempt.retry_after(), Millis(20));
  attempt.Retarget(kB);
  EXPECT_EQ(attempt.target(), kB);
  EXPECT_EQ(Feed(attempt, Bulk("v")), Next::kDone);
}

TEST_F(RouteAttemptTest, ALostConnectionAfterSendingIsAmbiguous) {
  RouteAttempt unsent(1, kA, deadline_);
  EXPECT_EQ(unsent.OnConnectionLost(/*sent=*/false, now_), Next::kRefreshAndRetry);
  EXPECT_FALSE(unsent.maybe_applied());
  EXPECT_EQ(unsent.OnConnectionLost(false, deadline_), Next::kFail);  // out of time
  EXPECT_FALSE(unsent.maybe_applied());

  RouteAttempt sent(1, kA, deadline_);
  EXPECT_EQ(Feed(sent, Err("ASK 1 10.0.0.2:7001")), Next::kSendAskingTo);
  EXPECT_EQ(sent.OnConnectionLost(/*sent=*/true, now_), Next::kFail);
  EXPECT_TRUE(sent.maybe_applied());
  EXPECT_NE(sent.failure().find("10.0.0.2:7001 failed after the command was sent"),
            std::string::npos)
      << sent.failure();
  EXPECT_EQ(sent.target(), kA);
}

}  // namespace
}  // namespace streamcar::redis

// The consumer-name lease's decisions (SPEC 4.7, runtime/consumer_lease.h) on a clock the test
// moves: when it is asked for, what each answer means, and until when it may be relied on.

#include "sidecar/runtime/consumer_lease.h"

#include <gtest/gtest.h>

#include "tests/unit/resp_reply.h"

namespace streamcar::runtime {
namespace {

using testing::Arr;
using testing::Bulk;
using testing::Err;
using testing::Int;
using testing::ReplyOf;

constexpr Millis kExpiry{1500};

ConsumerLease::Options OptionsWith(bool wait_for_name = false) {
  ConsumerLease::Options options;
  options.key = "{orders}:consumer:billing:c1:7:2:lease";
  options.identity = {"token-1", "pod-a", "pod-a"};
  options.expiry = kExpiry;
  options.wait_for_name = wait_for_name;
  options.subscription = "orders/billing";
  options.stream = "orders";
  options.group = "billing";
  options.consumer = "c1";
  return options;
}

StatusOr<redis::Reply> Ours(const char* how) { return ReplyOf(Arr({Int(1), Bulk(how)})); }
StatusOr<redis::Reply> HeldBy(const char* instance, int64_t remaining_ms) {
  return ReplyOf(Arr({Int(0), Bulk(instance), Int(remaining_ms)}));
}

const SteadyTime t0 = SteadyTime() + Millis(1'000'000);

// Takes the lease at t0.
void Take(ConsumerLease& lease) {
  ASSERT_TRUE(lease.TakeDue(t0).has_value());
  ASSERT_EQ(lease.OnReply(Ours("taken"), t0 + Millis(2)), ConsumerLease::Step::kAcquired);
}

TEST(ConsumerLeaseTest, TakenItIsUsableForTwoThirdsOfTheExpiryFromTheSendAndRenewedAtAThird) {
  ConsumerLease lease(OptionsWith());
  EXPECT_FALSE(lease.UsableAt(t0));
  auto command = lease.TakeDue(t0);
  ASSERT_TRUE(command.has_value());
  EXPECT_EQ(command->name(), "EVAL");
  EXPECT_FALSE(lease.TakeDue(t0)) << "one in flight at a time";
  EXPECT_FALSE(lease.NextSendAt());
  EXPECT_EQ(lease.OnReply(Ours("taken"), t0 + Millis(40)), ConsumerLease::Step::kAcquired);
  // Counted from the send, not the answer: Redis's expiry started after the send.
  EXPECT_TRUE(lease.UsableAt(t0 + Millis(999)));
  EXPECT_FALSE(lease.UsableAt(t0 + Millis(1000)));
  EXPECT_EQ(lease.NextSendAt(), t0 + Millis(500));
  EXPECT_FALSE(lease.TakeDue(t0 + Millis(499)));
  ASSERT_TRUE(lease.TakeDue(t0 + Millis(500)));
  EXPECT_EQ(lease.OnReply(Ours("renewed"), t0 + Millis(510)), ConsumerLease::Step::kNothing);
  EXPECT_TRUE(lease.UsableAt(t0 + Millis(1499)));
  EXPECT_FALSE(lease.UsableAt(t0 + Millis(1500)));
  EXPECT_TRUE(lease.Release().has_value());
}

TEST(ConsumerLeaseTest, ARenewalThatFindsAnotherTokenStopsWithTheHolderNamed) {
  ConsumerLease lease(OptionsWith());
  Take(lease);
  // Frozen for 5 s: the lease is not usable at the wake, before any answer.
  const SteadyTime woke = t0 + Millis(5000);
  EXPECT_FALSE(lease.UsableAt(woke));
  ASSERT_TRUE(lease.TakeDue(woke));
  EXPECT_EQ(lease.OnReply(HeldBy("pod-b", 1400), woke + Millis(1)), ConsumerLease::Step::kStop);
  EXPECT_EQ(lease.stop_reason().code(), StatusCode::kFatal);
  EXPECT_NE(lease.stop_reason().message().find("taken by instance \"pod-b\""), std::string::npos)
      << lease.stop_reason().message();
  EXPECT_FALSE(lease.UsableAt(woke + Millis(2)));
  EXPECT_FALSE(lease.TakeDue(woke + Millis(5000)));
  EXPECT_FALSE(lease.Release()) << "a lease another holds is never deleted";
}

TEST(ConsumerLeaseTest, AWakeWithTheLeaseStillOursGoesOnOnlyOnceARenewalSaysSo) {
  ConsumerLease lease(OptionsWith());
  Take(lease);
  // A renewal sent just before the freeze, answered after it: confirmed, but too old to use.
  ASSERT_TRUE(lease.TakeDue(t0 + Millis(500)));
  const SteadyTime woke = t0 + Millis(5000);
  EXPECT_EQ(lease.OnReply(Ours("renewed"), woke), ConsumerLease::Step::kNothing);
  EXPECT_FALSE(lease.UsableAt(woke));
  ASSERT_TRUE(lease.TakeDue(woke)) << "asked again at once";
  // Nobody took it meanwhile (it had expired: the script took it again).
  EXPECT_EQ(lease.OnReply(Ours("taken"), woke + Millis(1)), ConsumerLease::Step::kNothing);
  EXPECT_TRUE(lease.UsableAt(woke + Millis(1)));
}

TEST(ConsumerLeaseTest, ALiveHolderIsOneWhoseLeaseIsRenewedBetweenTwoLooks) {
  ConsumerLease lease(OptionsWith());
  ASSERT_TRUE(lease.TakeDue(t0));
  EXPECT_EQ(lease.OnReply(HeldBy("pod-b", 1400), t0), ConsumerLease::Step::kNothing);
  EXPECT_EQ(lease.NextSendAt(), t0 + lease.PollInterval());
  EXPECT_EQ(lease.PollInterval(), Millis(125));
  // Running out: not renewed, keep looking.
  SteadyTime now = t0 + Millis(125);
  ASSERT_TRUE(lease.TakeDue(now));
  EXPECT_EQ(lease.OnReply(HeldBy("pod-b", 1275), now), ConsumerLease::Step::kNothing);
  EXPECT_TRUE(lease.stop_reason().ok());
  // Renewed: live.
  now += Millis(125);
  ASSERT_TRUE(lease.TakeDue(now));
  EXPECT_EQ(lease.OnReply(HeldBy("pod-b", 1490), now), ConsumerLease::Step::kStop);
  EXPECT_NE(lease.stop_reason().message().find(
                "consumer \"c1\" of group \"billing\" on stream \"orders\" is held by a live "
                "process, instance \"pod-b\""),
            std::string::npos)
      << lease.stop_reason().message();
  EXPECT_FALSE(lease.held());
  EXPECT_FALSE(lease.TakeDue(now + Millis(1000)));
}

TEST(ConsumerLeaseTest, WaitForNameKeepsLookingPastALiveHolderAndTakesTheNameOnceFree) {
  ConsumerLease lease(OptionsWith(/*wait_for_name=*/true));
  SteadyTime now = t0;
  for (int64_t remaining : {1400, 1490, 1300, 1495}) {
    ASSERT_TRUE(lease.TakeDue(now));
    EXPECT_EQ(lease.OnReply(HeldBy("pod-b", remaining), now), ConsumerLease::Step::kNothing);
    now += lease.PollInterval();
  }
  ASSERT_TRUE(lease.TakeDue(now));
  EXPECT_EQ(lease.OnReply(Ours("taken"), now), ConsumerLease::Step::kAcquired);
  EXPECT_TRUE(lease.UsableAt(now));
}

TEST(ConsumerLeaseTest, FailuresAreAskedAgainSoonAndOnlyWrongTypeStops) {
  ConsumerLease lease(OptionsWith());
  Take(lease);
  ASSERT_TRUE(lease.TakeDue(t0 + Millis(500)));
  lease.Abandoned(t0 + Millis(600));  // the connection went down
  EXPECT_EQ(lease.NextSendAt(), t0 + Millis(600) + lease.PollInterval());
  EXPECT_TRUE(lease.UsableAt(t0 + Millis(999))) << "still within what the last renewal allows";
  EXPECT_FALSE(lease.UsableAt(t0 + Millis(1000)));
  ASSERT_TRUE(lease.TakeDue(t0 + Millis(800)));
  EXPECT_EQ(lease.OnReply(ReplyOf(Err("LOADING Redis is loading")), t0 + Millis(801)),
            ConsumerLease::Step::kNothing);
  ASSERT_TRUE(lease.TakeDue(t0 + Millis(1000)));
  EXPECT_EQ(lease.OnReply(Status(StatusCode::kServerError, "WRONGTYPE Operation against a key"),
                          t0 + Millis(1001)),
            ConsumerLease::Step::kStop);
  EXPECT_NE(lease.stop_reason().message().find(
                "\"{orders}:consumer:billing:c1:7:2:lease\" exists and is not a hash"),
            std::string::npos)
      << lease.stop_reason().message();
}

TEST(ConsumerLeaseTest, AnAclRefusalStopsNamingTheRulesTheLeaseNeeds) {
  ConsumerLease lease(OptionsWith());
  ASSERT_TRUE(lease.TakeDue(t0));
  EXPECT_EQ(lease.OnReply(ReplyOf(Err("NOPERM this user has no permissions to access one of the "
                                      "keys used as arguments")),
                          t0),
            ConsumerLease::Step::kStop);
  EXPECT_NE(lease.stop_reason().message().find("+eval +hget +hset +hdel +pexpire +pttl"),
            std::string::npos)
      << lease.stop_reason().message();
}

}  // namespace
}  // namespace streamcar::runtime

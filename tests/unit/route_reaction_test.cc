// What a reply asks of a command's route, as both Redis drivers read it (route_reaction.h). Error
// texts as redis-server 7.0.15 sends them.

#include "sidecar/redis/topology/route_reaction.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::Bulk;
using testing::Err;
using testing::ReplyOf;

const keys::NodeAddress kA{"10.0.0.1", 7000};

RouteVerdict Verdict(const std::string& resp) {
  const Reply reply = ReplyOf(resp);
  return ReactTo(reply.view(), kA);
}

TEST(RouteReactionTest, AnswersAreNotRouted) {
  EXPECT_EQ(Verdict(Bulk("v")).reaction, RouteReaction::kNone);
  EXPECT_EQ(Verdict(Err("NOGROUP No such key 'orders' or consumer group 'g'")).reaction,
            RouteReaction::kNone);
  EXPECT_EQ(Verdict(Err("NOSCRIPT No matching script. Please use EVAL.")).reaction,
            RouteReaction::kNone);
  EXPECT_EQ(Verdict(Err("CROSSSLOT Keys in request don't hash to the same slot")).reaction,
            RouteReaction::kNone);
  // MIGRATE deleting the key releases its readers: a migration, not a role change.
  const RouteVerdict deleted = Verdict(Err("UNBLOCKED the stream key no longer exists"));
  EXPECT_EQ(deleted.reaction, RouteReaction::kNone);
  EXPECT_EQ(deleted.kind, ReplyKind::kUnblocked);
}

TEST(RouteReactionTest, RedirectsNameWhereToWithTheAnsweringHostForAnUnknownEndpoint) {
  const RouteVerdict moved = Verdict(Err("MOVED 12182 10.0.0.2:7001"));
  EXPECT_EQ(moved.reaction, RouteReaction::kFollowMoved);
  EXPECT_EQ(moved.redirect.slot, 12182);
  EXPECT_EQ(moved.redirect.to, (keys::NodeAddress{"10.0.0.2", 7001}));
  EXPECT_TRUE(UsableHost(moved.redirect));

  const RouteVerdict ask = Verdict(Err("ASK 3999 :7002"));
  EXPECT_EQ(ask.reaction, RouteReaction::kFollowAsk);
  EXPECT_EQ(ask.redirect.to, (keys::NodeAddress{"10.0.0.1", 7002}));

  const RouteVerdict nowhere = Verdict(Err("MOVED 3999 ?:7002"));
  EXPECT_EQ(nowhere.reaction, RouteReaction::kFollowMoved);
  EXPECT_FALSE(UsableHost(nowhere.redirect));
}

TEST(RouteReactionTest, NodeStatesSayWaitNodeDownDemotedOrReleased) {
  EXPECT_EQ(Verdict(Err("TRYAGAIN Multiple keys request during rehashing of slot")).reaction,
            RouteReaction::kWait);
  EXPECT_EQ(Verdict(Err("LOADING Redis is loading the dataset in memory")).reaction,
            RouteReaction::kWait);
  EXPECT_EQ(Verdict(Err("CLUSTERDOWN The cluster is down")).reaction, RouteReaction::kNodeDown);
  EXPECT_EQ(
      Verdict(Err("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to "
                  "'no'."))
          .reaction,
      RouteReaction::kNodeDown);
  EXPECT_EQ(Verdict(Err("READONLY You can't write against a read only replica.")).reaction,
            RouteReaction::kDemoted);
  const RouteVerdict released = Verdict(
      Err("UNBLOCKED force unblock from blocking operation, instance state changed (master -> "
          "replica?)"));
  EXPECT_EQ(released.reaction, RouteReaction::kReleased);
  EXPECT_EQ(released.kind, ReplyKind::kUnblocked);
}

}  // namespace
}  // namespace streamcar::redis

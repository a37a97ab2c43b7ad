// Reply kinds. Every error text below is what redis-server 7.0.15 sent on this machine (recorded
// from a 3-master cluster and a standalone pair), except LOADING, copied from its source.

#include "sidecar/redis/topology/reply_kind.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/resp_reply.h"

namespace streamcar::redis {
namespace {

using testing::Arr;
using testing::Bulk;
using testing::Err;
using testing::Int;
using testing::Nil;
using testing::ReplyOf;

ReplyKind KindOf(const std::string& resp, Redirect* redirect = nullptr) {
  const Reply reply = ReplyOf(resp);
  return Classify(reply.view(), redirect);
}

TEST(ReplyKindTest, ValuesAreValues) {
  EXPECT_EQ(KindOf("+OK\r\n"), ReplyKind::kValue);
  EXPECT_EQ(KindOf(Int(3)), ReplyKind::kValue);
  EXPECT_EQ(KindOf(Nil()), ReplyKind::kValue);
  EXPECT_EQ(KindOf(Bulk("MOVED 1 h:1")), ReplyKind::kValue);  // a value that reads like an error
  // An array holding an error (a MULTI's EXEC) is a value: its elements are the caller's.
  EXPECT_EQ(KindOf(Arr({Err("MOVED 1 h:1")})), ReplyKind::kValue);
  EXPECT_EQ(Classify(ReplyView(nullptr), nullptr), ReplyKind::kValue);
}

TEST(ReplyKindTest, MovedAndAskCarryTheSlotAndTheNode) {
  struct Case {
    const char* error;
    ReplyKind kind;
    int slot;
    const char* host;
    int port;
  };
  for (const Case& c :
       {Case{"MOVED 12182 127.0.0.1:44941", ReplyKind::kMoved, 12182, "127.0.0.1", 44941},
        Case{"MOVED 12182 ::1:44941", ReplyKind::kMoved, 12182, "::1", 44941},
        Case{"MOVED 12182 node-44941.redis.test:44941", ReplyKind::kMoved, 12182,
             "node-44941.redis.test", 44941},
        Case{"MOVED 12182 ?:44941", ReplyKind::kMoved, 12182, "?", 44941},
        Case{"MOVED 12182 :44941", ReplyKind::kMoved, 12182, "", 44941},
        Case{"MOVED 0 h:1", ReplyKind::kMoved, 0, "h", 1},
        Case{"MOVED 16383 h:1", ReplyKind::kMoved, 16383, "h", 1},
        Case{"ASK 12182 127.0.0.1:48079", ReplyKind::kAsk, 12182, "127.0.0.1", 48079}}) {
    Redirect redirect;
    EXPECT_EQ(KindOf(Err(c.error), &redirect), c.kind) << c.error;
    EXPECT_EQ(redirect.slot, c.slot) << c.error;
    EXPECT_EQ(redirect.to.host, c.host) << c.error;
    EXPECT_EQ(redirect.to.port, c.port) << c.error;
    // Without a place for the redirect, still classified.
    EXPECT_EQ(KindOf(Err(c.error)), c.kind) << c.error;
  }
}

TEST(ReplyKindTest, AnUnparsableRedirectIsAPlainError) {
  for (const char* error : {"MOVED", "MOVED ", "MOVED 12182", "MOVED 12182 ", "MOVED 16384 h:1",
                            "MOVED -1 h:1", "MOVED x h:1", "MOVED 123456 h:1", "MOVED 1 h",
                            "MOVED 1 h:0", "MOVED  1 h:1", "ASK 1 h:", "MOVEDX 1 h:1"}) {
    Redirect redirect;
    EXPECT_EQ(KindOf(Err(error), &redirect), ReplyKind::kError) << error;
    EXPECT_EQ(redirect.slot, -1) << error;
  }
}

TEST(ReplyKindTest, ClusterAndFailoverErrors) {
  struct Case {
    const char* error;
    ReplyKind kind;
    const char* name;
  };
  for (const Case& c : {
           Case{"TRYAGAIN Multiple keys request during rehashing of slot", ReplyKind::kTryAgain,
                "tryagain"},
           Case{"CLUSTERDOWN The cluster is down", ReplyKind::kClusterDown, "clusterdown"},
           Case{"CLUSTERDOWN Hash slot not served", ReplyKind::kClusterDown, "clusterdown"},
           Case{"LOADING Redis is loading the dataset in memory", ReplyKind::kLoading, "loading"},
           Case{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
                ReplyKind::kMasterDown, "masterdown"},
           Case{"READONLY You can't write against a read only replica.", ReplyKind::kReadOnly,
                "readonly"},
           Case{"UNBLOCKED force unblock from blocking operation, instance state changed (master "
                "-> replica?)",
                ReplyKind::kUnblocked, "unblocked"},
           Case{"UNBLOCKED the stream key no longer exists", ReplyKind::kUnblocked, "unblocked"},
           Case{"NOSCRIPT No matching script. Please use EVAL.", ReplyKind::kNoScript, "noscript"},
           Case{"CROSSSLOT Keys in request don't hash to the same slot", ReplyKind::kCrossSlot,
                "crossslot"},
           Case{"ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.", ReplyKind::kError, "error"},
           Case{"NOGROUP No such key 'orders' or consumer group 'g'", ReplyKind::kError, "error"},
           Case{"WRONGTYPE Operation against a key holding the wrong kind of value",
                ReplyKind::kError, "error"},
           Case{"TRYAGAINX no", ReplyKind::kError, "error"},
           Case{"tryagain lower case is not Redis's", ReplyKind::kError, "error"},
           Case{"", ReplyKind::kError, "error"},
           Case{"READONLY", ReplyKind::kReadOnly, "readonly"},
       }) {
    EXPECT_EQ(KindOf(Err(c.error)), c.kind) << c.error;
    EXPECT_EQ(ReplyKindName(KindOf(Err(c.error))), c.name) << c.error;
  }
}

TEST(ReplyKindTest, TellsAMigratedKeyFromARoleChange) {
  EXPECT_TRUE(
      IsUnblockedByKeyDeletion(ReplyOf(Err("UNBLOCKED the stream key no longer exists")).view()));
  EXPECT_FALSE(IsUnblockedByKeyDeletion(
      ReplyOf(Err("UNBLOCKED force unblock from blocking operation, instance state changed "
                  "(master -> replica?)"))
          .view()));
  EXPECT_FALSE(IsUnblockedByKeyDeletion(ReplyOf(Err("ERR the key no longer exists")).view()));
  EXPECT_FALSE(IsUnblockedByKeyDeletion(ReplyOf(Bulk("UNBLOCKED no longer exists")).view()));
}

}  // namespace
}  // namespace streamcar::redis

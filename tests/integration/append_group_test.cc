// Group commit of single appends (log/append_group.h) against a real redis-server: appends that
// queue while a group is on its way go in one call, each decided as it would be alone.

#include "sidecar/log/append_group.h"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/log/entry_id.h"
#include "tests/support/redis_server.h"

namespace streamcar::log {
namespace {

using streamcar::testing::RedisServer;

constexpr Millis kSessionWait{2000};

config::LogStream Stream(const std::string& name) {
  config::LogStream stream;
  stream.name = name;
  return stream;
}

AppendRequest Entry(std::string field, std::string value, std::string idempotency_key = "") {
  AppendRequest request;
  request.fields = {{std::move(field), std::move(value)}};
  request.idempotency_key = std::move(idempotency_key);
  return request;
}

// An append as a blocking call: the caller runs the drain its append started, as a worker would,
// which carries whatever other callers queue meanwhile.
AppendGroup::Outcome AppendAndWait(AppendGroup& group, AppendRequest request) {
  std::promise<AppendGroup::Outcome> decided;
  auto outcome = decided.get_future();
  if (auto drain = group.Append(std::move(request),
                                [&](AppendGroup::Outcome o) { decided.set_value(std::move(o)); })) {
    drain();
  }
  return outcome.get();
}

class AppendGroupTest : public ::testing::Test {
 protected:
  int64_t Len(const std::string& stream) { return server_.Run({"XLEN", stream}).view().Integer(); }

  RedisServer server_;
  SessionPool sessions_{server_.ClientOptions(), 4};
};

TEST_F(AppendGroupTest, ConcurrentAppendsGoTogetherAndEachGetsItsOwnReceipt) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  constexpr int kThreads = 16;
  constexpr int kEach = 150;
  std::mutex mutex;
  std::map<std::string, std::string> value_of_id;  // receipt -> what its caller appended
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string value = std::to_string(t) + "/" + std::to_string(i);
        auto outcome = AppendAndWait(group, Entry("v", value));
        std::lock_guard lock(mutex);
        if (!outcome.status.ok() || outcome.result.kind != AppendResult::Kind::kAppended) {
          failures.push_back(value + ": " + outcome.status.ToString());
        } else if (!value_of_id.emplace(outcome.result.id, value).second) {
          failures.push_back(value + ": receipt " + outcome.result.id + " given twice");
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_TRUE(failures.empty()) << failures.front();
  ASSERT_EQ(value_of_id.size(), size_t{kThreads * kEach});
  EXPECT_EQ(Len("feed"), kThreads * kEach);
  // Every receipt names the entry its own caller appended.
  auto all = server_.Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(all.view().Size(), size_t{kThreads * kEach});
  std::map<std::string, int> next_of_thread;
  for (size_t i = 0; i < all.view().Size(); ++i) {
    const auto entry = all.view()[i];
    const std::string id(entry[0].Str());
    const std::string value(entry[1][1].Str());
    ASSERT_EQ(value_of_id.at(id), value) << id;
    // One caller's appends keep their order.
    const std::string thread = value.substr(0, value.find('/'));
    const int n = std::stoi(value.substr(value.find('/') + 1));
    EXPECT_EQ(n, next_of_thread[thread]++) << value;
  }
  // They met: fewer calls than appends.
  EXPECT_EQ(group.appends_sent(), uint64_t{kThreads * kEach});
  EXPECT_LT(group.groups_sent(), group.appends_sent());
}

// The loop's view: the first append of an idle lane returns its drain, the ones that queue before
// the drain runs return none, and the drain sends them all in one call, in arrival order; a lane of
// another shard key has its own drain.
TEST_F(AppendGroupTest, OnlyTheFirstAppendOfAnIdleLaneReturnsADrainAndItCarriesTheOthers) {
  config::LogStream sharded = Stream("orders");
  sharded.shards = 2;
  sharded.shard_key_pattern = "orders:{%d}";
  Producer producer(sharded, Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  std::vector<std::string> ids(5);
  auto keep = [&](size_t i) {
    return [&ids, i](AppendGroup::Outcome outcome) {
      ASSERT_TRUE(outcome.status.ok()) << outcome.status.ToString();
      ids[i] = outcome.result.id;
    };
  };
  auto keyed = [](std::string value, std::string key) {
    AppendRequest request = Entry("v", std::move(value));
    request.shard_key = std::move(key);
    return request;
  };
  // A key of the other shard, and one of the same shard as "a".
  std::string other_shard;
  std::string same_shard;
  for (int i = 0; other_shard.empty() || same_shard.empty(); ++i) {
    const std::string key = "k" + std::to_string(i);
    (keys::ShardOf(key, 2) == keys::ShardOf("a", 2) ? same_shard : other_shard) = key;
  }
  auto first = group.Append(keyed("0", "a"), keep(0));
  ASSERT_TRUE(first);
  EXPECT_FALSE(group.Append(keyed("1", same_shard), keep(1))) << "one lane per shard, not per key";
  EXPECT_FALSE(group.Append(keyed("2", "a"), keep(2)));
  auto other = group.Append(keyed("3", other_shard), keep(3));
  ASSERT_TRUE(other) << "another shard is another lane";
  first();
  EXPECT_EQ(group.groups_sent(), 1U);
  EXPECT_EQ(group.appends_sent(), 3U);
  ASSERT_FALSE(ids[2].empty());
  EXPECT_LT(ParseId(ids[0]), ParseId(ids[1]));
  EXPECT_LT(ParseId(ids[1]), ParseId(ids[2]));
  other();
  EXPECT_FALSE(ids[3].empty());
  // The drains ended with their lanes empty: the next append starts one again.
  auto again = group.Append(keyed("4", "a"), keep(4));
  ASSERT_TRUE(again);
  again();
  EXPECT_FALSE(ids[4].empty());
  EXPECT_EQ(group.groups_sent(), 3U);
}

// While Redis is slow a lane holds at most kMaxQueued appends and kMaxQueuedBytes: the next is
// answered at once, to retry, instead of waiting in memory (clients that drop their connections
// would otherwise grow it without bound). One call carries at most kMaxGroupBytes.
TEST_F(AppendGroupTest, AFullLaneRefusesAtOnceAndGroupsAreCutByBytes) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  int decided = 0;
  std::optional<AppendGroup::Outcome> refused;
  auto count = [&](AppendGroup::Outcome outcome) {
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.ToString();
    ++decided;
  };
  auto drain = group.Append(Entry("n", "0"), count);
  ASSERT_TRUE(drain);
  for (size_t i = 1; i < AppendGroup::kMaxQueued; ++i) {
    EXPECT_FALSE(group.Append(Entry("n", std::to_string(i)), count));
  }
  EXPECT_FALSE(group.Append(Entry("n", "one too many"),
                            [&](AppendGroup::Outcome outcome) { refused = outcome; }));
  ASSERT_TRUE(refused.has_value()) << "answered at once, not queued";
  EXPECT_EQ(refused->status.code(), StatusCode::kTimeout) << refused->status.ToString();
  EXPECT_GE(refused->retry_after, 1);
  drain();
  EXPECT_EQ(decided, static_cast<int>(AppendGroup::kMaxQueued));
  EXPECT_EQ(group.groups_sent(), AppendGroup::kMaxQueued / Producer::kMaxBatch);
  EXPECT_EQ(Len("feed"), static_cast<int64_t>(AppendGroup::kMaxQueued));

  // By bytes: 3 MiB entries go one per call (two would pass kMaxGroupBytes), and the lane takes
  // what fits kMaxQueuedBytes.
  const std::string big(size_t{3} << 20, 'x');
  const uint64_t groups_before = group.groups_sent();
  const size_t fit = AppendGroup::kMaxQueuedBytes / (big.size() + 1);
  decided = 0;
  refused.reset();
  drain = group.Append(Entry("n", big), count);
  ASSERT_TRUE(drain);
  for (size_t i = 1; i < fit; ++i) EXPECT_FALSE(group.Append(Entry("n", big), count));
  EXPECT_FALSE(
      group.Append(Entry("n", big), [&](AppendGroup::Outcome outcome) { refused = outcome; }));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status.code(), StatusCode::kTimeout);
  drain();
  EXPECT_EQ(decided, static_cast<int>(fit));
  EXPECT_EQ(group.groups_sent() - groups_before, fit);
}

TEST_F(AppendGroupTest, OneIdempotencyKeyFromTwoCallersAppendsOnceWhetherOrNotTheyMeet) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  constexpr int kKeys = 200;
  std::vector<AppendGroup::Outcome> first(kKeys);
  std::vector<AppendGroup::Outcome> second(kKeys);
  std::vector<std::thread> threads;
  for (auto* outcomes : {&first, &second}) {
    threads.emplace_back([&, outcomes] {
      for (int k = 0; k < kKeys; ++k) {
        (*outcomes)[k] =
            AppendAndWait(group, Entry("k", std::to_string(k), "key-" + std::to_string(k)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(first[k].status.ok()) << first[k].status.ToString();
    ASSERT_TRUE(second[k].status.ok()) << second[k].status.ToString();
    EXPECT_EQ(first[k].result.id, second[k].result.id) << k;
    const int appended = (first[k].result.kind == AppendResult::Kind::kAppended) +
                         (second[k].result.kind == AppendResult::Kind::kAppended);
    EXPECT_EQ(appended, 1) << k;
  }
  EXPECT_EQ(Len("feed"), kKeys);
}

TEST_F(AppendGroupTest, AMalformedAppendIsRefusedAloneAndTheOthersGoOn) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  std::vector<std::thread> threads;
  std::vector<AppendGroup::Outcome> good(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) good[t] = AppendAndWait(group, Entry("n", std::to_string(i)));
    });
  }
  int refused = 0;
  for (int i = 0; i < 50; ++i) {
    AppendRequest no_fields;
    const auto outcome = AppendAndWait(group, no_fields);
    refused += outcome.status.code() == StatusCode::kInvalid;
    AppendRequest bad_id = Entry("n", "x");
    bad_id.entry_id = "not-an-id";
    refused += AppendAndWait(group, bad_id).status.code() == StatusCode::kInvalid;
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(refused, 100);
  for (const auto& outcome : good) EXPECT_TRUE(outcome.status.ok()) << outcome.status.ToString();
  EXPECT_EQ(Len("feed"), 8 * 50);
}

TEST_F(AppendGroupTest, EveryAppendOfAGroupGetsWhatRedisSaidOfTheCall) {
  server_.Run({"SET", "feed", "not a stream"});
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  std::vector<AppendGroup::Outcome> outcomes(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back(
        [&, t] { outcomes[t] = AppendAndWait(group, Entry("n", std::to_string(t))); });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& outcome : outcomes) {
    EXPECT_EQ(outcome.status.code(), StatusCode::kServerError) << outcome.status.ToString();
    EXPECT_NE(outcome.status.message().find("WRONGTYPE"), std::string::npos)
        << outcome.status.message();
  }
  server_.Kill();
  const auto down = AppendAndWait(group, Entry("n", "1"));
  EXPECT_TRUE(down.status.code() == StatusCode::kIo || down.status.code() == StatusCode::kTimeout)
      << down.status.ToString();
  EXPECT_GE(down.retry_after, 1);
}

TEST_F(AppendGroupTest, AShardedStreamGroupsByEntryKeyAndEachLandsInItsShard) {
  config::LogStream stream = Stream("orders");
  stream.shards = 4;
  stream.shard_key_pattern = "orders:{%d}";
  Producer producer(stream, Millis(60000));
  AppendGroup group(&producer, &sessions_, kSessionWait);
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::set<std::string> receipts;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        AppendRequest request = Entry("n", std::to_string(i));
        request.shard_key = "customer-" + std::to_string((t * 40 + i) % 10);
        auto outcome = AppendAndWait(group, request);
        ASSERT_TRUE(outcome.status.ok()) << outcome.status.ToString();
        std::lock_guard lock(mutex);
        receipts.insert(request.shard_key + " " + outcome.result.id);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(receipts.size(), size_t{8 * 40});
  int64_t total = 0;
  for (int shard = 0; shard < 4; ++shard) total += Len("orders:{" + std::to_string(shard) + "}");
  EXPECT_EQ(total, 8 * 40);
}

}  // namespace
}  // namespace streamcar::log

// Group commit of single appends (log/append_group.h) on an event loop against a real
// redis-server: the appends that queue while a lane's call is on its way go in its next call,
// each decided as it would be alone, and every append is answered once whatever Redis does.

#include "sidecar/log/append_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
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

class AppendGroupTest : public ::testing::Test {
 protected:
  void SetUp() override { Connect(server_.ClientOptions()); }

  void Connect(redis::ConnectionOptions options) {
    auto loop = EventLoop::Create(SystemClock::Instance());
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    links_ = std::make_unique<AppendLinks>(loop_.get(), std::move(options));
  }

  void TearDown() override {
    links_.reset();
    loop_.reset();
  }

  // Runs the loop until `done` or `limit`; false when the limit came first.
  bool RunUntil(const std::function<bool()>& done, Millis limit = Millis(10000)) {
    const SteadyTime deadline = SteadyClock::now() + limit;
    while (!done()) {
      if (SteadyClock::now() >= deadline) return false;
      loop_->RunOnce(Millis(20));
    }
    return true;
  }

  // Queues `request`; its outcome lands in *out (once: a second answer fails the test).
  void Queue(AppendGroup& group, AppendRequest request, std::optional<AppendGroup::Outcome>* out) {
    auto refused = group.Append(std::move(request), [out](AppendGroup::Outcome outcome) {
      EXPECT_FALSE(out->has_value()) << "answered twice";
      *out = std::move(outcome);
    });
    if (refused) *out = std::move(*refused);
  }

  AppendGroup::Outcome AppendAndWait(AppendGroup& group, AppendRequest request) {
    std::optional<AppendGroup::Outcome> outcome;
    Queue(group, std::move(request), &outcome);
    EXPECT_TRUE(RunUntil([&] { return outcome.has_value(); }));
    return outcome.value_or(AppendGroup::Outcome{Status(StatusCode::kCancelled, "no answer")});
  }

  // Waits until the links' connection for `key` is ready (it connects when first asked for).
  void WaitReady(const std::string& key) {
    ASSERT_TRUE(RunUntil([&] { return links_->For(key).ready(); }));
  }

  int64_t Len(const std::string& stream) { return server_.Run({"XLEN", stream}).view().Integer(); }

  RedisServer server_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<AppendLinks> links_;
};

// Appends interleaved from many clients (16 "connections", each with its next append queued as
// soon as its previous one is answered): every receipt names its own entry, each client's
// appends keep their order in the stream, and they met in fewer calls than appends.
TEST_F(AppendGroupTest, InterleavedAppendsGoTogetherInArrivalOrderEachWithItsOwnReceipt) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  constexpr int kClients = 16;
  constexpr int kEach = 150;
  std::map<std::string, std::string> value_of_id;  // receipt -> what its client appended
  std::vector<std::string> failures;
  int answered = 0;
  std::function<void(int, int)> next = [&](int client, int i) {
    if (i == kEach) return;
    const std::string value = std::to_string(client) + "/" + std::to_string(i);
    auto refused = group.Append(Entry("v", value), [&, client, i, value](AppendGroup::Outcome o) {
      ++answered;
      if (!o.status.ok() || o.result.kind != AppendResult::Kind::kAppended) {
        failures.push_back(value + ": " + o.status.ToString());
      } else if (!value_of_id.emplace(o.result.id, value).second) {
        failures.push_back(value + ": receipt " + o.result.id + " given twice");
      }
      next(client, i + 1);
    });
    ASSERT_FALSE(refused.has_value());
  };
  for (int client = 0; client < kClients; ++client) next(client, 0);
  ASSERT_TRUE(RunUntil([&] { return answered == kClients * kEach; }));
  ASSERT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(Len("feed"), kClients * kEach);
  auto all = server_.Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(all.view().Size(), static_cast<size_t>(kClients) * kEach);
  std::map<std::string, int> next_of_client;
  for (size_t i = 0; i < all.view().Size(); ++i) {
    const auto entry = all.view()[i];
    const std::string id(entry[0].Str());
    const std::string value(entry[1][1].Str());
    ASSERT_EQ(value_of_id.at(id), value) << id;
    const std::string client = value.substr(0, value.find('/'));
    EXPECT_EQ(std::stoi(value.substr(value.find('/') + 1)), next_of_client[client]++) << value;
  }
  EXPECT_EQ(group.appends_sent(), static_cast<uint64_t>(kClients) * kEach);
  EXPECT_LT(group.groups_sent(), group.appends_sent() / 4);
}

// The appends one round of the loop queues go in one call per lane, in arrival order; a lane is
// a target stream key (a shard), not an entry key.
TEST_F(AppendGroupTest, OneRoundsAppendsGoInOneCallPerShardInArrivalOrder) {
  config::LogStream sharded = Stream("orders");
  sharded.shards = 2;
  sharded.shard_key_pattern = "orders:{%d}";
  Producer producer(sharded, Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("orders:{0}");
  WaitReady("orders:{1}");
  auto keyed = [](std::string value, std::string key) {
    AppendRequest request = Entry("v", std::move(value));
    request.shard_key = std::move(key);
    return request;
  };
  std::string other_shard;
  std::string same_shard;
  for (int i = 0; other_shard.empty() || same_shard.empty(); ++i) {
    const std::string key = "k" + std::to_string(i);
    (keys::ShardOf(key, 2) == keys::ShardOf("a", 2) ? same_shard : other_shard) = key;
  }
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(4);
  Queue(group, keyed("0", "a"), &outcomes[0]);
  Queue(group, keyed("1", same_shard), &outcomes[1]);
  Queue(group, keyed("2", "a"), &outcomes[2]);
  Queue(group, keyed("3", other_shard), &outcomes[3]);
  EXPECT_FALSE(outcomes[0].has_value()) << "never answered inside Append";
  ASSERT_TRUE(RunUntil([&] { return outcomes[3].has_value() && outcomes[2].has_value(); }));
  for (const auto& outcome : outcomes) ASSERT_TRUE(outcome->status.ok());
  EXPECT_EQ(group.groups_sent(), 2U);
  EXPECT_EQ(group.appends_sent(), 4U);
  EXPECT_LT(ParseId(outcomes[0]->result.id), ParseId(outcomes[1]->result.id));
  EXPECT_LT(ParseId(outcomes[1]->result.id), ParseId(outcomes[2]->result.id));
}

// While Redis is slow a lane holds at most kMaxQueued appends and kMaxQueuedBytes: the next is
// answered at once, to retry, instead of waiting in memory. One call carries at most
// kMaxGroupBytes, and kMaxBatch appends.
TEST_F(AppendGroupTest, AFullLaneRefusesAtOnceAndGroupsAreCutByCountAndBytes) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("feed");
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(AppendGroup::kMaxQueued);
  for (auto& outcome : outcomes) Queue(group, Entry("n", "x"), &outcome);
  std::optional<AppendGroup::Outcome> refused;
  Queue(group, Entry("n", "one too many"), &refused);
  ASSERT_TRUE(refused.has_value()) << "answered at once, not queued";
  EXPECT_EQ(refused->status.code(), StatusCode::kTimeout) << refused->status.ToString();
  EXPECT_GE(refused->retry_after, 1);
  ASSERT_TRUE(RunUntil([&] { return outcomes.back().has_value(); }));
  for (const auto& outcome : outcomes) EXPECT_TRUE(outcome->status.ok());
  EXPECT_EQ(group.groups_sent(), AppendGroup::kMaxQueued / Producer::kMaxBatch);
  EXPECT_EQ(Len("feed"), static_cast<int64_t>(AppendGroup::kMaxQueued));

  // By bytes: 3 MiB entries go one per call, and the lane takes what fits kMaxQueuedBytes.
  const std::string big(size_t{3} << 20, 'x');
  const uint64_t groups_before = group.groups_sent();
  const size_t fit = AppendGroup::kMaxQueuedBytes / (big.size() + 1);
  std::vector<std::optional<AppendGroup::Outcome>> bigs(fit);
  for (auto& outcome : bigs) Queue(group, Entry("n", big), &outcome);
  refused.reset();
  Queue(group, Entry("n", big), &refused);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status.code(), StatusCode::kTimeout);
  ASSERT_TRUE(RunUntil([&] { return bigs.back().has_value(); }, Millis(30000)));
  for (const auto& outcome : bigs) EXPECT_TRUE(outcome->status.ok());
  EXPECT_EQ(group.groups_sent() - groups_before, fit);
}

TEST_F(AppendGroupTest, OneIdempotencyKeyTwiceAppendsOnceInOneGroupAndAcrossGroups) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  constexpr int kKeys = 200;
  std::vector<std::optional<AppendGroup::Outcome>> first(kKeys);
  std::vector<std::optional<AppendGroup::Outcome>> second(kKeys);
  for (int k = 0; k < kKeys; ++k) {
    Queue(group, Entry("k", std::to_string(k), "key-" + std::to_string(k)), &first[k]);
    // Half in the same group, half in a later one.
    if (k % 2 == 0) {
      Queue(group, Entry("k", std::to_string(k), "key-" + std::to_string(k)), &second[k]);
    }
  }
  ASSERT_TRUE(RunUntil([&] { return first.back().has_value(); }));
  for (int k = 1; k < kKeys; k += 2) {
    Queue(group, Entry("k", std::to_string(k), "key-" + std::to_string(k)), &second[k]);
  }
  ASSERT_TRUE(RunUntil([&] { return second.back().has_value(); }));
  for (int k = 0; k < kKeys; ++k) {
    ASSERT_TRUE(first[k]->status.ok()) << first[k]->status.ToString();
    ASSERT_TRUE(second[k]->status.ok()) << second[k]->status.ToString();
    EXPECT_EQ(first[k]->result.id, second[k]->result.id) << k;
    EXPECT_EQ(second[k]->result.kind, AppendResult::Kind::kDuplicate) << k;
  }
  EXPECT_EQ(Len("feed"), kKeys);
}

TEST_F(AppendGroupTest, AMalformedAppendIsRefusedAloneAndAtOnce) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  std::vector<std::optional<AppendGroup::Outcome>> good(50);
  int refused = 0;
  for (auto& outcome : good) {
    Queue(group, Entry("n", "1"), &outcome);
    auto no_fields = group.Append(AppendRequest{}, [](const AppendGroup::Outcome&) { FAIL(); });
    refused += no_fields && no_fields->status.code() == StatusCode::kInvalid;
    AppendRequest bad_id = Entry("n", "x");
    bad_id.entry_id = "not-an-id";
    auto bad = group.Append(bad_id, [](const AppendGroup::Outcome&) { FAIL(); });
    refused += bad && bad->status.code() == StatusCode::kInvalid;
  }
  EXPECT_EQ(refused, 100);
  ASSERT_TRUE(RunUntil([&] { return good.back().has_value(); }));
  for (const auto& outcome : good) EXPECT_TRUE(outcome->status.ok()) << outcome->status.ToString();
  EXPECT_EQ(Len("feed"), 50);
}

TEST_F(AppendGroupTest, EveryAppendOfAGroupGetsWhatRedisSaidOfTheCall) {
  server_.Run({"SET", "feed", "not a stream"});
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(8);
  for (auto& outcome : outcomes) Queue(group, Entry("n", "1"), &outcome);
  ASSERT_TRUE(RunUntil([&] { return outcomes.back().has_value(); }));
  for (const auto& outcome : outcomes) {
    EXPECT_EQ(outcome->status.code(), StatusCode::kServerError) << outcome->status.ToString();
    EXPECT_NE(outcome->status.message().find("WRONGTYPE"), std::string::npos);
  }
  server_.Kill();
  const auto down = AppendAndWait(group, Entry("n", "1"));
  EXPECT_TRUE(down.status.code() == StatusCode::kIo || down.status.code() == StatusCode::kTimeout)
      << down.status.ToString();
  EXPECT_GE(down.retry_after, 1);
  // Down: answered at once, not after a connect timeout.
  const auto start = SteadyClock::now();
  const auto again = AppendAndWait(group, Entry("n", "1"));
  EXPECT_EQ(again.status.code(), StatusCode::kIo) << again.status.ToString();
  EXPECT_LT(SteadyClock::now() - start, std::chrono::milliseconds(500));
}

// Redis restarts while groups are on their way: every append is answered exactly once (by its
// receipt, or 503-class for a group whose call was lost), the receipts given keep arrival order,
// and appends succeed again within about a second of Redis's return (the reconnect cap), with the
// script loaded again.
TEST_F(AppendGroupTest, ARedisRestartMidGroupAnswersEveryAppendOnceAndAppendsResume) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("feed");
  constexpr int kAppends = 4000;
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(kAppends);
  int queued = 0;
  auto answered = [&] {
    int n = 0;
    for (int i = 0; i < queued; ++i) n += outcomes[i].has_value();
    return n;
  };
  // A steady trickle: 200 per round of the loop, and the restart in the middle. Every other
  // round's appends carry idempotency keys: their groups are script calls, the others' plain
  // XADDs.
  bool restarted = false;
  while (queued < kAppends) {
    const bool keyed = queued % 400 >= 200;
    for (int i = 0; i < 200 && queued < kAppends; ++i, ++queued) {
      Queue(group, Entry("n", std::to_string(queued), keyed ? "k" + std::to_string(queued) : ""),
            &outcomes[queued]);
    }
    loop_->RunOnce(Millis(1));
    if (!restarted && queued >= kAppends / 2) {
      server_.Kill();
      server_.Start();
      restarted = true;
    }
  }
  ASSERT_TRUE(RunUntil([&] { return answered() == kAppends; }));
  std::string last;
  int ok = 0;
  int lost = 0;
  for (const auto& outcome : outcomes) {
    if (outcome->status.ok()) {
      ++ok;
      if (!last.empty()) {
        EXPECT_LT(ParseId(last), ParseId(outcome->result.id));
      }
      last = outcome->result.id;
    } else {
      ++lost;
      EXPECT_TRUE(outcome->status.code() == StatusCode::kIo ||
                  outcome->status.code() == StatusCode::kTimeout)
          << outcome->status.ToString();
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(lost, 0) << "the restart failed some group";
  // Back: an append succeeds within a couple of seconds (each 503 is retried after a moment).
  bool back = false;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(3);
  while (!back && SteadyClock::now() < deadline) {
    back = AppendAndWait(group, Entry("n", "after")).status.ok();
    if (!back) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(back);
  // SCRIPT FLUSH: the next group that needs the script is refused NOSCRIPT and sent again with
  // the script.
  server_.Run({"SCRIPT", "FLUSH"});
  EXPECT_TRUE(AppendAndWait(group, Entry("n", "flushed", "k-flushed")).status.ok());
  auto newest = server_.Run({"XREVRANGE", "feed", "+", "-", "COUNT", "1"});
  ASSERT_EQ(newest.view().Size(), 1u);
  EXPECT_EQ(newest.view()[0][1][1].Str(), "flushed");
}

// While a lane's group is on its way, the next round's appends go at once as a group of their
// own, up to kMaxInFlight groups out; past it they wait for an answer and go together. Redis
// appends them in the order they were sent.
TEST_F(AppendGroupTest, AnAppendDoesNotWaitForTheGroupOnItsWayUpToTheCap) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("feed");
  // Redis reads the XADDs but runs none until the pause ends.
  server_.Run({"CLIENT", "PAUSE", "10000", "WRITE"});
  constexpr size_t kCap = AppendGroup::kMaxInFlight;
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(kCap + 2);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    Queue(group, Entry("n", std::to_string(i)), &outcomes[i]);
    const uint64_t expected = std::min<uint64_t>(i + 1, kCap);
    ASSERT_TRUE(RunUntil([&] { return group.groups_sent() == expected; }, Millis(2000))) << i;
  }
  loop_->RunOnce(Millis(50));
  EXPECT_EQ(group.groups_sent(), kCap) << "past the cap, appends wait for an answer";
  for (const auto& outcome : outcomes) EXPECT_FALSE(outcome.has_value());
  server_.Run({"CLIENT", "UNPAUSE"});
  ASSERT_TRUE(RunUntil([&] { return outcomes.back().has_value(); }));
  auto stored = server_.Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(stored.view().Size(), outcomes.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_TRUE(outcomes[i]->status.ok()) << outcomes[i]->status.ToString();
    EXPECT_EQ(outcomes[i]->result.id, stored.view()[i][0].Str()) << i;
    EXPECT_EQ(stored.view()[i][1][1].Str(), std::to_string(i));
  }
  EXPECT_EQ(group.groups_sent(), kCap + 1) << "the two that waited went together";
}

// SCRIPT FLUSH while several script groups are on their way: each comes back NOSCRIPT, goes back
// behind the ones before it, and nothing is sent again until all have answered, so the appends
// land in arrival order, the ones that waited at the cap behind them.
TEST_F(AppendGroupTest, GroupsThatComeBackNoScriptTogetherKeepArrivalOrder) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("feed");  // loads the script
  server_.Run({"SCRIPT", "FLUSH"});
  server_.Run({"CLIENT", "PAUSE", "10000", "WRITE"});  // EVALSHA waits too
  constexpr size_t kCap = AppendGroup::kMaxInFlight;
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(kCap + 3);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    Queue(group, Entry("n", std::to_string(i), "k" + std::to_string(i)), &outcomes[i]);
    const uint64_t expected = std::min<uint64_t>(i + 1, kCap);
    ASSERT_TRUE(RunUntil([&] { return group.groups_sent() == expected; }, Millis(2000))) << i;
  }
  server_.Run({"CLIENT", "UNPAUSE"});
  ASSERT_TRUE(RunUntil(
      [&] { return std::ranges::all_of(outcomes, [](const auto& o) { return o.has_value(); }); }));
  auto stored = server_.Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(stored.view().Size(), outcomes.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_TRUE(outcomes[i]->status.ok()) << i << ": " << outcomes[i]->status.ToString();
    EXPECT_EQ(stored.view()[i][1][1].Str(), std::to_string(i)) << "arrival order";
    EXPECT_EQ(outcomes[i]->result.id, stored.view()[i][0].Str()) << i;
  }
}

// Single appends that need no script go as plain capped XADDs (no script call), capped as the
// script caps, and never on an archived stream.
TEST_F(AppendGroupTest, PlainGroupsRunNoScriptAndCapAsTheScriptDoes) {
  for (const bool archive : {false, true}) {
    config::LogStream stream = Stream(archive ? "archived" : "capped");
    stream.max_len = 100;
    stream.archive = archive;
    Producer producer(stream, Millis(60000));
    AppendGroup group(&producer, links_.get());
    WaitReady(stream.name);
    const std::string before(server_.Run({"INFO", "commandstats"}).view().Str());
    int answered = 0;
    for (int round = 0; round < 10; ++round) {
      for (int i = 0; i < 50; ++i) {
        ASSERT_FALSE(group.Append(Entry("n", std::to_string(i)), [&](AppendGroup::Outcome o) {
          EXPECT_TRUE(o.status.ok()) << o.status.ToString();
          ++answered;
        }));
      }
      loop_->RunOnce(Millis(1));
    }
    ASSERT_TRUE(RunUntil([&] { return answered == 500; }));
    const std::string after(server_.Run({"INFO", "commandstats"}).view().Str());
    const auto evalsha = [](const std::string& info) {
      const size_t at = info.find("cmdstat_evalsha:calls=");
      return at == std::string::npos ? 0 : std::stoll(info.substr(at + 22));
    };
    EXPECT_EQ(evalsha(after), evalsha(before)) << stream.name;
    const int64_t len = Len(stream.name);
    if (archive) {
      EXPECT_EQ(len, 500) << "only the folder trims an archived stream";
    } else {
      EXPECT_GE(len, 100);
      EXPECT_LT(len, 300);  // MAXLEN ~ trims whole nodes
    }
  }
}

// A group of plain XADDs that Redis refuses part of the way (here: out of memory after the
// first ones): each append gets what Redis said of its own XADD, so the appends Redis took keep
// their receipts and only the others fail.
TEST_F(AppendGroupTest, APlainGroupRefusedPartOfTheWayKeepsTheReceiptsOfWhatWasAppended) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("feed");
  const std::string memory(server_.Run({"INFO", "memory"}).view().Str());
  const size_t at = memory.find("used_memory:") + std::string("used_memory:").size();
  const int64_t used = std::stoll(memory.substr(at));
  // Redis reads a large argument alone, so its query buffer holds about one entry at a time:
  // the first two of 900 KB fit under the limit, the third does not.
  constexpr int64_t kEntry = 900 * 1024;
  server_.Run({"CONFIG", "SET", "maxmemory", std::to_string(used + 2300 * 1024)});
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(4);
  for (auto& outcome : outcomes) {
    Queue(group, Entry("v", std::string(static_cast<size_t>(kEntry), 'x')), &outcome);
  }
  ASSERT_TRUE(RunUntil([&] { return outcomes.back().has_value(); }));
  server_.Run({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(group.groups_sent(), 1U);
  std::set<std::string> receipts;
  size_t refused = 0;
  for (const auto& outcome : outcomes) {
    if (outcome->status.ok()) {
      receipts.insert(outcome->result.id);
    } else {
      ++refused;
      EXPECT_NE(outcome->status.message().find("OOM"), std::string::npos)
          << outcome->status.ToString();
    }
  }
  EXPECT_GE(receipts.size(), 1U);
  EXPECT_GE(refused, 1U);
  auto stored = server_.Run({"XRANGE", "feed", "-", "+"});
  std::set<std::string> ids;
  for (size_t i = 0; i < stored.view().Size(); ++i) ids.emplace(stored.view()[i][0].Str());
  EXPECT_EQ(ids, receipts) << "a receipt for each entry appended, and none for another";
}

// A call that Redis does not answer within the command timeout fails every append of its group
// with kTimeout, and the lane goes on once Redis answers again.
TEST_F(AppendGroupTest, ALaneWhoseCallTimesOutFailsItsGroupAndGoesOn) {
  auto options = server_.ClientOptions();
  options.command_timeout = Millis(300);
  Connect(options);
  Producer producer(Stream("feed"), Millis(60000));
  AppendGroup group(&producer, links_.get());
  WaitReady("feed");
  server_.Signal(SIGSTOP);
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(20);
  for (auto& outcome : outcomes) Queue(group, Entry("n", "1"), &outcome);
  const bool all = RunUntil([&] { return outcomes.back().has_value(); }, Millis(5000));
  server_.Signal(SIGCONT);
  ASSERT_TRUE(all);
  for (const auto& outcome : outcomes) {
    EXPECT_EQ(outcome->status.code(), StatusCode::kTimeout) << outcome->status.ToString();
  }
  bool back = false;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(3);
  while (!back && SteadyClock::now() < deadline) {
    back = AppendAndWait(group, Entry("n", "after")).status.ok();
  }
  EXPECT_TRUE(back);
}

TEST_F(AppendGroupTest, AShardedStreamGroupsByEntryKeyAndEachLandsInItsShard) {
  config::LogStream stream = Stream("orders");
  stream.shards = 4;
  stream.shard_key_pattern = "orders:{%d}";
  Producer producer(stream, Millis(60000));
  AppendGroup group(&producer, links_.get());
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(320);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    AppendRequest request = Entry("n", std::to_string(i));
    request.shard_key = "customer-" + std::to_string(i % 10);
    Queue(group, request, &outcomes[i]);
  }
  ASSERT_TRUE(RunUntil([&] { return outcomes.back().has_value(); }));
  std::set<std::string> receipts;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ASSERT_TRUE(outcomes[i]->status.ok()) << outcomes[i]->status.ToString();
    receipts.insert(std::to_string(i % 10) + " " + outcomes[i]->result.id);
  }
  EXPECT_EQ(receipts.size(), outcomes.size());
  int64_t total = 0;
  for (int shard = 0; shard < 4; ++shard) total += Len("orders:{" + std::to_string(shard) + "}");
  EXPECT_EQ(total, 320);
}

}  // namespace
}  // namespace streamcar::log

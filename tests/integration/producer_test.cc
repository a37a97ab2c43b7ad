// The append script (SPEC 10, POST .../entries and `produce`) against a real redis-server.

#include "sidecar/log/producer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <initializer_list>
#include <set>
#include <thread>

#include "sidecar/keys/stream_keys.h"
#include "sidecar/log/entry_id.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::log {
namespace {

using streamcar::testing::RedisServer;

class ProducerTest : public ::testing::Test {
 protected:
  void SetUp() override { session_ = NewSession(); }

  std::unique_ptr<redis::Session> NewSession() {
    auto session = std::make_unique<redis::Session>(server_.ClientOptions(), "test", &health_);
    StopSignal stop;
    EXPECT_TRUE(session->EnsureConnected(stop).ok());
    return session;
  }

  static config::LogStream Stream(const std::string& name) {
    config::LogStream stream;
    stream.name = name;
    return stream;
  }

  int64_t Len(const std::string& stream) { return server_.Run({"XLEN", stream}).view().Integer(); }

  RedisServer server_;
  redis::RedisHealth health_;
  std::unique_ptr<redis::Session> session_;
};

TEST_F(ProducerTest, AppendsArbitraryBytesAndReturnsTheId) {
  Producer producer(Stream("feed"), Millis(60000));
  const std::string binary("\0\xff\r\n{}\"", 7);
  AppendRequest request;
  request.fields = {{"name", "value"}, {binary, binary}, {"name", "again"}, {"", ""}};
  auto result = producer.Append(*session_, request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->kind, AppendResult::Kind::kAppended);
  auto reply = server_.Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(reply.view().Size(), 1u);
  EXPECT_EQ(reply.view()[0][0].Str(), result->id);
  const auto fields = reply.view()[0][1];
  ASSERT_EQ(fields.Size(), 8u);
  EXPECT_EQ(fields[2].Str(), binary);
  EXPECT_EQ(fields[3].Str(), binary);
  EXPECT_EQ(fields[5].Str(), "again");
  EXPECT_EQ(fields[6].Str(), "");
}

TEST_F(ProducerTest, IdempotencyKeyAppendsOnceAndAnswersTheFirstId) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendRequest request;
  request.fields = {{"n", "1"}};
  request.idempotency_key = "order-17";
  auto first = producer.Append(*session_, request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->kind, AppendResult::Kind::kAppended);
  request.fields = {{"n", "2"}};
  auto again = producer.Append(*session_, request);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->kind, AppendResult::Kind::kDuplicate);
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(Len("feed"), 1);
  // The key lives in the stream's slot, with the TTL asked for.
  EXPECT_EQ(server_.Run({"GET", keys::IdempotencyKey("feed", "order-17")}).view().Str(), first->id);
  const int64_t ttl =
      server_.Run({"PTTL", keys::IdempotencyKey("feed", "order-17")}).view().Integer();
  EXPECT_GT(ttl, 50000);
  EXPECT_LE(ttl, 60000);
  // Another key appends.
  request.idempotency_key = "order-18";
  auto other = producer.Append(*session_, request);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->kind, AppendResult::Kind::kAppended);
  EXPECT_EQ(Len("feed"), 2);
}

TEST_F(ProducerTest, ConcurrentAppendsWithOneKeyAppendOnce) {
  Producer producer(Stream("feed"), Millis(60000));
  constexpr int kThreads = 8;
  std::vector<std::string> ids(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> appended{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto session = NewSession();
      AppendRequest request;
      request.fields = {{"t", std::to_string(t)}};
      request.idempotency_key = "same";
      auto result = producer.Append(*session, request);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      if (result->kind == AppendResult::Kind::kAppended) ++appended;
      ids[t] = result->id;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(appended.load(), 1);
  EXPECT_EQ(Len("feed"), 1);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 1u);
}

TEST_F(ProducerTest, ExplicitIdIsKeptAndANonMonotonicOneAnswersTheTop) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendRequest request;
  request.fields = {{"a", "1"}};
  request.entry_id = "1000-5";
  auto first = producer.Append(*session_, request);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->kind, AppendResult::Kind::kAppended);
  EXPECT_EQ(first->id, "1000-5");
  for (const char* stale : {"1000-5", "1000-4", "999-9"}) {
    request.entry_id = stale;
    request.idempotency_key = std::string("k-") + stale;
    auto refused = producer.Append(*session_, request);
    ASSERT_TRUE(refused.ok()) << refused.status().ToString();
    EXPECT_EQ(refused->kind, AppendResult::Kind::kNonMonotonic) << stale;
    EXPECT_EQ(refused->id, "1000-5");
    // Refused appends record no idempotency key: a retry with a good id can still append.
    EXPECT_EQ(server_.Run({"EXISTS", keys::IdempotencyKey("feed", std::string("k-") + stale)})
                  .view()
                  .Integer(),
              0);
  }
  // The top XADD compares with survives deleting the last entry.
  server_.Run({"XDEL", "feed", "1000-5"});
  request.entry_id = "1000-5";
  auto after_delete = producer.Append(*session_, request);
  ASSERT_TRUE(after_delete.ok());
  EXPECT_EQ(after_delete->kind, AppendResult::Kind::kNonMonotonic);
  EXPECT_EQ(after_delete->id, "1000-5");
  request.entry_id = "0-0";
  auto zero = producer.Append(*session_, request);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->kind, AppendResult::Kind::kNonMonotonic);
  EXPECT_EQ(Len("feed"), 0);
}

// Issue 29 (review F4): an id more than the skew ahead of Redis's TIME, or the maximum id, is
// refused without appending or spending its idempotency key; within the skew it is kept.
TEST_F(ProducerTest, IdsTooFarAheadOrTheMaximumIdAreOutOfRange) {
  Producer producer(Stream("feed"), Millis(60000), Millis(10'000));
  auto time = server_.Run({"TIME"});
  const int64_t now_ms = std::stoll(std::string(time.view()[0].Str())) * 1000 +
                         std::stoll(std::string(time.view()[1].Str())) / 1000;
  AppendRequest request;
  request.fields = {{"a", "1"}};
  request.idempotency_key = "k";
  for (const std::string& id :
       {std::string("18446744073709551615-18446744073709551615"),
        std::string("18446744073709551615-0"), std::to_string(now_ms + 20'000) + "-0"}) {
    request.entry_id = id;
    auto refused = producer.Append(*session_, request);
    ASSERT_TRUE(refused.ok()) << refused.status().ToString();
    EXPECT_EQ(refused->kind, AppendResult::Kind::kOutOfRange) << id;
  }
  EXPECT_EQ(server_.Run({"EXISTS", "feed", keys::IdempotencyKey("feed", "k")}).view().Integer(), 0);
  request.entry_id = std::to_string(now_ms + 5'000) + "-0";
  auto kept = producer.Append(*session_, request);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->kind, AppendResult::Kind::kAppended);
  EXPECT_EQ(kept->id, request.entry_id);
  request.entry_id.clear();
  request.idempotency_key.clear();
  auto automatic = producer.Append(*session_, request);
  ASSERT_TRUE(automatic.ok()) << automatic.status().ToString();
  EXPECT_EQ(automatic->kind, AppendResult::Kind::kAppended);
  EXPECT_EQ(Len("feed"), 2);
}

// The calls of `commands` Redis has run, from INFO commandstats (a script's own XADDs count as
// XADD calls too).
int64_t Calls(const RedisServer& server, std::initializer_list<const char*> commands) {
  const std::string info(server.Run({"INFO", "commandstats"}).view().Str());
  int64_t calls = 0;
  for (const char* command : commands) {
    const std::string field = std::string("cmdstat_") + command + ":calls=";
    const size_t at = info.find(field);
    if (at != std::string::npos) calls += std::stoll(info.substr(at + field.size()));
  }
  return calls;
}

// The script calls Redis has run (EVALSHA and EVAL).
int64_t ScriptCalls(const RedisServer& server) { return Calls(server, {"evalsha", "eval"}); }

// Issue 29: a batch is one script call; each entry is decided on its own, in order.
TEST_F(ProducerTest, AppendAllIsOneScriptCallWithOneResultPerEntryInOrder) {
  Producer producer(Stream("feed"), Millis(60000));
  ASSERT_TRUE(
      producer.Append(*session_, {.fields = {{"warm", "1"}}, .idempotency_key = "k1"}).ok());
  const std::vector<std::string> idempotency_keys = {"", "", "k1", "k3", "k3"};
  std::vector<AppendRequest> batch;
  for (size_t i = 0; i < idempotency_keys.size(); ++i) {
    batch.push_back({.fields = {{"i", std::to_string(i)}}, .idempotency_key = idempotency_keys[i]});
  }
  const int64_t before = ScriptCalls(server_);
  auto results = producer.AppendAll(*session_, batch);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  EXPECT_EQ(ScriptCalls(server_) - before, 1);
  ASSERT_EQ(results->size(), 5u);
  using Kind = AppendResult::Kind;
  EXPECT_EQ((*results)[0].kind, Kind::kAppended);
  EXPECT_EQ((*results)[1].kind, Kind::kAppended);
  EXPECT_EQ((*results)[2].kind, Kind::kDuplicate);  // k1 from before the batch
  EXPECT_EQ((*results)[3].kind, Kind::kAppended);
  EXPECT_EQ((*results)[4].kind, Kind::kDuplicate);  // k3, appended by entry 3 of this batch
  EXPECT_EQ((*results)[4].id, (*results)[3].id);
  EXPECT_LT(CompareIds((*results)[0].id, (*results)[1].id), 0);
  EXPECT_LT(CompareIds((*results)[1].id, (*results)[3].id), 0);
  EXPECT_EQ(Len("feed"), 4);

  batch.assign(Producer::kMaxBatch + 1, {.fields = {{"a", "1"}}});
  EXPECT_EQ(producer.AppendAll(*session_, batch).status().code(), StatusCode::kInvalid);
  EXPECT_EQ(Len("feed"), 4);
}

// Entries that need no script go as plain capped XADDs: a batch (AppendAll: a batch append,
// `produce`) between MULTI and EXEC, one atomic step; concurrent single appends (kIndependent)
// as one XADD each. One entry that needs the script (an idempotency key, an explicit id, a
// `notify` stream) takes the whole call there.
TEST_F(ProducerTest, EntriesThatNeedNoScriptArePlainXaddsABatchInOneTransaction) {
  Producer producer(Stream("feed"), Millis(60000));
  std::vector<AppendRequest> batch;
  for (int i = 0; i < 5; ++i) batch.push_back({.fields = {{"i", std::to_string(i)}}});
  const int64_t scripts = ScriptCalls(server_);
  const int64_t execs = Calls(server_, {"exec"});
  auto results = producer.AppendAll(*session_, batch);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  EXPECT_EQ(ScriptCalls(server_) - scripts, 0);
  EXPECT_EQ(Calls(server_, {"exec"}) - execs, 1);
  auto stored = server_.Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(stored.view().Size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*results)[i].kind, AppendResult::Kind::kAppended);
    EXPECT_EQ((*results)[i].id, stored.view()[i][0].Str()) << "receipts in order";
    EXPECT_EQ(stored.view()[i][1][1].Str(), std::to_string(i));
  }

  auto independent = producer.Prepare(batch, Producer::Grouping::kIndependent);
  ASSERT_TRUE(independent.ok());
  EXPECT_EQ(independent->form, Producer::Form::kPlain);
  ASSERT_EQ(independent->commands.size(), 5u);
  EXPECT_EQ(independent->commands[0].name(), "XADD");
  EXPECT_EQ(producer.Prepare(batch)->form, Producer::Form::kTransaction) << "a batch by default";
  for (const auto& [what, change] :
       std::vector<std::pair<std::string, std::function<void(AppendRequest&)>>>{
           {"idempotency key", [](AppendRequest& r) { r.idempotency_key = "k"; }},
           {"explicit id", [](AppendRequest& r) { r.entry_id = "1-1"; }}}) {
    std::vector<AppendRequest> mixed = batch;
    change(mixed[2]);
    for (const auto grouping : {Producer::Grouping::kBatch, Producer::Grouping::kIndependent}) {
      auto prepared = producer.Prepare(mixed, grouping);
      ASSERT_TRUE(prepared.ok());
      EXPECT_EQ(prepared->form, Producer::Form::kScript) << what;
      EXPECT_EQ(prepared->commands.size(), 1u) << what;
    }
  }
  auto notify = Stream("events");
  notify.notify = true;
  EXPECT_EQ(Producer(notify, Millis(60000)).Prepare(batch)->form, Producer::Form::kScript);
}

// A batch of plain XADDs that Redis refuses as it queues (out of memory) appends nothing: the
// transaction is discarded whole, and the refusal is the answer.
TEST_F(ProducerTest, ABatchRefusedAsItQueuesAppendsNothing) {
  Producer producer(Stream("feed"), Millis(60000));
  const std::string memory(server_.Run({"INFO", "memory"}).view().Str());
  const size_t at = memory.find("used_memory:") + std::string("used_memory:").size();
  server_.Run(
      {"CONFIG", "SET", "maxmemory", std::to_string(std::stoll(memory.substr(at)) + 2300 * 1024)});
  std::vector<AppendRequest> batch(4,
                                   AppendRequest{.fields = {{"v", std::string(900 * 1024, 'x')}}});
  auto results = producer.AppendAll(*session_, batch);
  server_.Run({"CONFIG", "SET", "maxmemory", "0"});
  ASSERT_FALSE(results.ok());
  EXPECT_TRUE(results.status().IsServerError("OOM")) << results.status().ToString();
  EXPECT_EQ(server_.Run({"EXISTS", "feed"}).view().Integer(), 0) << "nothing appended";
  server_.Run({"SET", "feed", "not a stream"});
  results = producer.AppendAll(*session_, std::vector<AppendRequest>(2, {.fields = {{"a", "1"}}}));
  ASSERT_FALSE(results.ok());
  EXPECT_TRUE(results.status().IsServerError("WRONGTYPE")) << results.status().ToString();
}

TEST_F(ProducerTest, InvalidRequestsAreRefusedBeforeRedis) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendRequest request;
  EXPECT_EQ(producer.Append(*session_, request).status().code(), StatusCode::kInvalid);
  request.fields = {{"a", "1"}};
  for (const char* bad : {"*", "5", "5-*", "x-1", "-1-0"}) {
    request.entry_id = bad;
    EXPECT_EQ(producer.Append(*session_, request).status().code(), StatusCode::kInvalid) << bad;
  }
  request.entry_id.clear();
  request.fields.assign(3001, {"f", "v"});
  auto many = producer.Append(*session_, request);
  EXPECT_EQ(many.status().code(), StatusCode::kInvalid);
  request.fields.assign(3000, {"f", "v"});
  auto most = producer.Append(*session_, request);
  ASSERT_TRUE(most.ok()) << most.status().ToString();
  EXPECT_EQ(Len("feed"), 1);
}

// SPEC 9: a stream a sharded subscription reads is appended to in the shard of the entry's key
// (crc32 mod S), its idempotency key in that shard's slot; without a key nothing is appended.
TEST_F(ProducerTest, ASharedStreamAppendsToTheShardOfTheKey) {
  config::LogStream stream = Stream("orders");
  stream.shards = 16;
  stream.shard_key_pattern = "orders:{%d}";
  Producer producer(stream, Millis(60000));
  AppendRequest request{
      .fields = {{"n", "1"}}, .idempotency_key = "once", .shard_key = "123456789"};
  auto first = producer.Append(*session_, request);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(Len("orders:{6}"), 1);
  auto again = producer.Append(*session_, request);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->kind, AppendResult::Kind::kDuplicate);
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(server_.Run({"EXISTS", keys::IdempotencyKey("orders:{6}", "once")}).view().Integer(), 1)
      << "the idempotency key lives in the shard's slot";
  EXPECT_EQ(server_.Run({"EXISTS", "orders"}).view().Integer(), 0);

  auto keyless = producer.Append(*session_, AppendRequest{.fields = {{"n", "2"}}});
  ASSERT_FALSE(keyless.ok());
  EXPECT_EQ(keyless.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(Len("orders:{6}"), 1);
}

// Both ways of appending cap alike: the plain XADDs (a transaction) and the script's (an
// idempotency key).
TEST_F(ProducerTest, MaxLenCapsTheStreamApproximately) {
  for (const bool keyed : {false, true}) {
    auto stream = Stream(keyed ? "keyed" : "plain");
    stream.max_len = 100;
    Producer producer(stream, Millis(60000));
    for (int i = 0; i < 1000; ++i) {
      AppendRequest request{.fields = {{"a", "1"}},
                            .idempotency_key = keyed ? "k" + std::to_string(i) : ""};
      ASSERT_TRUE(producer.Append(*session_, request).ok());
    }
    const int64_t len = Len(stream.name);
    EXPECT_GE(len, 100) << stream.name;
    EXPECT_LT(len, 300) << stream.name;  // MAXLEN ~ trims whole nodes (100 entries each)
  }
}

TEST_F(ProducerTest, AnArchivedStreamIsNeverCappedByTheAppend) {
  for (const bool keyed : {false, true}) {
    auto stream = Stream(keyed ? "keyed" : "plain");
    stream.max_len = 100;
    stream.archive = true;  // only the folder trims it, after folding
    Producer producer(stream, Millis(60000));
    for (int i = 0; i < 500; ++i) {
      AppendRequest request{.fields = {{"a", "1"}},
                            .idempotency_key = keyed ? "k" + std::to_string(i) : ""};
      ASSERT_TRUE(producer.Append(*session_, request).ok());
    }
    EXPECT_EQ(Len(stream.name), 500) << stream.name;
  }
}

TEST_F(ProducerTest, NotifyPublishesTheIdAfterTheAppendOnly) {
  auto stream = Stream("feed");
  stream.notify = true;
  Producer producer(stream, Millis(60000));
  auto subscriber = server_.Connect();
  ASSERT_TRUE(subscriber->Run(redis::Command("SUBSCRIBE").Arg("feed:events")).ok());
  AppendRequest request;
  request.fields = {{"a", "1"}};
  request.idempotency_key = "k";
  auto first = producer.Append(*session_, request);
  ASSERT_TRUE(first.ok());
  auto duplicate = producer.Append(*session_, request);  // not announced
  ASSERT_TRUE(duplicate.ok());
  request.idempotency_key.clear();
  auto second = producer.Append(*session_, request);
  ASSERT_TRUE(second.ok());
  // A subscribed connection answers each PING after the messages already sent to it, and one
  // reply is read per command: the first two replies are the queued messages, in publish order,
  // and the third is the first PING's pong, so no message announced the duplicate.
  for (const auto& expected : {first->id, second->id}) {
    auto message = subscriber->Run(redis::Command("PING"));
    ASSERT_TRUE(message.ok());
    ASSERT_EQ(message->view().Size(), 3u);
    EXPECT_EQ(message->view()[0].Str(), "message");
    EXPECT_EQ(message->view()[1].Str(), "feed:events");
    EXPECT_EQ(message->view()[2].Str(), "{\"id\":\"" + expected + "\"}");
  }
  auto pong = subscriber->Run(redis::Command("PING"));
  ASSERT_TRUE(pong.ok());
  EXPECT_EQ(pong->view()[0].Str(), "pong");
}

TEST_F(ProducerTest, WrongTypeIsAServerErrorAndNoKeyIsRecorded) {
  server_.Run({"SET", "feed", "not a stream"});
  Producer producer(Stream("feed"), Millis(60000));
  AppendRequest request;
  request.fields = {{"a", "1"}};
  request.idempotency_key = "k";
  auto result = producer.Append(*session_, request);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsServerError("WRONGTYPE")) << result.status().ToString();
  EXPECT_EQ(server_.Run({"EXISTS", keys::IdempotencyKey("feed", "k")}).view().Integer(), 0);
}

TEST_F(ProducerTest, ReloadsTheScriptAfterAFlush) {
  Producer producer(Stream("feed"), Millis(60000));
  AppendRequest request;
  request.fields = {{"a", "1"}};
  request.idempotency_key = "k1";  // an append that needs the script
  ASSERT_TRUE(producer.Append(*session_, request).ok());
  server_.Run({"SCRIPT", "FLUSH"});
  request.idempotency_key = "k2";
  auto again = producer.Append(*session_, request);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Len("feed"), 2);  // NOSCRIPT ran nothing; the retry appended once
}

}  // namespace
}  // namespace streamcar::log

// The log API's Redis side (SPEC 10) on a real 3-master Redis Cluster (SPEC 8: "every section
// below works in every mode"): appends with idempotency keys and reads by time on each stream's
// master, and following: one XREAD may only name keys of one slot, so the hub reads each slot's
// streams on that slot's master, and interrupts each of those reads on its own node. The API's
// group commit of single appends follows a slot migration in the cluster and a failover behind
// Sentinel.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/keys/key_slot.h"
#include "sidecar/log/append_group.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/follow_hub.h"
#include "sidecar/log/log_reader.h"
#include "sidecar/log/producer.h"
#include "sidecar/redis/session.h"
#include "sidecar/redis/topology/topology.h"
#include "sidecar/redis/topology/topology_routes.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/redis_cluster.h"
#include "tests/support/redis_sentinel.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::log {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using streamcar::testing::RedisCluster;

keys::NodeAddress AddressOf(const testing::RedisServer& server) {
  return {"127.0.0.1", server.port()};
}

// Takes entries from `follower` until it has `n` or `timeout` passed; any error fails the test.
std::vector<StreamEntry> Collect(Follower& follower, size_t n, milliseconds timeout) {
  std::vector<StreamEntry> entries;
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<StreamEntry> batch;
  while (entries.size() < n && SteadyClock::now() < deadline) {
    Status status = follower.Next(&batch, Millis(200));
    EXPECT_TRUE(status.ok()) << status.ToString();
    if (!status.ok()) break;
    for (auto& entry : batch) entries.push_back(std::move(entry));
  }
  return entries;
}

class LogClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::UnderSanitizer()) GTEST_SKIP() << "a 3-node cluster: plain stage only";
    cluster_ =
        std::make_unique<RedisCluster>(testing::RedisClusterOptions{.replicas_per_master = 0});
    ASSERT_FALSE(HasFatalFailure());
    for (int i = 0; i < 3; ++i) streams_.push_back(cluster_->KeyOnMaster(i, "feed-"));
    // The same slot as streams_[0] (its hash tag): shares that stream's lane.
    streams_.push_back("{" + streams_[0] + "}:second");
    redis::TopologyOptions options;
    options.mode = config::RedisMode::kCluster;
    options.data = cluster_->node(0).ClientOptions();
    options.seeds = {AddressOf(cluster_->node(1)), AddressOf(cluster_->node(2))};
    for (const auto& stream : streams_) options.used_slots.push_back(keys::KeySlot(stream));
    topology_ = std::make_shared<redis::Topology>(std::move(options), nullptr);
    ASSERT_TRUE(topology_->Resolve(SteadyClock::now() + seconds(20)).ok());
  }

  void AppendThroughAMigration(bool keyed);

  redis::ConnectionOptions HubOptions() const {
    redis::ConnectionOptions options = cluster_->node(0).ClientOptions();
    options.topology = topology_;
    return options;
  }

  std::string Add(const std::string& stream, const std::string& value) {
    const redis::Reply id = cluster_->Run(stream, {"XADD", stream, "*", "v", value});
    EXPECT_TRUE(id.view().IsString()) << stream;
    return std::string(id.view().Str());
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::vector<std::string> streams_;  // [i] on master i for i < 3; [3] in the slot of [0]
  std::shared_ptr<redis::Topology> topology_;
};

// Appends to streams on every master, each with an idempotency key (the append script names the
// stream and the key: both in the stream's slot, else -CROSSSLOT), a repeat answered with the
// first id, and a read by time of each stream from its own master.
TEST_F(LogClusterTest, ProducesWithIdempotencyAndReadsByTimeOnEveryMaster) {
  redis::RedisHealth health;
  redis::Session session(HubOptions(), "test", &health,
                         std::make_shared<redis::TopologyRoutes>(topology_));
  Millis retry_in{0};
  ASSERT_TRUE(session.ConnectOnce(&retry_in).ok());
  const int64_t before_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::vector<std::string> ids;
  for (const auto& stream : streams_) {
    config::LogStream settings;
    settings.name = stream;
    settings.notify = true;  // PUBLISH from the script: channels are not keys
    Producer producer(settings, Millis(60000));
    AppendRequest request;
    request.fields = {{"v", "for " + stream}};
    request.idempotency_key = "k1";
    auto first = producer.Append(session, request);
    ASSERT_TRUE(first.ok()) << stream << ": " << first.status().ToString();
    EXPECT_EQ(first->kind, AppendResult::Kind::kAppended);
    auto repeat = producer.Append(session, request);
    ASSERT_TRUE(repeat.ok()) << stream << ": " << repeat.status().ToString();
    EXPECT_EQ(repeat->kind, AppendResult::Kind::kDuplicate);
    EXPECT_EQ(repeat->id, first->id);
    ids.push_back(first->id);
    // One entry, on the master the cluster itself says serves the stream.
    const redis::Reply len = cluster_->Run(stream, {"XLEN", stream});
    EXPECT_EQ(len.view().Integer(), 1) << stream;
  }
  LogReader reader(&session, nullptr);
  for (size_t i = 0; i < streams_.size(); ++i) {
    WindowQuery query;
    query.since = std::to_string(before_ms) + "-0";
    auto page = reader.Read(streams_[i], query);
    ASSERT_TRUE(page.ok()) << streams_[i] << ": " << page.status().ToString();
    ASSERT_EQ(page->entries.size(), 1u) << streams_[i];
    EXPECT_EQ(page->entries[0].id, ids[i]);
  }
}

// A batch append without idempotency keys goes as plain XADDs between MULTI and EXEC, which the
// routed session sends to the slot's master but does not follow when it moved: Redis discards the
// transaction (EXECABORT), nothing runs, and the batch goes once more as the script call, which
// follows the MOVED. Every batch is appended once, in order, on the slot's new master.
TEST_F(LogClusterTest, ABatchWhoseSlotMovedGoesAgainAsTheScriptAndLandsOnce) {
  redis::RedisHealth health;
  redis::Session session(HubOptions(), "test", &health,
                         std::make_shared<redis::TopologyRoutes>(topology_));
  Millis retry_in{0};
  ASSERT_TRUE(session.ConnectOnce(&retry_in).ok());
  const std::string& stream = streams_[0];
  config::LogStream settings;
  settings.name = stream;
  Producer producer(settings, Millis(60000));
  auto batch = [](const std::string& tag) {
    std::vector<AppendRequest> requests;
    for (int i = 0; i < 3; ++i) requests.push_back({.fields = {{"v", tag + std::to_string(i)}}});
    return requests;
  };
  ASSERT_TRUE(producer.AppendAll(session, batch("before")).ok());
  const int slot = keys::KeySlot(stream);
  const int from = cluster_->MasterOfSlot(slot);
  const int to = (from + 1) % 3;
  cluster_->BeginMigration(slot, from, to);
  cluster_->MoveKeys(slot);
  cluster_->FinishMigration(slot);
  for (const char* tag : {"after", "later"}) {
    auto results = producer.AppendAll(session, batch(tag));
    ASSERT_TRUE(results.ok()) << tag << ": " << results.status().ToString();
    ASSERT_EQ(results->size(), 3u);
  }
  const redis::Reply all = cluster_->Run(stream, {"XRANGE", stream, "-", "+"});
  ASSERT_EQ(all.view().Size(), 9u);
  const std::vector<std::string> expected = {"before0", "before1", "before2", "after0", "after1",
                                             "after2",  "later0",  "later1",  "later2"};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(all.view()[i][1][1].Str(), expected[i]);
  EXPECT_EQ(cluster_->MasterOfSlot(slot), to);
}

// Streams on every master, followed at once, each get their new entries (one XREAD over them all
// is -CROSSSLOT), and history from before the follow (catch-up) comes from each stream's node.
TEST_F(LogClusterTest, FollowsStreamsOnEveryMasterAtOnce) {
  ASSERT_NE(cluster_->MasterIndexOf(streams_[0]), cluster_->MasterIndexOf(streams_[1]));
  ASSERT_NE(cluster_->MasterIndexOf(streams_[1]), cluster_->MasterIndexOf(streams_[2]));
  std::vector<std::string> old_ids;
  for (const auto& stream : streams_) old_ids.push_back(Add(stream, "old"));

  FollowHub hub(HubOptions(), nullptr, {.block = Millis(500)});
  std::vector<std::unique_ptr<Follower>> followers;
  for (const auto& stream : streams_) followers.push_back(hub.Follow(stream, "0-0"));
  for (size_t i = 0; i < streams_.size(); ++i) {
    auto history = Collect(*followers[i], 1, milliseconds(20000));
    ASSERT_EQ(history.size(), 1u) << streams_[i];
    EXPECT_EQ(history[0].id, old_ids[i]);
  }
  // Each stream's second entry, written while every follower waits on the shared reads.
  std::vector<std::string> new_ids;
  for (const auto& stream : streams_) new_ids.push_back(Add(stream, "new:" + stream));
  for (size_t i = 0; i < streams_.size(); ++i) {
    auto live = Collect(*followers[i], 1, milliseconds(20000));
    ASSERT_EQ(live.size(), 1u) << streams_[i];
    EXPECT_EQ(live[0].id, new_ids[i]);
    ASSERT_EQ(live[0].fields.size(), 1u);
    EXPECT_EQ(live[0].fields[0].second, "new:" + streams_[i]);
  }
}

// A stream that joins a lane already blocked on another master joins at once: the waker's CLIENT
// UNBLOCK reaches that lane's node (the id it holds means nothing elsewhere), well before the
// lane's long block would end by itself.
TEST_F(LogClusterTest, AStreamJoiningABlockedLaneOnAnotherMasterJoinsAtOnce) {
  // A lane on master 2: not the seed (node 0), where a keyless command would go by default.
  const std::string first = cluster_->KeyOnMaster(2, "join-");
  const std::string second = "{" + first + "}:late";
  FollowHub hub(HubOptions(), nullptr, {.block = Millis(60000)});
  auto early = hub.Follow(first, "$");
  std::vector<StreamEntry> batch;
  ASSERT_TRUE(early->Next(&batch, Millis(100)).ok());  // joined: its lane blocks for 60 s
  // The lane's XREAD is blocked on master 2 (CLIENT LIST there shows it).
  ASSERT_TRUE(testing::Eventually(
      [&] {
        const redis::Reply list = cluster_->RunOn(2, {"CLIENT", "LIST"});
        return std::string(list.view().Str()).find("cmd=xread") != std::string::npos;
      },
      seconds(20)));
  auto late = hub.Follow(second, "$");
  ASSERT_TRUE(late->Next(&batch, Millis(100)).ok());
  const std::string id = Add(second, "late");
  auto got = Collect(*late, 1, milliseconds(20000));
  ASSERT_EQ(got.size(), 1u) << "the lane's 60 s block was not interrupted on its node";
  EXPECT_EQ(got[0].id, id);
}

// The API's group commit (append_group.h) on the cluster while the stream's slot migrates to
// another master under a steady flow of appends, several groups on their way at once: the groups
// that meet -ASK, -TRYAGAIN or -MOVED go again once the lane's connection has followed the slot,
// so every append is answered once, with its own receipt, in arrival order, and the stream holds
// each once. With idempotency keys the groups are script calls; without, pipelines of plain XADDs
// (of which Redis may turn away only the tail).
void LogClusterTest::AppendThroughAMigration(bool keyed) {
  auto loop = EventLoop::Create(SystemClock::Instance());
  ASSERT_TRUE(loop.ok());
  const std::string& stream = streams_[0];
  const int slot = keys::KeySlot(stream);
  config::LogStream config;
  config.name = stream;
  Producer producer(config, Millis(60000));
  auto links = std::make_unique<AppendLinks>(loop->get(), HubOptions());
  auto group = std::make_unique<AppendGroup>(&producer, links.get());
  constexpr int kAppends = 3000;
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(kAppends);
  std::atomic<int> answered{0};
  int queued = 0;
  // 20 appends every 2 ms on the loop, until all are queued.
  std::unique_ptr<EventLoop::Timer> feed;
  feed = (*loop)->CreateTimer([&] {
    for (int i = 0; i < 20 && queued < kAppends; ++i, ++queued) {
      auto refused =
          group->Append(AppendRequest{.fields = {{"n", std::to_string(queued)}},
                                      .idempotency_key = keyed ? "k" + std::to_string(queued) : ""},
                        [&, at = queued](AppendGroup::Outcome outcome) {
                          EXPECT_FALSE(outcomes[at].has_value()) << "answered twice";
                          outcomes[at] = std::move(outcome);
                          ++answered;
                        });
      ASSERT_FALSE(refused.has_value()) << refused->status.ToString();
    }
    if (queued < kAppends) feed->ArmIn(Millis(2));
  });
  feed->ArmIn(Millis(0));
  std::thread runner([&] { (*loop)->Run(); });
  ASSERT_TRUE(testing::Eventually([&] { return answered >= kAppends / 5; }, seconds(20)));
  cluster_->BeginMigration(slot, 0, 1);
  cluster_->MoveKeys(slot);
  cluster_->FinishMigration(slot);
  const bool all = testing::Eventually([&] { return answered == kAppends; }, seconds(30));
  (*loop)->Stop();
  runner.join();
  ASSERT_TRUE(all) << answered << " of " << kAppends << " answered";
  std::string last;
  for (int i = 0; i < kAppends; ++i) {
    ASSERT_TRUE(outcomes[i]->status.ok()) << i << ": " << outcomes[i]->status.ToString();
    EXPECT_EQ(outcomes[i]->result.kind, AppendResult::Kind::kAppended) << i;
    if (!last.empty()) {
      EXPECT_LT(ParseId(last), ParseId(outcomes[i]->result.id)) << i;
    }
    last = outcomes[i]->result.id;
  }
  EXPECT_EQ(cluster_->Run(stream, {"XLEN", stream}).view().Integer(), kAppends);
  EXPECT_EQ(cluster_->MasterOfSlot(slot), 1);
  feed.reset();
  group.reset();
  links.reset();
}

TEST_F(LogClusterTest, GroupCommitFollowsTheSlotThroughAMigration) {
  AppendThroughAMigration(true);
}

TEST_F(LogClusterTest, PlainGroupsFollowTheSlotThroughAMigration) {
  AppendThroughAMigration(false);
}

// The same behind Sentinel: SENTINEL FAILOVER under a steady flow of appends. The lane's
// connection follows +switch-master to the new master (the old one still says master for a while):
// every append is answered once, with a receipt or a 503-class failure for a call the switch cut
// short, the receipts keep arrival order, and the appends after the switch land on the new master.
TEST(LogSentinelTest, GroupCommitFollowsTheMasterThroughAFailover) {
  if (testing::UnderSanitizer()) GTEST_SKIP() << "five redis-servers and a failover: plain stage";
  testing::SentinelSet set;
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  redis::TopologyOptions topology_options;
  topology_options.mode = config::RedisMode::kSentinel;
  topology_options.data = set.data(0).ClientOptions();
  topology_options.data.endpoint.port = 1;  // the url's host and port are not used under Sentinel
  topology_options.sentinel.master = "mymaster";
  for (int i = 0; i < set.sentinel_count(); ++i) {
    topology_options.sentinel.addresses.push_back(set.sentinel(i).address());
  }
  auto topology = std::make_shared<redis::Topology>(std::move(topology_options), nullptr);
  ASSERT_TRUE(topology->Resolve(SteadyClock::now() + seconds(20)).ok());
  topology->Start();
  redis::ConnectionOptions options = set.data(0).ClientOptions();
  options.topology = topology;

  auto loop = EventLoop::Create(SystemClock::Instance());
  ASSERT_TRUE(loop.ok());
  config::LogStream config;
  config.name = "feed";
  Producer producer(config, Millis(60000));
  auto links = std::make_unique<AppendLinks>(loop->get(), options);
  auto group = std::make_unique<AppendGroup>(&producer, links.get());
  constexpr int kAppends = 3000;
  std::vector<std::optional<AppendGroup::Outcome>> outcomes(kAppends + 1);
  std::atomic<int> answered{0};
  int queued = 0;
  auto append = [&](int at) {
    auto refused = group->Append(AppendRequest{.fields = {{"n", std::to_string(at)}},
                                               .idempotency_key = "k" + std::to_string(at)},
                                 [&, at](AppendGroup::Outcome outcome) {
                                   EXPECT_FALSE(outcomes[at].has_value()) << "answered twice";
                                   outcomes[at] = std::move(outcome);
                                   ++answered;
                                 });
    ASSERT_FALSE(refused.has_value()) << refused->status.ToString();
  };
  std::unique_ptr<EventLoop::Timer> feed;
  feed = (*loop)->CreateTimer([&] {
    for (int i = 0; i < 10 && queued < kAppends; ++i) append(queued++);
    if (queued < kAppends) feed->ArmIn(Millis(2));
  });
  feed->ArmIn(Millis(0));
  std::thread runner([&] { (*loop)->Run(); });
  ASSERT_TRUE(testing::Eventually([&] { return answered >= kAppends / 5; }, seconds(20)));
  const int new_master = set.Failover();
  const bool all = testing::Eventually([&] { return answered == kAppends; }, seconds(30));
  // One more, once the switch is known: it lands on the new master.
  if (all) {
    (*loop)->Post([&] { append(kAppends); });
    testing::Eventually([&] { return answered == kAppends + 1; }, seconds(10));
  }
  (*loop)->Stop();
  runner.join();
  ASSERT_TRUE(all) << answered << " of " << kAppends << " answered";
  std::string last;
  int ok = 0;
  for (int i = 0; i <= kAppends; ++i) {
    ASSERT_TRUE(outcomes[i].has_value()) << i;
    if (!outcomes[i]->status.ok()) {
      EXPECT_TRUE(outcomes[i]->status.code() == StatusCode::kIo ||
                  outcomes[i]->status.code() == StatusCode::kTimeout)
          << i << ": " << outcomes[i]->status.ToString();
      continue;
    }
    ++ok;
    if (!last.empty()) {
      EXPECT_LT(ParseId(last), ParseId(outcomes[i]->result.id)) << i;
    }
    last = outcomes[i]->result.id;
  }
  EXPECT_GT(ok, kAppends * 9 / 10);
  ASSERT_TRUE(outcomes[kAppends]->status.ok()) << outcomes[kAppends]->status.ToString();
  const redis::Reply on_new =
      set.data(new_master)
          .Run({"XRANGE", "feed", outcomes[kAppends]->result.id, outcomes[kAppends]->result.id});
  EXPECT_EQ(on_new.view().Size(), 1U) << "the last append is on the new master";
  feed.reset();
  group.reset();
  links.reset();
}

}  // namespace
}  // namespace streamcar::log

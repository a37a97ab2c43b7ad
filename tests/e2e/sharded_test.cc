// Sharded subscriptions (SPEC 9, SHARDING.md) with the real binary against a real redis-server:
// every entry of every shard is delivered, in order per key, with its shard and fence; members
// split the shards; a killed member's shards move to the survivor with higher fences, and nothing
// is lost or left pending.

#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/sharded_fixture.h"

namespace streamcar::testing {
namespace {

constexpr int kShards = 4;

class ShardedTest : public ShardedE2eTest {
 protected:
  ShardedTest() { shards_ = kShards; }
};

TEST_F(ShardedTest, OneMemberDeliversEveryShardInOrderWithShardAndFence) {
  auto sidecar = StartSidecar(Sharded("c1"));
  Produce(40, 8);
  ASSERT_TRUE(handler_.WaitForCount(40, std::chrono::seconds(20))) << sidecar->Logs();
  std::map<std::string, int> last_seq;
  for (const Delivery& d : Deliveries()) {
    EXPECT_EQ(d.shard, keys::ShardOf(d.key, kShards)) << d.key;
    EXPECT_GT(d.fence, 0);
    auto [it, first] = last_seq.emplace(d.key, d.seq);
    if (!first) {
      EXPECT_EQ(d.seq, it->second + 1) << "key " << d.key << " out of order";
      it->second = d.seq;
    }
  }
  EXPECT_EQ(last_seq.size(), 8u);
  // SPEC 3.1's headers come with every format, a shard's requests too (SPEC 9 adds two); each
  // shard's stream has ids of its own, so the Idempotency-Key names that stream.
  for (const ReceivedRequest& request : handler_.Requests()) {
    const std::string id = request.Header("streamcar-id");
    const std::string stream = ShardKeyOf(std::stoi(request.Header("streamcar-shard")));
    EXPECT_EQ(request.Header("streamcar-stream"), stream) << id;
    EXPECT_EQ(request.Header("streamcar-group"), "billing") << id;
    EXPECT_EQ(request.Header("streamcar-attempts"), "1") << id;
    EXPECT_EQ(request.Header("idempotency-key"), stream + "/" + id);
  }
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
}

// SHARDING.md B8: at batch_size 1 a shard has one request in flight at a time, though the
// subscription's handler has room for 16. Two things keep it so, each enough alone: a shard's
// loop gets a concurrency of 1 (sharding/shard_subscription.cc) and its ledger is one lane. The
// handler holds each shard's first request a while; no other request of that shard may arrive
// before it is answered.
TEST_F(ShardedTest, AShardHasOneRequestInFlightAtATime) {
  std::mutex mutex;
  std::map<int, int> in_flight;  // shard -> requests being answered now
  std::map<int, int> most;       // shard -> the most at once
  std::set<int> held;            // shards whose first request was held
  handler_.SetBehaviour([&](const ReceivedRequest& request) {
    const int shard = std::stoi(request.Header("streamcar-shard"));
    bool hold = false;
    {
      std::lock_guard lock(mutex);
      most[shard] = std::max(most[shard], ++in_flight[shard]);
      hold = held.insert(shard).second;
    }
    // Answered once this returns: holding here keeps the request in flight.
    if (hold) std::this_thread::sleep_for(milliseconds(500));
    std::lock_guard lock(mutex);
    --in_flight[shard];
    return HandlerReply{};
  });
  // Written before the member starts: every shard has its entries ready at once.
  const auto produced = Produce(40, 8);
  std::set<int> shards_used;
  for (const Produced& p : produced) shards_used.insert(p.shard);
  SidecarConfig c = Sharded("c1");
  c.handler_extra = "timeout: 2s";  // the hold is no timeout, even on a slow (sanitizer) build
  auto sidecar = StartSidecar(c);
  ASSERT_TRUE(handler_.WaitForCount(40, std::chrono::seconds(20))) << sidecar->Logs();
  std::lock_guard lock(mutex);
  for (int shard : shards_used) {
    EXPECT_EQ(most[shard], 1) << "shard " << shard << " had requests in flight at once";
  }
  EXPECT_EQ(held.size(), shards_used.size());
}

// SHARDING.md B8, SPEC 3.5: a shard is one lane, so an entry waiting for its retry holds back
// every later entry of its shard (at batch_size 1 too): the handler fails each shard's first
// request once, and sees nothing else of that shard before the retry, which it applies first.
TEST_F(ShardedTest, AnEntryWaitingForItsRetryHoldsBackTheRestOfItsShard) {
  std::mutex mutex;
  std::map<int, std::vector<std::string>> applied;    // shard -> ids answered 2xx, in order
  std::map<int, std::string> failed;                  // shard -> the id answered 500
  std::map<int, std::vector<std::string>> meanwhile;  // shard -> other ids sent before its retry
  handler_.SetBehaviour([&](const ReceivedRequest& request) {
    const int shard = std::stoi(request.Header("streamcar-shard"));
    const std::string id = request.Header("streamcar-id");
    std::lock_guard lock(mutex);
    auto [it, first] = failed.emplace(shard, id);
    if (first) return HandlerReply{500, "once"};
    const bool retried =
        std::find(applied[shard].begin(), applied[shard].end(), it->second) != applied[shard].end();
    if (id != it->second && !retried) meanwhile[shard].push_back(id);
    applied[shard].push_back(id);
    return HandlerReply{};
  });
  const auto produced = Produce(40, 8);
  std::map<int, std::vector<std::string>> ids_of_shard;
  for (const Produced& p : produced) ids_of_shard[p.shard].push_back(p.id);
  SidecarConfig c = Sharded("c1");
  c.initial_backoff = "300ms";  // long enough for a later entry to go first, were it let
  auto sidecar = StartSidecar(c);
  auto applied_count = [&] {
    std::lock_guard lock(mutex);
    size_t n = 0;
    for (const auto& [shard, ids] : applied) n += ids.size();
    return n;
  };
  ASSERT_TRUE(
      WaitUntil([&] { return applied_count() >= produced.size(); }, std::chrono::seconds(20)))
      << applied_count() << " of " << produced.size() << "\n"
      << sidecar->Logs();
  std::lock_guard lock(mutex);
  for (const auto& [shard, ids] : ids_of_shard) {
    EXPECT_EQ(failed[shard], ids.front()) << "shard " << shard;
    EXPECT_TRUE(meanwhile[shard].empty())
        << "shard " << shard << ": " << meanwhile[shard].size() << " sent before its retry";
    EXPECT_EQ(applied[shard], ids) << "shard " << shard << ": each entry once, in id order";
  }
}

// batch_size > 1 on a shard (docs/sharding.md, "Batches in a shard"): a request carries a run of
// the shard's consecutive entries, which the handler processes in order up to its first failure. A
// RETRY in the failures list acknowledges what came before it, retries that entry, and sends
// everything after it again, after the retry and without an attempt spent. A 500 for the whole
// request charges no entry: each is sent again alone, and only then do runs resume. A handler
// that processes in order then applies every entry once, in id order.
TEST_F(ShardedTest, ABatchIsARunOfTheShardsEntriesAndWhatFollowsAFailureComesAgainAfterIt) {
  const auto produced = Produce(60, 12);
  std::map<int, std::vector<std::string>> ids_of_shard;
  for (const Produced& p : produced) ids_of_shard[p.shard].push_back(p.id);
  ASSERT_GE(ids_of_shard[0].size(), 6u);
  ASSERT_GE(ids_of_shard[1].size(), 3u);
  const std::string fail_once = ids_of_shard[0][3];  // RETRY in the failures list, once

  std::mutex mutex;
  std::map<int, std::vector<std::string>> applied;  // per shard, in the order applied
  // "shard/id" (each shard's stream makes its own ids) -> the highest Streamcar attempts sent
  std::map<std::string, int> attempts_seen;
  auto key = [](int shard, const std::string& id) { return std::to_string(shard) + "/" + id; };
  std::vector<std::string> failed_run;                    // the request of shard 1 answered 500
  std::vector<std::vector<std::string>> shard1_requests;  // after the 500
  size_t largest_batch = 0;
  handler_.SetBehaviour([&](const ReceivedRequest& request) {
    rapidjson::Document body;
    body.Parse(request.body.c_str());
    HandlerReply reply;
    if (!body.IsObject() || !body.HasMember("entries")) return HandlerReply{400, "not a batch"};
    const int shard = body["shard"].GetInt();
    std::vector<std::string> ids;
    for (const auto& entry : body["entries"].GetArray()) ids.emplace_back(entry["id"].GetString());
    std::lock_guard lock(mutex);
    largest_batch = std::max(largest_batch, ids.size());
    if (shard == 1 && failed_run.empty() && ids.size() > 1) {
      failed_run = ids;
      return HandlerReply{500, "down for a moment"};
    }
    if (shard == 1 && !failed_run.empty()) shard1_requests.push_back(ids);
    for (const auto& entry : body["entries"].GetArray()) {
      const std::string id = entry["id"].GetString();
      int& attempts = attempts_seen[key(shard, id)];
      attempts = std::max(attempts, entry["attempts"].GetInt());
      if (shard == 0 && id == fail_once && entry["attempts"].GetInt() == 1) {
        reply.body = R"({"failures":[{"id":")" + id + R"(","status":"RETRY","error":"later"}]})";
        return reply;  // stops here: what follows is not processed
      }
      applied[shard].push_back(id);
    }
    return reply;
  });
  auto c = Sharded("c1");
  c.handler_extra += ", batch_size: 10";
  auto sidecar = StartSidecar(c);
  auto applied_count = [&] {
    std::lock_guard lock(mutex);
    size_t n = 0;
    for (const auto& [shard, ids] : applied) n += ids.size();
    return n;
  };
  ASSERT_TRUE(
      WaitUntil([&] { return applied_count() >= produced.size(); }, std::chrono::seconds(20)))
      << applied_count() << " of " << produced.size() << "\n"
      << sidecar->Logs();
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
  std::lock_guard lock(mutex);
  EXPECT_GT(largest_batch, 1u) << "a shard's entries went out one per request";
  for (const auto& [shard, ids] : ids_of_shard) {
    EXPECT_EQ(applied[shard], ids) << "shard " << shard << ": each entry once, in id order";
  }
  EXPECT_EQ(attempts_seen[key(0, fail_once)], 2);
  EXPECT_EQ(attempts_seen[key(0, ids_of_shard[0][4])], 1)
      << "sent again after the retry, not retried";
  EXPECT_EQ(attempts_seen[key(0, ids_of_shard[0][2])], 1) << "before the failure: acknowledged";
  // The 500: every entry of that run went again alone, in order, none charged with an attempt.
  ASSERT_GE(failed_run.size(), 2u);
  ASSERT_GE(shard1_requests.size(), failed_run.size());

  for (size_t i = 0; i < failed_run.size(); ++i) {
    EXPECT_EQ(shard1_requests[i], std::vector<std::string>{failed_run[i]}) << i;
    EXPECT_EQ(attempts_seen[key(1, failed_run[i])], 1) << failed_run[i];
  }
  EXPECT_EQ(DeadLettersOfShards(), 0);
}

TEST_F(ShardedTest, AKilledMembersShardsMoveToTheSurvivorAndNothingIsLost) {
  auto first = StartSidecar(Sharded("c1"));
  auto second = StartPeer(Sharded("c2"));
  Produce(40, 8);
  ASSERT_TRUE(handler_.WaitForCount(40, std::chrono::seconds(20)))
      << first->Logs() << second->Logs();
  first->Kill();
  Produce(40, 8, /*first_seq=*/5);
  // Every (key, seq) arrives; what the killed member had in flight may arrive twice
  // (at-least-once), so distinct deliveries are counted, not requests.
  auto distinct = [&] {
    std::set<std::pair<std::string, int>> seen;
    for (const Delivery& d : Deliveries()) seen.emplace(d.key, d.seq);
    return seen.size();
  };
  ASSERT_TRUE(WaitUntil([&] { return distinct() == 80; }, std::chrono::seconds(30)))
      << distinct() << " of 80\n"
      << second->Logs();
  // Every shard's fence is installed by the survivor now: the killed member's shards moved.
  auto holders = [&] {
    std::set<std::string> members;
    for (int shard = 0; shard < kShards; ++shard) {
      auto reply = redis_->Run(
          {"HGET", keys::FenceKey(keys::ShardKey("orders:{%d}", shard), "billing"), "member"});
      members.insert(reply.view().IsNil() ? "" : std::string(reply.view().Str()));
    }
    return members;
  };
  EXPECT_TRUE(WaitUntil([&] { return holders().size() == 1 && !holders().contains(""); },
                        std::chrono::seconds(20)));
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
}

// SIGTERM (B7 LEAVING): the member drains its shards and leaves the group (epoch -1) before it
// exits, so its shards move to the peer at once, well inside the session timeout (6 s).
TEST_F(ShardedTest, ASigtermedMemberLeavesAndItsShardsMoveAtOnce) {
  auto first = StartSidecar(Sharded("c1"));
  auto second = StartPeer(Sharded("c2"));
  const std::string members_key = keys::CoordinatorKeysFor("orders", "billing").members;
  ASSERT_TRUE(WaitUntil(
      [&] {
        return redis_->Run({"HLEN", members_key}).view().Integer() == 2;
      },
      std::chrono::seconds(10)));
  Produce(20, 4);
  ASSERT_TRUE(handler_.WaitForCount(20, std::chrono::seconds(20)));
  const auto stopped_at = std::chrono::steady_clock::now();
  first->Terminate();
  ASSERT_EQ(first->Wait(std::chrono::seconds(10)), 0) << first->Logs();
  EXPECT_EQ(redis_->Run({"HLEN", members_key}).view().Integer(), 1) << "it left the group";
  // The survivor installs every shard's fence without waiting out the session.
  auto survivor_holds_all = [&] {
    for (int shard = 0; shard < kShards; ++shard) {
      auto reply = redis_->Run(
          {"HGET", keys::FenceKey(keys::ShardKey("orders:{%d}", shard), "billing"), "member"});
      if (reply.view().IsNil()) return false;
      auto owner = redis_->Run(
          {"HGET", keys::CoordinatorKeysFor("orders", "billing").owner, std::to_string(shard)});
      if (owner.view().IsNil() || owner.view().Str() != reply.view().Str()) return false;
    }
    return redis_->Run({"HLEN", keys::CoordinatorKeysFor("orders", "billing").owner})
               .view()
               .Integer() == kShards;
  };
  ASSERT_TRUE(WaitUntil(survivor_holds_all, std::chrono::seconds(5)));
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, std::chrono::seconds(6))
      << "the shards waited for the session to expire";
  Produce(8, 4, /*first_seq=*/5);
  EXPECT_TRUE(handler_.WaitForCount(28, std::chrono::seconds(20))) << second->Logs();
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
}

// B4.1 INVALID_REQUEST: a member configured with another shard count than the group's is
// refused; it says why on /readyz (not ready), holds nothing, and the group goes on.
TEST_F(ShardedTest, AMemberWithAnotherShardCountIsNotReadyAndHoldsNothing) {
  auto first = StartSidecar(Sharded("c1"));
  ASSERT_TRUE(WaitReady());
  SidecarConfig other = Sharded("c2");
  other.subscription_extra =
      "    sharding: { shards: 8, session_timeout: 6s, heartbeat_interval: 500ms,"
      " rebalance_timeout: 8s, drain_timeout: 3s, initial_delay: 0s,"
      " min_assignment_interval: 0s }\n";
  auto second = StartPeer(other);
  std::string why;
  ASSERT_TRUE(Eventually(
      [&] {
        auto [code, body] = HttpGet(second->admin_port(), "/readyz");
        why = body;
        return code == 503 && body.find("refuses its configuration") != std::string::npos;
      },
      std::chrono::seconds(10)))
      << why << second->Logs();
  EXPECT_NE(second->Logs().find("coordinator refuses this member's configuration"),
            std::string::npos);
  const std::string members_key = keys::CoordinatorKeysFor("orders", "billing").members;
  EXPECT_EQ(redis_->Run({"HLEN", members_key}).view().Integer(), 1) << "never joined";
  Produce(8, 4);
  EXPECT_TRUE(handler_.WaitForCount(8, std::chrono::seconds(20)));
  for (const Delivery& d : Deliveries()) EXPECT_LT(d.shard, kShards);
  EXPECT_EQ(HttpGet(admin_port_, "/readyz").first, 200) << "the group's member is unaffected";
}

// SHARDING.md C1: each member's /metrics shows its state, its shards with the fences it holds
// (the tokens installed in Redis), the group's size and unowned shards, and each owned shard's
// lag and pending, exported by the owner alone.
TEST_F(ShardedTest, MetricsShowEachMembersShardsFencesAndTheGroup) {
  auto first = StartSidecar(Sharded("c1"));
  auto second = StartPeer(Sharded("c2"));
  const std::vector<int> ports = {admin_port_, second->admin_port()};
  const std::string sub = "subscription=\"orders/billing\"";
  auto owned_by = [&](int port) {
    return MetricValue(Metrics(port), "streamcar_shards_owned", {sub});
  };
  // Both members hold shards, every shard once: the group has settled.
  ASSERT_TRUE(Eventually(
      [&] {
        return owned_by(ports[0]) >= 1 && owned_by(ports[1]) >= 1 &&
               owned_by(ports[0]) + owned_by(ports[1]) == kShards;
      },
      std::chrono::seconds(20)))
      << first->Logs() << second->Logs();
  // The group figures come with each heartbeat's reply: one more round after the handover.
  ASSERT_TRUE(Eventually(
      [&] {
        for (int port : ports) {
          if (MetricValue(Metrics(port), "streamcar_group_unowned_shards", {sub}) != 0)
            return false;
        }
        return true;
      },
      std::chrono::seconds(10)));
  Produce(20, 4);
  ASSERT_TRUE(handler_.WaitForCount(20, std::chrono::seconds(20)));

  std::map<int, int> holders_of;  // shard -> members that say they hold it
  for (int port : ports) {
    const std::string text = Metrics(port);
    EXPECT_EQ(MetricValue(text, "streamcar_coord_member_state", {sub, "state=\"stable\""}), 1);
    EXPECT_EQ(MetricValue(text, "streamcar_coord_member_state", {sub, "state=\"lost\""}), 0);
    EXPECT_GE(MetricValue(text, "streamcar_coord_heartbeats_total", {sub, "status=\"OK\""}), 1);
    EXPECT_GT(MetricValue(text, "streamcar_coord_heartbeat_duration_seconds_count", {sub}), 0);
    EXPECT_GT(MetricValue(text, "streamcar_coord_lease_remaining_seconds", {sub}), 0);
    EXPECT_EQ(MetricValue(text, "streamcar_coord_member_epoch", {sub}),
              MetricValue(text, "streamcar_coord_assignment_epoch", {sub}));
    EXPECT_EQ(MetricValue(text, "streamcar_group_members", {sub}), 2);
    EXPECT_EQ(MetricValue(text, "streamcar_group_unowned_shards", {sub}), 0);
    EXPECT_EQ(MetricValue(text, "streamcar_fenced_ops_total", {sub, "op=\"ack\""}), 0);
    EXPECT_EQ(MetricValue(text, "streamcar_coord_fenced_total", {sub, "reason=\"local_lease\""}),
              0);
    EXPECT_GE(MetricValue(text, "streamcar_rebalances_total", {sub, "kind=\"grant\""}),
              MetricValue(text, "streamcar_shards_owned", {sub}));
    EXPECT_GE(MetricValue(text, "streamcar_takeover_duration_seconds_count", {sub}), 1);
    for (int shard = 0; shard < kShards; ++shard) {
      const std::string label = "shard=\"" + std::to_string(shard) + "\"";
      const bool owned = MetricValue(text, "streamcar_shard_owned", {sub, label}) == 1;
      // Lag and pending of a shard come from its owner only.
      EXPECT_EQ(MetricValue(text, "streamcar_shard_pending", {sub, label}) >= 0, owned)
          << "shard " << shard << " on port " << port;
      if (!owned) continue;
      ++holders_of[shard];
      auto installed = redis_->Run(
          {"HGET", keys::FenceKey(keys::ShardKey("orders:{%d}", shard), "billing"), "token"});
      EXPECT_EQ(MetricValue(text, "streamcar_shard_fence_token", {sub, label}),
                std::stod(std::string(installed.view().Str())))
          << "shard " << shard;
    }
  }
  for (int shard = 0; shard < kShards; ++shard) EXPECT_EQ(holders_of[shard], 1) << shard;
}

// An ACL user that may run EVALSHA but not what the heartbeat script runs (ZADD here): Redis 7
// answers "ERR The user executing the script can't ..." (no NOPERM prefix). No retry fixes it,
// so the member exits 1 naming it, as a plain subscription does for NOPERM.
TEST_F(ShardedTest, AnAclUserThatMayNotRunTheHeartbeatsCommandsExitsOneNamingIt) {
  redis_->Run({"ACL", "SETUSER", "member", "on", ">pw", "~*", "+@all", "-zadd"});
  SidecarConfig c = Sharded("c1");
  c.redis_url = "redis://member:pw@127.0.0.1:" + std::to_string(redis_->port());
  SidecarProcess sidecar(Yaml(c), {}, admin_port_);
  sidecar.ExpectExit(1);
  const auto code = sidecar.Wait(std::chrono::seconds(15));
  ASSERT_TRUE(code) << sidecar.Logs();
  EXPECT_EQ(*code, 1) << sidecar.Logs();
  EXPECT_NE(sidecar.Logs().find("the Redis ACL user may not run a command the coordinator's "
                                "heartbeat needs"),
            std::string::npos)
      << sidecar.Logs();
  EXPECT_NE(sidecar.Logs().find("can't run this command"), std::string::npos) << sidecar.Logs();
}

// SIGTERM while Redis is down: the leave cannot be told and the loops have nothing to settle
// with, so the member exits once they have ended, not at the shutdown deadline (10 s here).
TEST_F(ShardedTest, ASigtermWhileRedisIsDownExitsOnceTheLoopsHaveEnded) {
  auto sidecar = StartSidecar(Sharded("c1"));
  const std::string sub = "subscription=\"orders/billing\"";
  ASSERT_TRUE(Eventually(
      [&] { return MetricValue(Metrics(admin_port_), "streamcar_shards_owned", {sub}) == kShards; },
      std::chrono::seconds(20)))
      << sidecar->Logs();
  redis_->Kill();
  const auto sent = std::chrono::steady_clock::now();
  sidecar->Terminate();
  const auto code = sidecar->Wait(std::chrono::seconds(9));
  const auto took = std::chrono::steady_clock::now() - sent;
  ASSERT_TRUE(code) << "still running 9 s after SIGTERM\n" << sidecar->Logs();
  EXPECT_EQ(*code, 0) << sidecar->Logs();
  // The drop's settle floor (2 s) and a reconnect attempt, well inside the 10 s deadline.
  EXPECT_LT(took, std::chrono::seconds(6)) << sidecar->Logs();
}

// SHARDING.md C2: `status` reads the coordinator, each shard's fence and group, and the events.
TEST_F(ShardedTest, StatusShowsTheMemberItsShardsTheirFencesAndTheEvents) {
  auto sidecar = StartSidecar(Sharded("c1"));
  Produce(16, 8);
  ASSERT_TRUE(handler_.WaitForCount(16, std::chrono::seconds(20))) << sidecar->Logs();
  ASSERT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)));
  const std::string path = WriteConfig(Sharded("c1"));
  // The stream's last id per shard: what the owner's progress report must name once a
  // heartbeat (every 500 ms) has carried it.
  std::map<int, std::string> last_ids;
  for (int shard = 0; shard < kShards; ++shard) {
    auto last =
        redis_->Run({"XREVRANGE", keys::ShardKey("orders:{%d}", shard), "+", "-", "COUNT", "1"});
    if (last.view().Size() == 1) last_ids[shard] = std::string(last.view()[0][0].Str());
  }
  ASSERT_FALSE(last_ids.empty());

  rapidjson::Document doc;
  CommandResult json;
  const auto reported = [&] {
    json = RunStreamcar({"status", "-c", path, "--json"});
    doc.Parse(json.out.c_str());
    if (json.exit_code != 0 || !doc.IsObject()) return false;
    for (const auto& shard : doc["subscriptions"][0]["sharded"]["shard_list"].GetArray()) {
      if (shard["acked_ago_ms"].IsNull() != (last_ids.count(shard["shard"].GetInt()) == 0)) {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil(reported, std::chrono::seconds(5))) << json.err << json.out;
  const auto& sharded = doc["subscriptions"][0]["sharded"];
  EXPECT_EQ(sharded["shards"].GetInt(), kShards);
  EXPECT_TRUE(sharded["stable"].GetBool()) << json.out;
  ASSERT_EQ(sharded["members"].Size(), 1u) << json.out;
  const auto& member = sharded["members"][0];
  const std::string member_id = member["id"].GetString();
  EXPECT_EQ(member["assigned"].Size(), static_cast<rapidjson::SizeType>(kShards));
  EXPECT_EQ(member["epoch"].GetInt64(), sharded["assignment_epoch"].GetInt64());
  EXPECT_GT(member["session_left_ms"].GetInt64(), 0);
  EXPECT_EQ(std::string(member["pod"].GetString()), "c1");
  ASSERT_EQ(sharded["shard_list"].Size(), static_cast<rapidjson::SizeType>(kShards));
  for (const auto& shard : sharded["shard_list"].GetArray()) {
    const int index = shard["shard"].GetInt();
    const std::string key = keys::ShardKey("orders:{%d}", index);
    EXPECT_EQ(std::string(shard["key"].GetString()), key);
    EXPECT_EQ(std::string(shard["owner"].GetString()), member_id);
    EXPECT_EQ(std::string(shard["state"].GetString()), "active");
    EXPECT_EQ(std::string(shard["fence_member"].GetString()), member_id);
    auto installed = redis_->Run({"HGET", keys::FenceKey(key, "billing"), "token"});
    EXPECT_EQ(shard["fence"].GetInt64(), std::stoll(std::string(installed.view().Str())));
    EXPECT_EQ(shard["pending"].GetInt64(), 0);
    EXPECT_EQ(shard["lag"].GetInt64(), 0);
    // The owner's report: its highest acknowledged id, and when, on Redis's clock.
    EXPECT_EQ(std::string(shard["last_acked_id"].GetString()),
              last_ids.count(index) ? last_ids[index] : "")
        << json.out;
    if (last_ids.count(index)) {
      EXPECT_GE(shard["acked_ago_ms"].GetInt64(), 0) << json.out;
      EXPECT_LT(shard["acked_ago_ms"].GetInt64(), 20000) << json.out;
      EXPECT_LE(shard["reported_ago_ms"].GetInt64(), shard["acked_ago_ms"].GetInt64()) << json.out;
    }
  }
  EXPECT_EQ(sharded["unowned"].GetInt64(), 0);
  EXPECT_EQ(sharded["rebalances_last_hour"].GetInt64(), kShards) << "one grant per shard";
  EXPECT_EQ(member["waiting"].Size(), 0u);
  bool granted = false;
  bool target_named = false;  // C2: "assignment epoch N (member c0d1…9a joined)"
  for (const auto& event : sharded["events"].GetArray()) {
    const std::string type = event["type"].GetString();
    granted |= type == "grant";
    const std::string text = event["text"].GetString();
    target_named |= type == "target" && text.starts_with("assignment epoch ") &&
                    text.find(" (member ") != std::string::npos && text.ends_with(" joined)");
  }
  EXPECT_TRUE(granted) << json.out;
  EXPECT_TRUE(target_named) << json.out;

  EXPECT_EQ(sharded["fenced_ops_last_10m"].GetInt64(), 0);

  auto table = RunStreamcar({"status", "-c", path});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const std::string expected :
       {"sharded 4 shards  group epoch", "STABLE  members 1", "orders:{3}", "unowned: none",
        "fenced ops (10m): 0", "rebalances (1h): 4", " -> ", " joined)"}) {
    EXPECT_NE(table.out.find(expected), std::string::npos) << expected << "\n" << table.out;
  }
  // LAST ACK: an age for each shard that had entries, "-" for one that had none.
  for (int shard = 0; shard < kShards; ++shard) {
    const size_t row = table.out.find(keys::ShardKey("orders:{%d}", shard) + " ");
    ASSERT_NE(row, std::string::npos) << table.out;
    const std::string line = table.out.substr(row, table.out.find('\n', row) - row);
    EXPECT_EQ(line.find("s ago") != std::string::npos, last_ids.count(shard) == 1) << line;
  }
}

// Dead letters stay in each shard's own stream; `dlq list` reads them all and `dlq replay` puts
// each back onto its own shard.
TEST_F(ShardedTest, DeadLettersAreListedAndReplayedPerShard) {
  std::atomic<bool> reject{true};
  handler_.SetBehaviour([&](const ReceivedRequest& request) {
    const bool bad = request.body.find("\"bad") != std::string::npos;
    return HandlerReply{bad && reject ? 400 : 200};
  });
  auto sidecar = StartSidecar(Sharded("c1"));
  std::map<std::string, int> shard_of;
  for (int i = 0; i < 12; ++i) {
    const std::string key = (i % 2 == 0 ? "bad" : "good") + std::to_string(i);
    const int shard = keys::ShardOf(key, kShards);
    shard_of[key] = shard;
    redis_->Run({"XADD", keys::ShardKey("orders:{%d}", shard), "*", "key", key, "seq", "0"});
  }
  ASSERT_TRUE(WaitUntil([&] { return DeadLettersOfShards() == 6; }, std::chrono::seconds(20)))
      << DeadLettersOfShards() << "\n"
      << sidecar->Logs();
  const std::string path = WriteConfig(Sharded("c1"));
  auto list =
      RunStreamcar({"dlq", "list", "-c", path, "--subscription", "orders/billing", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  rapidjson::Document doc;
  doc.Parse(list.out.c_str());
  ASSERT_TRUE(doc.IsObject()) << list.out;
  EXPECT_EQ(std::string(doc["dead_letter_stream"].GetString()), "orders:{%d}:dlq");
  ASSERT_EQ(doc["dead_letters"].Size(), 6u) << list.out;
  for (const auto& letter : doc["dead_letters"].GetArray()) {
    const std::string key = letter["fields"]["key"].GetString();
    EXPECT_EQ(key.rfind("bad", 0), 0u) << key;
    EXPECT_EQ(std::string(letter["dead_letter_stream"].GetString()),
              keys::ShardDeadLetterKey(keys::ShardKey("orders:{%d}", shard_of[key])));
  }

  reject = false;
  const size_t before = handler_.Count();
  // One by --id: found in its shard's stream. Each shard's stream makes its own ids, so two
  // shards may hold the same one: then --id refuses rather than guess.
  std::map<std::string, int> id_count;
  for (const auto& letter : doc["dead_letters"].GetArray()) ++id_count[letter["id"].GetString()];
  const auto& first = doc["dead_letters"][0];
  const std::string first_id = first["id"].GetString();
  auto by_id = RunStreamcar(
      {"dlq", "replay", "-c", path, "--subscription", "orders/billing", "--id", first_id});
  int replayed_by_id = 0;
  if (id_count[first_id] == 1) {
    ASSERT_EQ(by_id.exit_code, 0) << by_id.err;
    EXPECT_NE(by_id.out.find("1 dead letters replayed"), std::string::npos) << by_id.out;
    replayed_by_id = 1;
    EXPECT_EQ(DeadLettersOfShards(), 5);
  } else {
    EXPECT_EQ(by_id.exit_code, 2) << by_id.out << by_id.err;
    EXPECT_NE(by_id.err.find("more than one shard"), std::string::npos) << by_id.err;
    EXPECT_EQ(DeadLettersOfShards(), 6) << "a refused --id replays nothing";
  }
  auto replay = RunStreamcar({"dlq", "replay", "-c", path, "--subscription", "orders/billing"});
  ASSERT_EQ(replay.exit_code, 0) << replay.err;
  EXPECT_NE(replay.out.find(std::to_string(6 - replayed_by_id) + " dead letters replayed"),
            std::string::npos)
      << replay.out;
  EXPECT_EQ(DeadLettersOfShards(), 0);
  ASSERT_TRUE(handler_.WaitForCount(before + 6, std::chrono::seconds(20))) << sidecar->Logs();
  // Each replayed entry came back on its own shard.
  int replayed = 0;
  for (const Delivery& d : Deliveries()) {
    if (d.key.rfind("bad", 0) != 0) continue;
    EXPECT_EQ(d.shard, shard_of[d.key]) << d.key;
    ++replayed;
  }
  EXPECT_EQ(replayed, 12);  // each bad entry twice: rejected, then replayed
}

// Each shard's dead-letter stream makes its own ids, so two shards can hold the same one: a
// replay by that id cannot tell which is meant, so it refuses (exit 2, naming both streams) and
// replays nothing. Deterministic: the same id is written to two shards' streams on purpose.
TEST_F(ShardedTest, ReplayByAnIdTwoShardsHoldIsRefusedAndReplaysNothing) {
  for (int shard : {0, 1}) {
    const std::string key = keys::ShardKey("orders:{%d}", shard);
    redis_->Run({"XADD",     keys::ShardDeadLetterKey(key),
                 "5-0",      "key",
                 "k",        "streamcar.stream",
                 key,        "streamcar.id",
                 "1-0",      "streamcar.group",
                 "billing",  "streamcar.attempts",
                 "1",        "streamcar.reason",
                 "rejected", "streamcar.status",
                 "400",      "streamcar.error",
                 "",         "streamcar.time",
                 "5"});
  }
  const std::string path = WriteConfig(Sharded("c1"));
  auto by_id = RunStreamcar(
      {"dlq", "replay", "-c", path, "--subscription", "orders/billing", "--id", "5-0"});
  EXPECT_EQ(by_id.exit_code, 2) << by_id.out << by_id.err;
  EXPECT_NE(by_id.err.find("more than one shard"), std::string::npos) << by_id.err;
  for (int shard : {0, 1}) {
    const std::string key = keys::ShardKey("orders:{%d}", shard);
    EXPECT_NE(by_id.err.find(keys::ShardDeadLetterKey(key)), std::string::npos) << by_id.err;
    EXPECT_EQ(redis_->Run({"XLEN", keys::ShardDeadLetterKey(key)}).view().Integer(), 1)
        << "the dead letter is kept";
    EXPECT_EQ(redis_->Run({"EXISTS", key}).view().Integer(), 0) << "nothing was replayed";
  }
}

// Redis forgets its scripts (SCRIPT FLUSH; a restart does the same): the heartbeat and every
// shard's fenced steps answer NOSCRIPT once, load their scripts again and go on. The member keeps
// its shards on their tokens (a failing heartbeat would let its lease run out and the shards be
// granted again with new ones) and delivers what comes next.
TEST_F(ShardedTest, ForgottenScriptsAreLoadedAgainAndTheMemberKeepsItsShards) {
  auto sidecar = StartSidecar(Sharded("c1"));
  Produce(8, 4);
  ASSERT_TRUE(handler_.WaitForCount(8, std::chrono::seconds(20))) << sidecar->Logs();
  // Every shard installed (a shard the entries missed may still be taking over once the others
  // have delivered): the tokens compared below are the grants' own, not a fence not yet there.
  ASSERT_TRUE(WaitUntil([&] { return Settled(1); }, std::chrono::seconds(20))) << sidecar->Logs();
  auto tokens = [&] {
    std::vector<std::string> out;
    for (int shard = 0; shard < kShards; ++shard) {
      auto reply = redis_->Run(
          {"HGET", keys::FenceKey(keys::ShardKey("orders:{%d}", shard), "billing"), "token"});
      out.emplace_back(reply.view().IsNil() ? "" : std::string(reply.view().Str()));
    }
    return out;
  };
  const auto before = tokens();
  const std::string sub = "subscription=\"orders/billing\"";
  auto accepted = [&] {
    return MetricValue(Metrics(admin_port_), "streamcar_coord_heartbeats_total",
                       {sub, "status=\"OK\""});
  };
  const double accepted_before = accepted();
  redis_->Run({"SCRIPT", "FLUSH"});
  Produce(8, 4, /*first_seq=*/2);
  EXPECT_TRUE(handler_.WaitForCount(16, std::chrono::seconds(20))) << sidecar->Logs();
  // Heartbeats every 500 ms: a session's worth (6 s) later the lease would long have run out.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  // Nothing but the member loads the heartbeat's script, and the flush dropped it: heartbeats
  // accepted since then mean it answered NOSCRIPT, loaded it and called it again.
  EXPECT_GE(accepted(), accepted_before + 6) << sidecar->Logs();
  EXPECT_EQ(tokens(), before) << "no shard was lost and granted again";
  EXPECT_TRUE(WaitUntil([&] { return PendingOfShards() == 0; }, std::chrono::seconds(5)))
      << PendingOfShards() << " pending\n"
      << sidecar->Logs();
}

// docs/sharding.md "ACL for sharded members": a member, `status` and the dlq commands run as a user
// with exactly the documented rules (the base rules of "Redis topologies" and the sharded ones,
// with the key patterns for stream orders and group billing). Redis checks the commands inside
// scripts against them too. Entries are delivered, retried and dead-lettered, and ACL LOG stays
// empty.
TEST_F(ShardedTest, AUserWithTheDocumentedAclRulesRunsAMemberStatusAndDlq) {
  const std::vector<std::string> base_rules = {
      "+@stream",        "+evalsha",        "+eval",           "+script|load",
      "+ping",           "+type",           "+client|setname", "+client|id",
      "+client|unblock", "+cluster|shards", "+cluster|slots",  "+cluster|keyslot",
      "+asking",         "+info",           "+role",           "+wait"};
  const std::vector<std::string> sharded_rules = {
      "+hget", "+hset",  "+hsetnx",  "+hdel",          "+hgetall", "+hkeys",     "+hvals",
      "+hlen", "+hmget", "+zadd",    "+zrangebyscore", "+zrem",    "+zrange",    "+del",
      "+time", "+watch", "+unwatch", "+multi",         "+exec",    "~orders:{*", "~sc:{orders:*"};
  std::vector<std::string> setuser = {"ACL",   "SETUSER", "sharded-app",
                                      "reset", "on",      ">Sharded-Acl-Pw-7e2"};
  setuser.insert(setuser.end(), base_rules.begin(), base_rules.end());
  setuser.insert(setuser.end(), sharded_rules.begin(), sharded_rules.end());
  redis_->Run(setuser);
  redis_->Run({"ACL", "LOG", "RESET"});
  std::atomic<int> calls{0};
  handler_.SetBehaviour([&](const ReceivedRequest& request) {
    if (request.body.find("\"bad") != std::string::npos) return HandlerReply{400};
    // Every tenth request fails once: a retry (a fenced XCLAIM) on some shard.
    return HandlerReply{++calls % 10 == 0 ? 503 : 200};
  });
  SidecarConfig config = Sharded("c1");
  config.redis_extra = "  username: sharded-app\n  password: Sharded-Acl-Pw-7e2\n";
  auto sidecar = StartSidecar(config);
  Produce(20, 4);
  for (int i = 0; i < 4; ++i) {
    const std::string key = "bad" + std::to_string(i);
    redis_->Run({"XADD", keys::ShardKey("orders:{%d}", keys::ShardOf(key, kShards)), "*", "key",
                 key, "seq", "0"});
  }
  ASSERT_TRUE(WaitUntil([&] { return DeadLettersOfShards() == 4 && PendingOfShards() == 0; },
                        std::chrono::seconds(20)))
      << sidecar->Logs();
  const std::string path = WriteConfig(config);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", "-c", path},
        std::vector<std::string>{"status", "-c", path, "--json"},
        std::vector<std::string>{"dlq", "list", "-c", path, "--subscription", "orders/billing"},
        std::vector<std::string>{"dlq", "replay", "-c", path, "--subscription",
                                 "orders/billing"}}) {
    auto run = RunStreamcar(args);
    EXPECT_EQ(run.exit_code, 0) << args[0] << ": " << run.err;
  }
  // The replayed entries are rejected again: dead letters once more, through the same rules.
  EXPECT_TRUE(WaitUntil([&] { return DeadLettersOfShards() == 4 && PendingOfShards() == 0; },
                        std::chrono::seconds(20)));
  EXPECT_GE(calls.load(), 20);
  // Leaving releases every shard (the coordinator's HDEL and HSETNX of freed shards).
  sidecar->Terminate();
  EXPECT_EQ(sidecar->Wait(std::chrono::seconds(10)), 0) << sidecar->Logs();
  EXPECT_EQ(
      redis_->Run({"HLEN", keys::CoordinatorKeysFor("orders", "billing").members}).view().Integer(),
      0)
      << "it left the group";
  EXPECT_EQ(redis_->Run({"ACL", "LOG"}).view().Size(), 0u) << sidecar->Logs();
}

}  // namespace
}  // namespace streamcar::testing

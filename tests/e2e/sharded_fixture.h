#pragma once
// Shared pieces of the sharded end-to-end tests (sharded_test.cc, sharded_fault_test.cc): a
// sharded subscription's config for the real binary, a producer that routes each key to its
// shard, the deliveries the handler saw (with shard and fence), and what Redis holds: each
// shard's pending count and installed fence, and the coordinator's state and audit events.

#include <rapidjson/document.h>

#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/keys/sharding_keys.h"
#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {

// A sharded subscription's timing (SHARDING.md B1). The fixture's redis.command_timeout is 2s, so
// the session must be at least three times that.
struct ShardingTiming {
  std::string session_timeout = "6s";
  std::string heartbeat_interval = "500ms";
  std::string rebalance_timeout = "8s";
  std::string drain_timeout = "3s";
  std::string initial_delay = "0s";
  std::string min_assignment_interval = "0s";
};

class ShardedE2eTest : public E2eTest {
 protected:
  // One event of the coordinator's audit stream (B2 `events`).
  struct CoordinatorEvent {
    std::string id;  // the stream id: Redis TIME ms of the step that wrote it
    std::string type;
    std::map<std::string, std::string> fields;
    std::string Field(const std::string& name) const {
      auto it = fields.find(name);
      return it == fields.end() ? "" : it->second;
    }
  };
  // One entry the test appended.
  struct Produced {
    std::string key;
    int seq = 0;
    int shard = -1;
    std::string id;
  };
  // One request the handler received.
  struct Delivery {
    std::string key;
    int seq = 0;
    int shard = -1;
    int64_t fence = 0;
    std::string id;
    int attempts = 0;  // Streamcar-Attempts: 2 and more is a retry
  };

  static bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  std::string ShardKeyOf(int shard) const { return keys::ShardKey("orders:{%d}", shard); }
  std::string FenceKeyOf(int shard) const { return keys::FenceKey(ShardKeyOf(shard), "billing"); }
  keys::CoordinatorKeys Coordinator() const {
    return keys::CoordinatorKeysFor("orders", "billing");
  }

  SidecarConfig Sharded(const std::string& consumer, const ShardingTiming& t = {}) const {
    SidecarConfig c;
    c.consumer = consumer;
    c.handler_extra = "timeout: 1s";
    c.subscription_extra = "    sharding: { shards: " + std::to_string(shards_) +
                           ", session_timeout: " + t.session_timeout +
                           ", heartbeat_interval: " + t.heartbeat_interval +
                           ", rebalance_timeout: " + t.rebalance_timeout +
                           ", drain_timeout: " + t.drain_timeout +
                           ", initial_delay: " + t.initial_delay +
                           ", min_assignment_interval: " + t.min_assignment_interval + " }\n";
    return c;
  }

  // Appends `count` entries spread over `keys` keys, each to its key's shard, with a sequence
  // number per key starting at `first_seq`; one connection, one pipeline.
  std::vector<Produced> Produce(int count, int keys, int first_seq = 0) {
    std::vector<Produced> out;
    std::vector<redis::Command> commands;
    for (int i = 0; i < count; ++i) {
      Produced p;
      p.key = "k" + std::to_string(i % keys);
      p.seq = first_seq + i / keys;
      p.shard = keys::ShardOf(p.key, shards_);
      redis::Command add("XADD");
      add.Arg(ShardKeyOf(p.shard))
          .Arg("*")
          .Arg("key")
          .Arg(p.key)
          .Arg("seq")
          .Arg(std::to_string(p.seq));
      commands.push_back(std::move(add));
      out.push_back(std::move(p));
    }
    auto connection = redis_->Connect();
    if (!connection) return {};
    auto replies = connection->RunPipeline(commands);
    if (!replies.ok()) {
      ADD_FAILURE() << "XADD failed: " << replies.status().message();
      return {};
    }
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_FALSE((*replies)[i].IsError()) << (*replies)[i].view().Str();
      out[i].id = std::string((*replies)[i].view().Str());
    }
    return out;
  }

  // Every request the handler received, in arrival order.
  std::vector<Delivery> Deliveries() {
    std::vector<Delivery> out;
    for (const ReceivedRequest& request : handler_.Requests()) {
      rapidjson::Document body;
      body.Parse(request.body.c_str());
      if (!body.IsObject() || !body.HasMember("payload")) continue;
      Delivery d;
      d.key = body["payload"]["key"].GetString();
      d.seq = std::stoi(body["payload"]["seq"].GetString());
      d.shard = std::stoi(request.Header("streamcar-shard"));
      d.fence = std::stoll(request.Header("streamcar-fence"));
      d.id = request.Header("streamcar-id");
      d.attempts = std::stoi(request.Header("streamcar-attempts"));
      EXPECT_EQ(body["shard"].GetInt(), d.shard);
      EXPECT_EQ(body["fence"].GetInt64(), d.fence);
      out.push_back(d);
    }
    return out;
  }
  // The distinct (shard, id) pairs delivered.
  std::set<std::pair<int, std::string>> DeliveredIds() {
    std::set<std::pair<int, std::string>> out;
    for (const Delivery& d : Deliveries()) out.emplace(d.shard, d.id);
    return out;
  }
  // The produced entries never delivered.
  std::vector<Produced> Undelivered(const std::vector<Produced>& produced) {
    const auto delivered = DeliveredIds();
    std::vector<Produced> out;
    for (const Produced& p : produced) {
      if (!delivered.contains({p.shard, p.id})) out.push_back(p);
    }
    return out;
  }

  // The pending entries of every shard's group; a shard without its group counts as one pending
  // entry, so a wait for 0 waits for every group to exist.
  int64_t PendingOfShards() {
    int64_t pending = 0;
    for (int shard = 0; shard < shards_; ++shard) {
      auto reply = redis_->RunAllowingError({"XPENDING", ShardKeyOf(shard), "billing"});
      pending += reply.view().IsArray() ? reply.view()[0].Integer() : 1;
    }
    return pending;
  }

  // Dead letters in every shard's own dead-letter stream.
  int64_t DeadLettersOfShards() {
    int64_t letters = 0;
    for (int shard = 0; shard < shards_; ++shard) {
      letters +=
          redis_->Run({"XLEN", keys::ShardDeadLetterKey(ShardKeyOf(shard))}).view().Integer();
    }
    return letters;
  }

  // shard -> the installed fence token (0 when none is installed).
  std::map<int, int64_t> InstalledFences() {
    std::map<int, int64_t> out;
    for (int shard = 0; shard < shards_; ++shard) {
      auto reply = redis_->Run({"HGET", FenceKeyOf(shard), "token"});
      out[shard] = reply.view().IsNil() ? 0 : std::stoll(std::string(reply.view().Str()));
    }
    return out;
  }
  // shard -> the member whose fence is installed ("" when none).
  std::map<int, std::string> FenceHolders() {
    std::map<int, std::string> out;
    for (int shard = 0; shard < shards_; ++shard) {
      auto reply = redis_->Run({"HGET", FenceKeyOf(shard), "member"});
      out[shard] = reply.view().IsNil() ? "" : std::string(reply.view().Str());
    }
    return out;
  }

  std::map<std::string, std::string> Hash(const std::string& key) {
    std::map<std::string, std::string> out;
    auto reply = redis_->Run({"HGETALL", key});
    for (size_t i = 0; i + 1 < reply.view().Size(); i += 2)
      out[std::string(reply.view()[i].Str())] = std::string(reply.view()[i + 1].Str());
    return out;
  }

  // The group has settled with `members` members: the target counts every one of them, every
  // shard is owned by its target member, whose fence is installed with the coordinator's token,
  // and no member is revoking or waiting.
  bool Settled(int members) {
    const keys::CoordinatorKeys keys = Coordinator();
    if (redis_->Run({"HLEN", keys.members}).view().Integer() != members) return false;
    const auto target = Hash(keys.target);
    const auto owner = Hash(keys.owner);
    const auto tokens = Hash(keys.tokens);
    const auto holders = FenceHolders();
    const auto fences = InstalledFences();
    for (int shard = 0; shard < shards_; ++shard) {
      const std::string s = std::to_string(shard);
      if (!owner.contains(s) || !target.contains(s) || owner.at(s) != target.at(s)) return false;
      if (holders.at(shard) != owner.at(s)) return false;
      if (!tokens.contains(s) || std::to_string(fences.at(shard)) != tokens.at(s)) return false;
    }
    std::set<std::string> targeted;
    for (const auto& [shard, member] : target) targeted.insert(member);
    for (const auto& [id, record] : Hash(keys.members)) {
      // A member the target has not counted yet (it joined after the last computation).
      if (members <= shards_ && !targeted.contains(id)) return false;
      rapidjson::Document doc;
      doc.Parse(record.c_str());
      if (!doc.IsObject() || std::string(doc["s"].GetString()) != "STABLE") return false;
    }
    return true;
  }

  // The coordinator's audit stream, oldest first.
  std::vector<CoordinatorEvent> CoordinatorEvents() {
    std::vector<CoordinatorEvent> out;
    auto reply = redis_->Run({"XRANGE", Coordinator().events, "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) {
      CoordinatorEvent event;
      event.id = reply.view()[i][0].Str();
      auto fields = reply.view()[i][1];
      for (size_t k = 0; k + 1 < fields.Size(); k += 2)
        event.fields[std::string(fields[k].Str())] = std::string(fields[k + 1].Str());
      event.type = event.Field("type");
      out.push_back(std::move(event));
    }
    return out;
  }
  // How many events of each type, among `events`.
  static std::map<std::string, int> CountByType(const std::vector<CoordinatorEvent>& events) {
    std::map<std::string, int> out;
    for (const auto& event : events) ++out[event.type];
    return out;
  }

  // The sum of every sample of `name` whose labels include all of `labels` (0 when none).
  static double MetricSum(const std::string& metrics_text, const std::string& name,
                          const std::vector<std::string>& labels = {}) {
    double sum = 0;
    std::istringstream lines(metrics_text);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.starts_with(name + "{") && !line.starts_with(name + " ")) continue;
      bool all = true;
      for (const auto& label : labels) all = all && line.find(label) != std::string::npos;
      if (all) sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }

  int shards_ = 4;
};

}  // namespace streamcar::testing

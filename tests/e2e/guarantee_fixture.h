#pragma once
// The fixture of the guarantee suite (tests/e2e/guarantee_test.cc): the real binary against the
// deployment of the test's parameter (tests/e2e/guarantee_topology.h), a stream of the test's own,
// and a handler that asks Redis about each entry while its request is open, so a test can hold
// the Streamcar-Attempts header against the XPENDING delivery count and owner of that moment.

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/e2e/guarantee_topology.h"
#include "tests/e2e/topology_e2e.h"

namespace streamcar::testing {

// One request the handler received, with the entry's pending-list row read during it.
struct Observed {
  std::string stream;  // the Streamcar-Stream header (a shard's stream when sharded)
  std::string id;
  int attempts = 0;             // the Streamcar-Attempts header
  int64_t fence = 0;            // the Streamcar-Fence header (sharded), else 0
  int64_t delivery_count = -1;  // XPENDING's count for the id, -1 when it was not pending
  std::string owner;            // XPENDING's consumer
  SteadyTime at;                // when the request arrived
};

class GuaranteeTest : public TopologyE2eTest, public ::testing::WithParamInterface<Topology> {
 protected:
  static void TearDownTestSuite() { GuaranteeTopology::Reset(); }

  void SetUp() override {
    topology_ = &GuaranteeTopology::Shared(GetParam());
    ASSERT_FALSE(HasFatalFailure()) << "the " << TopologyName(GetParam()) << " did not start";
    stream_ = topology_->NewStream("orders-");
    handler_.SetBehaviour([this](const ReceivedRequest& r) { return Answer(r); });
  }

  // How the handler answers; set before the first sidecar starts (default: 200).
  void Reply(std::function<HandlerReply(const ReceivedRequest&)> reply) {
    std::lock_guard lock(mutex_);
    reply_ = std::move(reply);
  }

  // One subscription to stream_, group billing, consumer `consumer`.
  TopologyConfig Config(const std::string& consumer, SubscriptionSpec spec = {}) const {
    spec.name = "orders";
    spec.stream = stream_;
    TopologyConfig config;
    config.consumer = consumer;
    config.redis = topology_->RedisYaml();
    config.subscriptions = {spec};
    return config;
  }
  // Starts a sidecar; `admin_port` 0: the fixture's.
  std::unique_ptr<SidecarProcess> Start(const TopologyConfig& config,
                                        const std::vector<std::string>& env = {},
                                        int admin_port = 0) {
    const int port = admin_port != 0 ? admin_port : admin_port_;
    return std::make_unique<SidecarProcess>(TopologyYaml(config, port), env, port);
  }

  std::string Add(const std::vector<std::string>& fields) {
    std::vector<std::string> args = {"XADD", stream_, "*"};
    args.insert(args.end(), fields.begin(), fields.end());
    return std::string(topology_->Run(stream_, args).view().Str());
  }
  // The group's pending count on `stream` (default: the test's); -1 for a missing group.
  int64_t Pending(const std::string& stream = "") {
    const std::string& key = stream.empty() ? stream_ : stream;
    const redis::Reply reply = topology_->Run(key, {"XPENDING", key, "billing"});
    if (reply.IsError() || !reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }
  int64_t Len(const std::string& key) {
    const redis::Reply reply = topology_->Run(key, {"XLEN", key});
    return reply.view().IsInteger() ? reply.view().Integer() : -1;
  }
  std::string Dlq() const { return topology_->DeadLetterStream(stream_); }

  // What the handler received for `id`, in arrival order.
  std::vector<Observed> For(const std::string& id) const {
    std::lock_guard lock(mutex_);
    std::vector<Observed> out;
    for (const auto& o : observed_) {
      if (o.id == id) out.push_back(o);
    }
    return out;
  }
  std::vector<Observed> All() const {
    std::lock_guard lock(mutex_);
    return observed_;
  }
  // Every request's header equals the delivery count Redis held for the entry during it.
  void ExpectAttemptsAreDeliveryCounts() const {
    for (const auto& o : All()) {
      EXPECT_EQ(o.attempts, o.delivery_count) << o.id << " (owner " << o.owner << ")";
    }
  }

  GuaranteeTopology* topology_ = nullptr;
  std::string stream_;

 private:
  HandlerReply Answer(const ReceivedRequest& request) {
    Observed o{.stream = request.Header("streamcar-stream"),
               .id = request.Header("streamcar-id"),
               .attempts = std::atoi(request.Header("streamcar-attempts").c_str()),
               .fence = std::atoll(request.Header("streamcar-fence").c_str()),
               .delivery_count = -1,
               .owner = "",
               .at = std::chrono::steady_clock::now()};
    // [[id, consumer, idle, count]]
    const redis::Reply row =
        topology_->Run(o.stream, {"XPENDING", o.stream, "billing", o.id, o.id, "1"});
    if (row.view().IsArray() && row.view().Size() == 1) {
      o.owner = std::string(row.view()[0][1].Str());
      o.delivery_count = row.view()[0][3].Integer();
    }
    std::function<HandlerReply(const ReceivedRequest&)> reply;
    {
      std::lock_guard lock(mutex_);
      observed_.push_back(o);
      reply = reply_;
    }
    return reply ? reply(request) : HandlerReply{};
  }

  mutable std::mutex mutex_;
  std::vector<Observed> observed_;
  std::function<HandlerReply(const ReceivedRequest&)> reply_;
};

}  // namespace streamcar::testing

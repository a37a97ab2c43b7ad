#pragma once
// Shared pieces of the end-to-end tests of Redis Cluster and Sentinel (SPEC 8): the real binary
// against a real cluster (tests/support/redis_cluster.h) or sentinel set
// (tests/support/redis_sentinel.h), a configuration with several subscriptions, a producer that
// writes steadily through failovers and migrations, what the handler saw per entry, readiness
// over time, and the stall of a fault.
//
// Nothing here uses the product's routing: the producer finds the master itself (CLUSTER SLOTS,
// or the sentinels), follows MOVED and ASK itself, and knows only ports.

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/redis/connection.h"
#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {

using SteadyTime = std::chrono::steady_clock::time_point;

// One subscription of a configuration with several.
struct SubscriptionSpec {
  std::string name;  // also the metrics' subscription label
  std::string stream;
  std::string group = "billing";
  std::string start = "beginning";
  std::string handler_extra;  // more handler flow items ("timeout: 10s, concurrency: 1")
  std::string extra;          // more subscription keys, each line indented 4 spaces
  int max_attempts = 4;
  std::string min_idle = "60s";
  std::string claim_interval = "10s";
};

// A whole configuration: `redis` is the body of the redis: block (each line indented 2 spaces,
// url included).
struct TopologyConfig {
  std::string consumer = "c1";
  std::string redis;
  std::vector<SubscriptionSpec> subscriptions;
};

// What the handler saw, per (stream, seq field) or per (stream, id): fed by the handler behaviour
// (Record), read by the test. Compact on purpose: a fault test delivers thousands of entries and
// polls often. Thread-safe.
class DeliveryLog {
 public:
  struct Delivery {
    std::string stream;
    std::string id;
    int attempts = 0;
    SteadyTime at;
  };
  // Records a handler request (headers Streamcar-Stream, -Id, -Attempts; the payload's "seq").
  void Record(const ReceivedRequest& request);

  // Every delivery of entry `id` of `stream`, in arrival order.
  std::vector<Delivery> For(const std::string& stream, const std::string& id) const;
  // The first delivery time of each seq of `stream`.
  std::map<int64_t, SteadyTime> FirstBySeq(const std::string& stream) const;
  // How many distinct seqs of `stream` were delivered.
  size_t DistinctSeqs(const std::string& stream) const;
  size_t Total() const;

 private:
  mutable std::mutex mutex_;
  std::vector<Delivery> deliveries_;
  std::map<std::string, std::map<int64_t, SteadyTime>> first_by_seq_;
};

// One entry the producer wrote (XADD answered with an id).
struct ProducedEntry {
  int64_t seq = 0;
  std::string id;
  int port = 0;            // the node that answered the XADD
  bool confirmed = false;  // WAIT 1 saw a replica take it (only asked on the confirm port)
  SteadyTime at;
};

// Writes `stream` every `period` (fields seq=<n>) from its own thread, wherever the stream lives
// now: `locate` names the port of the master to try (-1: none known yet), called at the start and
// after every failure. It follows MOVED (new home) and ASK (ASKING on the named node, once per
// command) itself, and waits out TRYAGAIN, CLUSTERDOWN, READONLY, LOADING and lost connections.
// A write whose connection failed is sent again with the same seq (it may exist twice: the seq,
// not the id, is what counts).
//
// Durability: a write on `confirm_port` (the node a fault will hit) is followed by WAIT 1 500 in
// the same pipeline, and counts as must-deliver only when a replica took it: asynchronous
// replication may lose the rest on kill -9, which is Redis's loss, not the sidecar's. A write on
// any other node is never lost by the test's fault, so it is must-deliver as soon as it is
// acknowledged. An unconfirmed write makes the producer locate the master again (a demoted master
// under Sentinel keeps accepting writes for a while).
class SteadyProducer {
 public:
  using Locate = std::function<int()>;
  SteadyProducer(std::string stream, redis::ConnectionOptions node_options, Locate locate,
                 int confirm_port, std::chrono::milliseconds period = std::chrono::milliseconds(5));
  ~SteadyProducer();
  SteadyProducer(const SteadyProducer&) = delete;
  SteadyProducer& operator=(const SteadyProducer&) = delete;

  void Stop();
  std::vector<ProducedEntry> Entries() const;
  size_t Count() const;
  // Writes acknowledged at or after `since`, on `port` (-1: any node).
  size_t CountSince(SteadyTime since, int port = -1) const;
  // The first write acknowledged at or after `since` by a node for which `on(port)` holds.
  std::optional<SteadyTime> FirstWriteSince(SteadyTime since,
                                            const std::function<bool(int)>& on) const;
  // The entries that must reach the handler (see above).
  std::vector<ProducedEntry> MustDeliver() const;
  // The last error the producer met, for failure messages.
  std::string LastError() const;

 private:
  void Run();
  redis::Connection* ConnectionTo(int port);

  const std::string stream_;
  const redis::ConnectionOptions node_options_;
  const Locate locate_;
  const int confirm_port_;
  const std::chrono::milliseconds period_;
  std::map<int, std::unique_ptr<redis::Connection>> connections_;  // producer thread only
  mutable std::mutex mutex_;
  std::vector<ProducedEntry> entries_;
  std::string last_error_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Locators for SteadyProducer: the master port of `slot` by CLUSTER SLOTS, asked of the first of
// `ports` that answers; the master the first answering sentinel names (GET-MASTER-ADDR-BY-NAME).
// -1 when nobody knows. `options` reach any node (the port is replaced).
SteadyProducer::Locate ClusterLocator(std::vector<int> ports, redis::ConnectionOptions options,
                                      int slot);
SteadyProducer::Locate SentinelLocator(std::vector<int> sentinel_ports, std::string password,
                                       std::string master);

// Polls /readyz every 50 ms from its own thread and remembers what it saw.
class ReadyzWatcher {
 public:
  explicit ReadyzWatcher(int admin_port);
  ~ReadyzWatcher();
  // Whether a not-ready answer (503) came at or after `since`.
  bool SawNotReadySince(SteadyTime since) const;
  int last() const { return last_.load(); }

 private:
  const int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> last_{0};
  mutable std::mutex mutex_;
  std::vector<SteadyTime> not_ready_;
  std::thread thread_;
};

// A fault's figures: the stall (the largest gap between consecutive first deliveries of the
// faulted stream inside [fault - 1 s, fault + 30 s]), the settle time (from the fault to the
// producer's first acknowledged write on the new owner), the largest produce-to-first-delivery
// latency of a must-deliver entry, and the counts.
struct FaultFigures {
  std::chrono::milliseconds stall{0};
  std::chrono::milliseconds settle{0};
  std::chrono::milliseconds max_latency{0};
  size_t produced = 0;
  size_t must_deliver = 0;
  size_t lost = 0;
  std::string first_lost;  // "seq <n> id <id>" of the first one, for messages
  // One JSON line for the test log (and docs/topologies.md).
  std::string Json(const std::string& test, const std::string& fault) const;
};
FaultFigures MeasureFault(const DeliveryLog& deliveries, const SteadyProducer& producer,
                          const std::string& stream, SteadyTime fault, SteadyTime settled);

// Polls `condition` every `interval` until it holds or `timeout` passes (Eventually with a pace
// for conditions that cost something).
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval = std::chrono::milliseconds(100));

// The base of the topology end-to-end tests: E2eTest without its standalone server, and a
// configuration writer for several subscriptions.
class TopologyE2eTest : public E2eTest {
 protected:
  TopologyE2eTest() { redis_.reset(); }

  // The YAML of `c`, with the admin server on `admin_port` (0: the fixture's).
  std::string TopologyYaml(const TopologyConfig& c, int admin_port = 0) const;
  std::unique_ptr<SidecarProcess> StartTopologySidecar(const TopologyConfig& c,
                                                       int admin_port = 0) {
    const int port = admin_port != 0 ? admin_port : admin_port_;
    return std::make_unique<SidecarProcess>(TopologyYaml(c, port), std::vector<std::string>{},
                                            port);
  }
  // The metric `name` with `labels` on the sidecar at `port` (0: the fixture's); -1 when absent.
  double MetricAt(int port, const std::string& name, const std::vector<std::string>& labels = {}) {
    return MetricValue(Metrics(port), name, labels);
  }
  // The lines of `logs` that contain every one of `needles`.
  static std::vector<std::string> LinesWith(const std::string& logs,
                                            const std::vector<std::string>& needles);

  void TearDown() override {
    if (producer_) producer_->Stop();
    // The handler's threads feed deliveries_ (a member of this class, destroyed before the base's
    // handler): stopped and joined here, none writes into it while or after it goes.
    handler_.Stop();
  }

  // The fault tests' steps around producer_ (the test starts it):
  // waits until the sidecar delivers the producer's entries of `stream` steadily (200 of them);
  void AwaitSteadyDelivery(const std::string& stream, SidecarProcess& sidecar);
  // after the fault: waits until the producer wrote on the new owner (a node for which
  // `settled_on(port)` holds), then for 300 more entries, and stops it; returns the settle
  // instant;
  SteadyTime SettleAndStop(SteadyTime fault, const std::function<bool(int)>& settled_on);
  // waits until every must-deliver entry was delivered and `pending()` (the group's pending
  // count on the stream's master now) is 0, logs the figures as a JSON line and asserts them:
  // nothing lost, nothing pending, enough written to mean something, and (with `stall_bound`)
  // stall <= settle + 3 s.
  FaultFigures Conclude(const std::string& stream, SteadyTime fault, SteadyTime settled,
                        const std::string& fault_name, const std::function<int64_t()>& pending,
                        SidecarProcess& sidecar, bool stall_bound = true);

  DeliveryLog deliveries_;
  std::unique_ptr<SteadyProducer> producer_;
};

}  // namespace streamcar::testing

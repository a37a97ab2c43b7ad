#include "tests/e2e/topology_e2e.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

namespace streamcar::testing {

namespace {

using std::chrono::duration_cast;

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The port of a redirection's endpoint: "MOVED 3999 127.0.0.1:6381" (host before the last ':').
int PortOfRedirect(std::string_view error) {
  const auto space = error.rfind(' ');
  const auto colon = error.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return -1;
  }
  return std::atoi(std::string(error.substr(colon + 1)).c_str());
}

// The value of `"<field>":"<digits>"` in a JSON body, or -1.
int64_t JsonDigits(const std::string& body, const std::string& field) {
  const std::string key = "\"" + field + "\":\"";
  const auto at = body.find(key);
  if (at == std::string::npos) return -1;
  const char* start = body.c_str() + at + key.size();
  char* end = nullptr;
  const long long value = std::strtoll(start, &end, 10);
  return end != start && *end == '"' ? value : -1;
}

}  // namespace

// --- DeliveryLog ---

void DeliveryLog::Record(const ReceivedRequest& request) {
  Delivery delivery{.stream = request.Header("streamcar-stream"),
                    .id = request.Header("streamcar-id"),
                    .attempts = std::atoi(request.Header("streamcar-attempts").c_str()),
                    .at = request.at};
  const int64_t seq = JsonDigits(request.body, "seq");
  std::lock_guard lock(mutex_);
  if (seq >= 0) first_by_seq_[delivery.stream].emplace(seq, delivery.at);
  deliveries_.push_back(std::move(delivery));
}

std::vector<DeliveryLog::Delivery> DeliveryLog::For(const std::string& stream,
                                                    const std::string& id) const {
  std::lock_guard lock(mutex_);
  std::vector<Delivery> out;
  for (const auto& d : deliveries_) {
    if (d.stream == stream && d.id == id) out.push_back(d);
  }
  return out;
}

std::map<int64_t, SteadyTime> DeliveryLog::FirstBySeq(const std::string& stream) const {
  std::lock_guard lock(mutex_);
  const auto found = first_by_seq_.find(stream);
  return found == first_by_seq_.end() ? std::map<int64_t, SteadyTime>{} : found->second;
}

size_t DeliveryLog::DistinctSeqs(const std::string& stream) const {
  std::lock_guard lock(mutex_);
  const auto found = first_by_seq_.find(stream);
  return found == first_by_seq_.end() ? 0 : found->second.size();
}

size_t DeliveryLog::Total() const {
  std::lock_guard lock(mutex_);
  return deliveries_.size();
}

// --- SteadyProducer ---

SteadyProducer::SteadyProducer(std::string stream, redis::ConnectionOptions node_options,
                               Locate locate, int confirm_port, std::chrono::milliseconds period)
    : stream_(std::move(stream)),
      node_options_(std::move(node_options)),
      locate_(std::move(locate)),
      confirm_port_(confirm_port),
      period_(period),
      thread_([this] { Run(); }) {}

SteadyProducer::~SteadyProducer() { Stop(); }

void SteadyProducer::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

redis::Connection* SteadyProducer::ConnectionTo(int port) {
  auto& connection = connections_[port];
  if (connection == nullptr) {
    redis::ConnectionOptions options = node_options_;
    options.endpoint.port = port;
    options.connect_timeout = Millis(500);
    options.command_timeout = Millis(2000);
    auto opened = redis::Connection::Open(options);
    if (!opened.ok()) {
      std::lock_guard lock(mutex_);
      last_error_ = "connect to " + std::to_string(port) + ": " + opened.status().ToString();
      return nullptr;
    }
    connection = std::move(*opened);
  }
  return connection.get();
}

void SteadyProducer::Run() {
  int64_t seq = 0;
  int home = -1;      // the master the stream lives on, as far as we know
  int ask_port = -1;  // set by an ASK: the next attempt goes there, with ASKING
  auto next = std::chrono::steady_clock::now();
  const auto pause = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    home = -1;
    ask_port = -1;
  };
  while (!stop_) {
    if (home < 0) home = locate_();
    if (home < 0) {
      pause();
      continue;
    }
    const int target = ask_port >= 0 ? ask_port : home;
    redis::Connection* connection = ConnectionTo(target);
    if (connection == nullptr) {
      connections_.erase(target);
      pause();
      continue;
    }
    std::vector<redis::Command> commands;
    const bool asking = ask_port >= 0;
    if (asking) commands.emplace_back("ASKING");
    commands.push_back(
        redis::Command("XADD").Arg(stream_).Arg("*").Arg("seq").Arg(std::to_string(seq)));
    const bool confirm = target == confirm_port_;
    if (confirm) commands.push_back(redis::Command("WAIT").Arg(int64_t{1}).Arg(int64_t{500}));
    auto replies = connection->RunPipeline(commands);
    ask_port = -1;
    if (!replies.ok()) {
      {
        std::lock_guard lock(mutex_);
        last_error_ = "port " + std::to_string(target) + ": " + replies.status().ToString();
      }
      connections_.erase(target);
      pause();
      continue;
    }
    const redis::Reply& added = (*replies)[asking ? 1 : 0];
    if (added.IsError()) {
      const std::string error(added.view().Str());
      {
        std::lock_guard lock(mutex_);
        last_error_ = "port " + std::to_string(target) + ": " + error;
      }
      if (StartsWith(error, "MOVED ")) {
        home = PortOfRedirect(error);
      } else if (StartsWith(error, "ASK ")) {
        ask_port = PortOfRedirect(error);
      } else {  // TRYAGAIN, CLUSTERDOWN, READONLY, LOADING, MASTERDOWN...: wait, locate again
        pause();
      }
      continue;
    }
    ProducedEntry entry{.seq = seq,
                        .id = std::string(added.view().Str()),
                        .port = target,
                        .confirmed = false,
                        .at = std::chrono::steady_clock::now()};
    if (confirm) {
      const redis::Reply& waited = replies->back();
      entry.confirmed = waited.view().IsInteger() && waited.view().Integer() >= 1;
    }
    const bool unconfirmed = confirm && !entry.confirmed;
    {
      std::lock_guard lock(mutex_);
      entries_.push_back(std::move(entry));
    }
    ++seq;
    if (unconfirmed) home = -1;  // a master on its own (demoted, or its replica gone): look again
    next = std::max(next + period_, std::chrono::steady_clock::now());
    std::this_thread::sleep_until(next);
  }
}

std::vector<ProducedEntry> SteadyProducer::Entries() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

size_t SteadyProducer::Count() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

size_t SteadyProducer::CountSince(SteadyTime since, int port) const {
  std::lock_guard lock(mutex_);
  return std::count_if(entries_.begin(), entries_.end(), [&](const ProducedEntry& e) {
    return e.at >= since && (port < 0 || e.port == port);
  });
}

std::optional<SteadyTime> SteadyProducer::FirstWriteSince(
    SteadyTime since, const std::function<bool(int)>& on) const {
  std::lock_guard lock(mutex_);
  for (const auto& e : entries_) {
    if (e.at >= since && on(e.port)) return e.at;
  }
  return std::nullopt;
}

std::vector<ProducedEntry> SteadyProducer::MustDeliver() const {
  std::lock_guard lock(mutex_);
  std::vector<ProducedEntry> out;
  for (const auto& e : entries_) {
    if (e.port != confirm_port_ || e.confirmed) out.push_back(e);
  }
  return out;
}

std::string SteadyProducer::LastError() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

// --- locators ---

namespace {

// One command on a fresh connection to `port`; nullopt when it cannot be reached or fails.
std::optional<redis::Reply> AskOnce(redis::ConnectionOptions options, int port,
                                    const redis::Command& command) {
  options.endpoint.port = port;
  options.connect_timeout = Millis(300);
  options.command_timeout = Millis(1000);
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) return std::nullopt;
  auto reply = (*connection)->RunPipeline({command});
  if (!reply.ok() || reply->front().IsError()) return std::nullopt;
  return std::move(reply->front());
}

}  // namespace

SteadyProducer::Locate ClusterLocator(std::vector<int> ports, redis::ConnectionOptions options,
                                      int slot) {
  return [ports = std::move(ports), options = std::move(options), slot] {
    for (int port : ports) {
      const auto slots = AskOnce(options, port, redis::Command("CLUSTER").Arg("SLOTS"));
      if (!slots) continue;
      // [[first, last, [ip, port, id], replicas...], ...]
      for (size_t i = 0; i < slots->view().Size(); ++i) {
        const auto range = slots->view()[i];
        if (range.Size() < 3 || range[0].Integer() > slot || range[1].Integer() < slot) continue;
        return static_cast<int>(range[2][1].Integer());
      }
    }
    return -1;
  };
}

SteadyProducer::Locate SentinelLocator(std::vector<int> sentinel_ports, std::string password,
                                       std::string master) {
  redis::ConnectionOptions options;
  options.endpoint.host = "127.0.0.1";
  options.password = std::move(password);
  return [ports = std::move(sentinel_ports), options, master = std::move(master)] {
    for (int port : ports) {
      const auto address = AskOnce(
          options, port, redis::Command("SENTINEL").Arg("GET-MASTER-ADDR-BY-NAME").Arg(master));
      if (!address || address->view().Size() != 2) continue;
      return std::atoi(std::string(address->view()[1].Str()).c_str());
    }
    return -1;
  };
}

// --- ReadyzWatcher ---

ReadyzWatcher::ReadyzWatcher(int admin_port)
    : port_(admin_port), thread_([this] {
        while (!stop_) {
          const int status = HttpGet(port_, "/readyz").first;
          last_ = status;
          if (status == 503) {
            std::lock_guard lock(mutex_);
            not_ready_.push_back(std::chrono::steady_clock::now());
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }) {}

ReadyzWatcher::~ReadyzWatcher() {
  stop_ = true;
  thread_.join();
}

bool ReadyzWatcher::SawNotReadySince(SteadyTime since) const {
  std::lock_guard lock(mutex_);
  return std::any_of(not_ready_.begin(), not_ready_.end(),
                     [&](SteadyTime at) { return at >= since; });
}

// --- figures ---

std::string FaultFigures::Json(const std::string& test, const std::string& fault) const {
  std::ostringstream out;
  out << "{\"test\":\"" << test << "\",\"fault\":\"" << fault << "\",\"stall_ms\":" << stall.count()
      << ",\"settle_ms\":" << settle.count() << ",\"max_latency_ms\":" << max_latency.count()
      << ",\"produced\":" << produced << ",\"must_deliver\":" << must_deliver
      << ",\"lost\":" << lost << "}";
  return out.str();
}

FaultFigures MeasureFault(const DeliveryLog& deliveries, const SteadyProducer& producer,
                          const std::string& stream, SteadyTime fault, SteadyTime settled) {
  FaultFigures figures;
  const auto first = deliveries.FirstBySeq(stream);
  const auto must = producer.MustDeliver();
  figures.produced = producer.Count();
  figures.must_deliver = must.size();
  figures.settle = duration_cast<std::chrono::milliseconds>(settled - fault);
  for (const auto& e : must) {
    const auto delivered = first.find(e.seq);
    if (delivered == first.end()) {
      if (figures.lost++ == 0) {
        figures.first_lost =
            "seq " + std::to_string(e.seq) + " id " + e.id + " on port " + std::to_string(e.port);
      }
      continue;
    }
    figures.max_latency = std::max(
        figures.max_latency, duration_cast<std::chrono::milliseconds>(delivered->second - e.at));
  }
  std::vector<SteadyTime> times;
  for (const auto& [seq, at] : first) {
    if (at >= fault - std::chrono::seconds(1) && at <= fault + std::chrono::seconds(30)) {
      times.push_back(at);
    }
  }
  std::sort(times.begin(), times.end());
  for (size_t i = 1; i < times.size(); ++i) {
    figures.stall =
        std::max(figures.stall, duration_cast<std::chrono::milliseconds>(times[i] - times[i - 1]));
  }
  return figures;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(interval);
  }
  return condition();
}

// --- TopologyE2eTest ---

std::string TopologyE2eTest::TopologyYaml(const TopologyConfig& c, int admin_port) const {
  std::string yaml = "version: 1\nredis:\n" + c.redis + "consumer:\n  name: " + c.consumer +
                     "\nadmin:\n  listen: 127.0.0.1:" +
                     std::to_string(admin_port != 0 ? admin_port : admin_port_) +
                     "\nshutdown:\n  drain_timeout: 10s\nsubscriptions:\n";
  for (const auto& s : c.subscriptions) {
    yaml += "  - stream: \"" + s.stream + "\"\n    group: " + s.group + "\n    start: " + s.start +
            "\n    name: \"" + s.name + "\"\n    handler: { url: \"" + handler_.url("/") + "\"" +
            (s.handler_extra.empty() ? "" : ", " + s.handler_extra) +
            " }\n    retry: { max_attempts: " + std::to_string(s.max_attempts) +
            ", initial_backoff: 50ms, max_backoff: 1s, jitter: 0 }\n" +
            "    claim: { min_idle: " + s.min_idle + ", interval: " + s.claim_interval + " }\n" +
            s.extra;
  }
  return yaml;
}

void TopologyE2eTest::AwaitSteadyDelivery(const std::string& stream, SidecarProcess& sidecar) {
  ASSERT_TRUE(
      WaitUntil([&] { return deliveries_.DistinctSeqs(stream) >= 200; }, std::chrono::seconds(20)))
      << "producer: " << producer_->Count() << " written, last error " << producer_->LastError()
      << "\n"
      << sidecar.Logs();
}

SteadyTime TopologyE2eTest::SettleAndStop(SteadyTime fault,
                                          const std::function<bool(int)>& settled_on) {
  std::optional<SteadyTime> settled;
  EXPECT_TRUE(WaitUntil(
      [&] {
        settled = producer_->FirstWriteSince(fault, settled_on);
        return settled.has_value();
      },
      std::chrono::seconds(30)))
      << "the test's own client never wrote on the new owner; last error "
      << producer_->LastError();
  if (!settled) settled = std::chrono::steady_clock::now();
  EXPECT_TRUE(
      WaitUntil([&] { return producer_->CountSince(*settled) >= 300; }, std::chrono::seconds(20)))
      << producer_->LastError();
  producer_->Stop();
  return *settled;
}

FaultFigures TopologyE2eTest::Conclude(const std::string& stream, SteadyTime fault,
                                       SteadyTime settled, const std::string& fault_name,
                                       const std::function<int64_t()>& pending,
                                       SidecarProcess& sidecar, bool stall_bound) {
  const auto must = producer_->MustDeliver();
  const bool all = WaitUntil(
      [&] {
        const auto first = deliveries_.FirstBySeq(stream);
        for (const auto& e : must) {
          if (!first.count(e.seq)) return false;
        }
        return true;
      },
      std::chrono::seconds(30));
  const bool drained = WaitUntil([&] { return pending() == 0; }, std::chrono::seconds(30));
  const FaultFigures figures = MeasureFault(deliveries_, *producer_, stream, fault, settled);
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string json =
      figures.Json(std::string(info->test_suite_name()) + "." + info->name(), fault_name);
  std::cout << json << std::endl;
  RecordProperty("figures", json);
  EXPECT_TRUE(all) << figures.lost << " of " << figures.must_deliver
                   << " confirmed entries never delivered; first: " << figures.first_lost << "\n"
                   << sidecar.Logs();
  EXPECT_EQ(figures.lost, 0u);
  EXPECT_TRUE(drained) << "pending: " << pending() << "\n" << sidecar.Logs();
  EXPECT_GE(figures.must_deliver, 400u) << "the producer wrote too little to prove anything";
  if (stall_bound) {
    EXPECT_LE(figures.stall, figures.settle + std::chrono::seconds(3)) << json;
  }
  return figures;
}

std::vector<std::string> TopologyE2eTest::LinesWith(const std::string& logs,
                                                    const std::vector<std::string>& needles) {
  std::vector<std::string> out;
  std::istringstream lines(logs);
  for (std::string line; std::getline(lines, line);) {
    bool all = true;
    for (const auto& needle : needles) all = all && line.find(needle) != std::string::npos;
    if (all) out.push_back(line);
  }
  return out;
}

}  // namespace streamcar::testing

#include "tests/support/redis_sentinel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

namespace streamcar::testing {

namespace {

// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// One command on a fresh connection; nullopt when the server cannot be reached.
std::optional<redis::Reply> TryRun(const RedisServer& server,
                                   const std::vector<std::string>& args) {
  if (!server.running()) return std::nullopt;
  redis::ConnectionOptions options = server.ClientOptions();
  options.connect_timeout = Millis(1000);
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) return std::nullopt;
  redis::Command command(args.front());
  for (size_t i = 1; i < args.size(); ++i) command.Arg(args[i]);
  auto replies = (*connection)->RunPipeline({command});
  if (!replies.ok()) return std::nullopt;
  return std::move(replies->front());
}

// The port of a GET-MASTER-ADDR-BY-NAME reply (["127.0.0.1", "6379"]), or -1.
int PortOf(const std::optional<redis::Reply>& reply) {
  if (!reply || reply->IsError() || reply->view().Size() != 2) return -1;
  return std::atoi(std::string((*reply)[1].Str()).c_str());
}

}  // namespace

SentinelSet::SentinelSet(SentinelSetOptions options) : options_(std::move(options)) { Start(); }

void SentinelSet::Start() {
  conf_dir_ = MakeTempDir("streamcar-sentinel-conf-");
  // A demoted master must authenticate to its successor: every data node has masterauth.
  std::vector<std::string> data_extra = {"--repl-diskless-sync-delay", "0"};
  if (!options_.data_password.empty()) {
    data_extra.insert(data_extra.end(), {"--masterauth", options_.data_password});
  }
  data_.push_back(std::make_unique<RedisServer>(
      RedisServerOptions{.password = options_.data_password, .extra = data_extra}));
  if (::testing::Test::HasFatalFailure()) return;
  for (int i = 0; i < options_.replicas; ++i) {
    data_.push_back(
        std::make_unique<RedisServer>(RedisServerOptions{.password = options_.data_password,
                                                         .extra = data_extra,
                                                         .replica_of = data_[0]->address()}));
    if (::testing::Test::HasFatalFailure()) return;
  }
  const int quorum = options_.sentinels / 2 + 1;
  for (int i = 0; i < options_.sentinels; ++i) {
    const std::string conf = conf_dir_ + "/sentinel-" + std::to_string(i) + ".conf";
    std::ofstream out(conf);
    const std::string& name = options_.master_name;
    out << "sentinel monitor " << name << " 127.0.0.1 " << data_[0]->port() << " " << quorum << "\n"
        << "sentinel down-after-milliseconds " << name << " " << options_.down_after_ms << "\n"
        << "sentinel failover-timeout " << name << " " << options_.failover_timeout_ms << "\n";
    if (!options_.data_password.empty()) {
      out << "sentinel auth-pass " << name << " " << options_.data_password << "\n";
    }
    if (!options_.sentinel_password.empty()) {
      // Sentinels reach each other with the password they all require.
      out << "sentinel sentinel-pass " << options_.sentinel_password << "\n";
    }
    out.close();
    sentinels_.push_back(std::make_unique<RedisServer>(RedisServerOptions{
        .password = options_.sentinel_password, .config_file = conf, .sentinel = true}));
    if (::testing::Test::HasFatalFailure()) return;
  }

  std::string why;
  const bool ready = WaitFor(
      [&] {
        for (int r = 1; r < data_count(); ++r) {
          auto info = TryRun(*data_[r], {"INFO", "replication"});
          if (!info || info->view().Str().find("master_link_status:up") == std::string::npos) {
            why = "replica " + std::to_string(r) + " is not in sync";
            return false;
          }
        }
        for (int s = 0; s < sentinel_count(); ++s) {
          auto quorum_ok = TryRun(*sentinels_[s], {"SENTINEL", "CKQUORUM", options_.master_name});
          if (!quorum_ok || quorum_ok->IsError()) {
            why = "sentinel " + std::to_string(s) + ": " +
                  (quorum_ok ? std::string(quorum_ok->view().Str()) : "no answer");
            return false;
          }
          auto peers = TryRun(*sentinels_[s], {"SENTINEL", "SENTINELS", options_.master_name});
          if (!peers || peers->view().Size() != static_cast<size_t>(sentinel_count() - 1)) {
            why = "sentinel " + std::to_string(s) + " does not see every other sentinel";
            return false;
          }
          auto replicas = TryRun(*sentinels_[s], {"SENTINEL", "REPLICAS", options_.master_name});
          if (!replicas || replicas->view().Size() != static_cast<size_t>(options_.replicas)) {
            why = "sentinel " + std::to_string(s) + " does not see every replica";
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(30));
  ASSERT_TRUE(ready) << "the sentinel set did not settle: " << why;
}

SentinelSet::~SentinelSet() {
  sentinels_.clear();  // first, so that no failover starts while the data nodes go
  data_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(conf_dir_, ignored);
}

redis::Reply SentinelSet::RunOnSentinel(int i, const std::vector<std::string>& args) const {
  auto reply = TryRun(*sentinels_[i], args);
  if (!reply) {
    ADD_FAILURE() << "sentinel " << i << " did not answer " << args.front();
    return {};
  }
  return std::move(*reply);
}

int SentinelSet::MasterPort() const {
  for (const auto& sentinel : sentinels_) {
    const int port =
        PortOf(TryRun(*sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name}));
    if (port > 0) return port;
  }
  return -1;
}

int SentinelSet::MasterIndex() const {
  const int port = MasterPort();
  for (int i = 0; i < data_count(); ++i) {
    if (data_[i]->port() == port) return i;
  }
  return -1;
}

std::string SentinelSet::AddressesYaml() const {
  std::string yaml = "[";
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    yaml += (i > 0 ? ", \"" : "\"") + sentinels_[i]->address() + "\"";
  }
  return yaml + "]";
}

int SentinelSet::WaitForNewMaster(int old_master, int seconds) {
  int now = -1;
  const bool switched = WaitFor(
      [&] {
        for (const auto& sentinel : sentinels_) {
          const int port = PortOf(
              TryRun(*sentinel, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name}));
          if (port < 0 || port == data_[old_master]->port()) return false;
          now = -1;
          for (int i = 0; i < data_count(); ++i) {
            if (data_[i]->port() == port) now = i;
          }
        }
        if (now < 0) return false;
        auto role = TryRun(*data_[now], {"ROLE"});
        return role && !role->IsError() && (*role)[0].Str() == "master";
      },
      std::chrono::seconds(seconds));
  EXPECT_TRUE(switched) << "the sentinels did not all switch away from data node " << old_master
                        << " within " << seconds << " s";
  return switched ? now : -1;
}

int SentinelSet::Failover() {
  const int old_master = MasterIndex();
  const auto reply = RunOnSentinel(0, {"SENTINEL", "FAILOVER", options_.master_name});
  EXPECT_FALSE(reply.IsError()) << reply.view().Str();
  return WaitForNewMaster(old_master);
}

int SentinelSet::KillMaster() {
  const int old_master = MasterIndex();
  if (old_master < 0) {
    ADD_FAILURE() << "no sentinel knows the master";
    return -1;
  }
  data_[old_master]->Kill();
  return WaitForNewMaster(old_master);
}

}  // namespace streamcar::testing

#include "tests/support/redis_cluster.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

namespace streamcar::testing {

namespace {

constexpr int kSlots = 16384;

// Polls `condition` every 50 ms (each poll opens connections to several nodes) until it holds or
// `timeout` passes.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// A reply to one command on a fresh connection to `server`; nullopt when the server cannot be
// reached or the connection fails (a node being killed, restarted or demoted).
std::optional<redis::Reply> TryRun(const RedisServer& server, const std::vector<std::string>& args,
                                   bool asking) {
  if (!server.running()) return std::nullopt;
  redis::ConnectionOptions options = server.ClientOptions();
  options.connect_timeout = Millis(1000);
  options.command_timeout = Millis(5000);
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) return std::nullopt;
  std::vector<redis::Command> commands;
  if (asking) commands.emplace_back("ASKING");
  redis::Command command(args.front());
  for (size_t i = 1; i < args.size(); ++i) command.Arg(args[i]);
  commands.push_back(std::move(command));
  auto replies = (*connection)->RunPipeline(commands);
  if (!replies.ok()) return std::nullopt;
  return std::move(replies->back());
}

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// The client port of a CLUSTER NODES address, "127.0.0.1:7000@17000[,hostname]".
int PortOfNodeAddress(std::string_view address) {
  const auto at = address.find('@');
  const auto colon = address.substr(0, at).rfind(':');
  if (colon == std::string_view::npos) return -1;
  return std::atoi(std::string(address.substr(colon + 1, at - colon - 1)).c_str());
}

// The port of a redirection's endpoint: "MOVED 3999 127.0.0.1:6381" (the host is everything
// before the last ':').
int PortOfRedirect(std::string_view error) {
  const auto words = Words(error);
  if (words.size() < 3) return -1;
  const auto colon = words[2].rfind(':');
  return colon == std::string::npos ? -1 : std::atoi(words[2].c_str() + colon + 1);
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

}  // namespace

RedisCluster::RedisCluster(RedisClusterOptions options) : options_(std::move(options)) { Form(); }

RedisCluster::~RedisCluster() {
  nodes_.clear();
  std::error_code ignored;
  if (!certificates_dir_.empty()) std::filesystem::remove_all(certificates_dir_, ignored);
}

void RedisCluster::Form() {
  if (options_.tls) {
    certificates_dir_ = MakeTempDir("streamcar-cluster-certs-");
    certificates_ = MakeTestCertificates(certificates_dir_);
  }
  const int n = options_.masters * (1 + options_.replicas_per_master);
  for (int i = 0; i < n; ++i) {
    nodes_.push_back(std::make_unique<RedisServer>(
        RedisServerOptions{.password = options_.password,
                           .tls = options_.tls,
                           .cluster = true,
                           .cluster_node_timeout_ms = options_.node_timeout_ms,
                           .tls_cluster = options_.tls,
                           .certificates = certificates_}));
    if (::testing::Test::HasFatalFailure()) return;
    CreateAclUser(i);
  }
  for (int i = 0; i < n; ++i) {
    ids_.emplace_back(RunOn(i, {"CLUSTER", "MYID"}).view().Str());
    // Distinct config epochs, as redis-cli gives them: equal epochs would be resolved by the
    // cluster itself, but only after a round of gossip.
    RunOn(i, {"CLUSTER", "SET-CONFIG-EPOCH", std::to_string(i + 1)});
  }
  for (int m = 0; m < options_.masters; ++m) {
    const int first = m * kSlots / options_.masters;
    const int last = (m + 1) * kSlots / options_.masters - 1;
    RunOn(m, {"CLUSTER", "ADDSLOTSRANGE", std::to_string(first), std::to_string(last)});
  }
  for (int i = 1; i < n; ++i) {
    RunOn(0, {"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes_[i]->port()),
              std::to_string(nodes_[i]->cluster_port())});
  }
  const bool met = WaitFor(
      [&] {
        for (int i = 0; i < n; ++i) {
          if (ClusterInfoField(i, "cluster_known_nodes") != std::to_string(n)) return false;
        }
        return true;
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(met) << "the nodes did not all meet";
  for (int m = 0; m < options_.masters; ++m) {
    for (int k = 0; k < options_.replicas_per_master; ++k) {
      const int replica = options_.masters + m * options_.replicas_per_master + k;
      RunOn(replica, {"CLUSTER", "REPLICATE", ids_[m]});
    }
  }
  WaitUntilHealthy(30);
}

void RedisCluster::CreateAclUser(int i) {
  if (options_.acl_user.empty()) return;
  RunOn(i, {"ACL", "SETUSER", options_.acl_user, "reset", "on", ">" + options_.acl_password, "~*",
            "&*", "+@all"});
}

int RedisCluster::IndexOfPort(int port) const {
  for (int i = 0; i < size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  return -1;
}

std::string RedisCluster::SeedUrl() const { return nodes_[0]->url(); }

std::string RedisCluster::NodesYaml() const {
  std::string yaml = "[";
  for (int i = 1; i < size(); ++i) {
    yaml += (i > 1 ? ", \"" : "\"") + nodes_[i]->address() + "\"";
  }
  return yaml + "]";
}

redis::Reply RedisCluster::RunOn(int i, const std::vector<std::string>& args, bool asking) const {
  auto reply = TryRun(*nodes_[i], args, asking);
  if (!reply) {
    ADD_FAILURE() << "node " << i << " (port " << nodes_[i]->port() << ") did not answer "
                  << args.front();
    return {};
  }
  return std::move(*reply);
}

int RedisCluster::AnyRunning() const {
  for (int i = 0; i < size(); ++i) {
    if (Reachable(i)) return i;
  }
  return 0;
}

std::string RedisCluster::ClusterInfoField(int node, std::string_view field) const {
  auto reply = TryRun(*nodes_[node], {"CLUSTER", "INFO"}, false);
  if (!reply || reply->IsError()) return "";
  const std::string info(reply->view().Str());
  const std::string key = std::string(field) + ":";
  const auto at = info.find(key);
  if (at == std::string::npos) return "";
  const auto end = info.find_first_of("\r\n", at);
  return info.substr(at + key.size(), end - at - key.size());
}

std::vector<int> RedisCluster::OwnersSeenBy(int viewer) const {
  auto reply = TryRun(*nodes_[viewer], {"CLUSTER", "NODES"}, false);
  if (!reply || reply->IsError()) return {};
  std::vector<int> owners(kSlots, -1);
  std::istringstream lines{std::string(reply->view().Str())};
  for (std::string line; std::getline(lines, line);) {
    const auto words = Words(line);
    if (words.size() < 8 || words[2].find("master") == std::string::npos) continue;
    const int owner = IndexOfPort(PortOfNodeAddress(words[1]));
    for (size_t w = 8; w < words.size(); ++w) {
      if (words[w].front() == '[') continue;  // [slot->-id] / [slot-<-id]: a migration's state
      const auto dash = words[w].find('-');
      const int first = std::atoi(words[w].c_str());
      const int last = dash == std::string::npos ? first : std::atoi(words[w].c_str() + dash + 1);
      for (int s = first; s <= last && s < kSlots; ++s) owners[s] = owner;
    }
  }
  return owners;
}

int RedisCluster::SlotOf(std::string_view key) const {
  return static_cast<int>(
      RunOn(AnyRunning(), {"CLUSTER", "KEYSLOT", std::string(key)}).view().Integer());
}

int RedisCluster::MasterOfSlot(int slot) const {
  const auto owners = OwnersSeenBy(AnyRunning());
  return owners.empty() ? -1 : owners[slot];
}

std::vector<int> RedisCluster::SlotsOf(int master) const {
  const auto owners = OwnersSeenBy(AnyRunning());
  std::vector<int> slots;
  for (int s = 0; s < static_cast<int>(owners.size()); ++s) {
    if (owners[s] == master) slots.push_back(s);
  }
  return slots;
}

int RedisCluster::ReplicaOf(int master) const {
  auto reply = TryRun(*nodes_[AnyRunning()], {"CLUSTER", "NODES"}, false);
  if (!reply || reply->IsError()) return -1;
  std::istringstream lines{std::string(reply->view().Str())};
  for (std::string line; std::getline(lines, line);) {
    const auto words = Words(line);
    if (words.size() < 8 || words[3] != ids_[master]) continue;
    if (words[2].find("slave") == std::string::npos || words[2].find("fail") != std::string::npos)
      continue;
    const int replica = IndexOfPort(PortOfNodeAddress(words[1]));
    if (replica >= 0 && Reachable(replica)) return replica;
  }
  return -1;
}

std::string RedisCluster::KeyOnMaster(int master, std::string_view prefix) const {
  const auto owners = OwnersSeenBy(AnyRunning());
  for (int n = 0; n < 10000 && !owners.empty(); ++n) {
    std::string key = std::string(prefix) + std::to_string(n);
    if (owners[SlotOf(key)] == master) return key;
  }
  ADD_FAILURE() << "no key with prefix " << prefix << " on node " << master;
  return std::string(prefix);
}

std::optional<redis::Reply> RedisCluster::RunCached(int i, const std::vector<std::string>& args,
                                                    bool asking) {
  if (i < 0 || !Reachable(i)) return std::nullopt;
  connections_.resize(nodes_.size());
  auto& connection = connections_[i];
  if (connection == nullptr) {
    redis::ConnectionOptions options = nodes_[i]->ClientOptions();
    options.connect_timeout = Millis(1000);
    auto opened = redis::Connection::Open(options);
    if (!opened.ok()) return std::nullopt;
    connection = std::move(*opened);
  }
  std::vector<redis::Command> commands;
  if (asking) commands.emplace_back("ASKING");
  redis::Command command(args.front());
  for (size_t a = 1; a < args.size(); ++a) command.Arg(args[a]);
  commands.push_back(std::move(command));
  auto replies = connection->RunPipeline(commands);
  if (!replies.ok()) {
    connection.reset();
    return std::nullopt;
  }
  return std::move(replies->back());
}

redis::Reply RedisCluster::Run(std::string_view key, const std::vector<std::string>& args) {
  auto known = slot_of_key_.find(key);
  if (known == slot_of_key_.end()) known = slot_of_key_.emplace(key, SlotOf(key)).first;
  const int slot = known->second;
  const auto refresh = [&] {
    owners_ = OwnersSeenBy(AnyRunning());
    return owners_.empty() ? -1 : owners_[slot];
  };
  int target = owners_.empty() ? refresh() : owners_[slot];
  bool asking = false;
  redis::Reply last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int redirects = 0; std::chrono::steady_clock::now() < deadline && redirects < 16;) {
    auto reply = RunCached(target, args, asking);
    if (!reply) {  // that node is down or going: ask the cluster again after a moment
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      target = refresh();
      asking = false;
      continue;
    }
    const std::string_view error = reply->IsError() ? reply->view().Str() : "";
    if (StartsWith(error, "MOVED ") || StartsWith(error, "ASK ")) {
      target = IndexOfPort(PortOfRedirect(error));
      asking = StartsWith(error, "ASK ");
      if (!asking && target >= 0 && !owners_.empty()) owners_[slot] = target;
      ++redirects;
      last = std::move(*reply);
      continue;
    }
    if (StartsWith(error, "TRYAGAIN") || StartsWith(error, "CLUSTERDOWN")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      target = refresh();
      asking = false;
      last = std::move(*reply);
      continue;
    }
    return std::move(*reply);
  }
  ADD_FAILURE() << "no node served " << args.front() << " " << key
                << " within 10 s; last: " << (last.IsError() ? last.view().Str() : "no reply");
  return last;
}

void RedisCluster::WaitUntilHealthy(int seconds) {
  std::string why;
  const bool healthy = WaitFor(
      [&] {
        std::vector<int> agreed;
        for (int i = 0; i < size(); ++i) {
          if (!Reachable(i)) continue;
          if (ClusterInfoField(i, "cluster_state") != "ok") {
            why = "node " + std::to_string(i) + " is not cluster_state:ok";
            return false;
          }
          const auto owners = OwnersSeenBy(i);
          if (owners.empty()) {
            why = "node " + std::to_string(i) + " did not answer CLUSTER NODES";
            return false;
          }
          if (agreed.empty()) agreed = owners;
          if (owners != agreed) {
            why = "node " + std::to_string(i) + " disagrees about the slot owners";
            return false;
          }
          auto replication = TryRun(*nodes_[i], {"INFO", "replication"}, false);
          if (!replication) return false;
          const std::string_view text = replication->view().Str();
          if (text.find("role:slave") != std::string_view::npos &&
              text.find("master_link_status:up") == std::string_view::npos) {
            why = "replica " + std::to_string(i) + " is not in sync with its master";
            return false;
          }
        }
        for (int owner : agreed) {
          if (owner < 0 || !Reachable(owner)) {
            why = "a slot has no running owner";
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(seconds));
  ASSERT_TRUE(healthy) << "the cluster did not become healthy within " << seconds << " s: " << why;
}

void RedisCluster::ManualFailover(int replica) {
  RunOn(replica, {"CLUSTER", "FAILOVER"});
  const bool promoted = WaitFor(
      [&] {
        const auto owners = OwnersSeenBy(AnyRunning());
        for (int owner : owners) {
          if (owner == replica) return true;
        }
        return false;
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(promoted) << "node " << replica << " was not promoted by CLUSTER FAILOVER";
  WaitUntilHealthy();
}

int RedisCluster::WaitForPromotion(int old_master, const std::vector<int>& slots_of_old_master) {
  int successor = -1;
  const bool promoted = WaitFor(
      [&] {
        if (slots_of_old_master.empty()) return true;
        const auto owners = OwnersSeenBy(AnyRunning());
        if (owners.empty()) return false;
        successor = owners[slots_of_old_master.front()];
        return successor >= 0 && successor != old_master;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(promoted) << "no replica of node " << old_master << " took over its slots";
  WaitUntilHealthy();
  return successor;
}

int RedisCluster::KillMaster(int master) {
  const auto slots = SlotsOf(master);
  Kill(master);
  return WaitForPromotion(master, slots);
}

void RedisCluster::Restart(int node) {
  nodes_[node]->Start();
  if (::testing::Test::HasFatalFailure()) return;
  CreateAclUser(node);
  WaitUntilHealthy();
}

void RedisCluster::Pause(int node) {
  paused_.resize(nodes_.size());
  nodes_[node]->Signal(SIGSTOP);
  paused_[node] = true;
}

void RedisCluster::Resume(int node) {
  nodes_[node]->Signal(SIGCONT);
  paused_[node] = false;
  WaitUntilHealthy();
}

void RedisCluster::BeginMigration(int slot, int from, int to) {
  migrations_[slot] = {from, to};
  RunOn(to, {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", ids_[from]});
  RunOn(from, {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", ids_[to]});
}

void RedisCluster::MoveKeys(int slot) {
  const auto [from, to] = migrations_.at(slot);
  while (true) {
    const auto keys = RunOn(from, {"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"});
    if (keys.view().Size() == 0) return;
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(nodes_[to]->port()),
                                        "",        "0",         "10000"};
    if (!options_.password.empty()) migrate.insert(migrate.end(), {"AUTH", options_.password});
    migrate.emplace_back("KEYS");
    for (size_t i = 0; i < keys.view().Size(); ++i) migrate.emplace_back(keys[i].Str());
    const auto moved = RunOn(from, migrate);
    if (moved.IsError() || ::testing::Test::HasFailure()) {
      ADD_FAILURE() << "MIGRATE of slot " << slot << " failed: " << moved.view().Str();
      return;
    }
  }
}

void RedisCluster::FinishMigration(int slot) {
  const auto [from, to] = migrations_.at(slot);
  migrations_.erase(slot);
  const std::vector<std::string> setslot = {"CLUSTER", "SETSLOT", std::to_string(slot), "NODE",
                                            ids_[to]};
  RunOn(to, setslot);
  RunOn(from, setslot);
  const auto owners = OwnersSeenBy(AnyRunning());
  for (int i = 0; i < size(); ++i) {
    if (i == from || i == to || !Reachable(i)) continue;
    const bool is_master = std::find(owners.begin(), owners.end(), i) != owners.end();
    if (is_master) RunOn(i, setslot);
  }
  const bool agreed = WaitFor(
      [&] {
        for (int i = 0; i < size(); ++i) {
          if (!Reachable(i)) continue;
          const auto seen = OwnersSeenBy(i);
          if (seen.empty() || seen[slot] != to) return false;
        }
        return true;
      },
      std::chrono::seconds(20));
  ASSERT_TRUE(agreed) << "not every node learned that slot " << slot << " moved";
  WaitUntilHealthy();
}

}  // namespace streamcar::testing

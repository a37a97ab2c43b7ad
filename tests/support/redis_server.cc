#include "tests/support/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "tests/support/child_process.h"

namespace streamcar::testing {

namespace {

// Whether 127.0.0.1:port can be bound right now (SO_REUSEADDR, as servers bind).
bool CanBind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

// Where test ports are picked: [first, last], below the kernel's ephemeral range (read from
// /proc, 32768-60999 by default) and below Kubernetes' NodePort range (30000-32767); above the
// ephemeral range when the space below is too small.
std::pair<int, int> TestPortRange() {
  int low = 32768;
  int high = 60999;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low >> high;
  constexpr int kEnough = 2000;
  const int below_last = std::min(low - 1, 29999);
  if (below_last - 10000 + 1 >= kEnough) return {10000, below_last};
  if (65535 - high >= kEnough) return {high + 1, 65535};
  throw std::runtime_error(
      "no room for test ports outside the ephemeral range: widen the gap in "
      "net.ipv4.ip_local_port_range");
}

int FreePort() {
  // A port that bind(0) picks comes from the ephemeral range and can be handed to any outgoing
  // connection in the moment before the server under test binds it, which the suite saw
  // ("address already in use" under TSan). Each port picked is also locked (flock on a file per
  // port, held until this process exits), so the parallel test processes never pick the same
  // one; tests/support/harness.py picks the same way, in the same directory.
  static std::mutex mutex;
  static std::vector<int> held;  // the lock files of the ports this process picked
  static std::mt19937 random(std::random_device{}());
  std::lock_guard lock(mutex);
  const std::string dir = "/tmp/streamcar-test-ports";
  if (::mkdir(dir.c_str(), 01777) == 0) ::chmod(dir.c_str(), 01777);  // whatever the umask
  const auto [first, last] = TestPortRange();
  std::uniform_int_distribution<int> pick(first, last);
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const int port = pick(random);
    const std::string path = dir + "/" + std::to_string(port);
    // Read-only: flock needs no write access, so a file another user created serves too.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    ::fchmod(fd, 0666);  // fails harmlessly on another user's file
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || !CanBind(port)) {
      ::close(fd);
      continue;
    }
    held.push_back(fd);
    return port;
  }
  throw std::runtime_error("no free TCP port in " + std::to_string(first) + "-" +
                           std::to_string(last));
}

std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "XXXXXX")).string();
  char* made = ::mkdtemp(pattern.data());
  if (made == nullptr) throw std::runtime_error("mkdtemp failed");
  return made;
}

RedisServer::RedisServer(RedisServerOptions options) : options_(std::move(options)) {
  dir_ = MakeTempDir("streamcar-redis-");
  port_ = FreePort();
  if (options_.cluster) cluster_port_ = FreePort();
  if (options_.tls) {
    certificates_ =
        options_.certificates.ca_cert.empty() ? MakeTestCertificates(dir_) : options_.certificates;
  }
  Start();
}

RedisServer::~RedisServer() {
  Kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisServer::Start() {
  std::vector<std::string> args = {"redis-server"};
  // A configuration file must be the first argument; the options below override what it says.
  if (!options_.config_file.empty()) args.push_back(options_.config_file);
  if (options_.sentinel) args.emplace_back("--sentinel");
  args.insert(args.end(), {"--bind", "127.0.0.1", "--dir", dir_, "--save", "", "--logfile",
                           dir_ + "/redis.log", "--daemonize", "no"});
  if (options_.tls) {
    args.insert(args.end(), {"--port", "0", "--tls-port", std::to_string(port_), "--tls-cert-file",
                             certificates_.server_cert, "--tls-key-file", certificates_.server_key,
                             "--tls-ca-cert-file", certificates_.ca_cert, "--tls-auth-clients",
                             options_.tls_auth_clients});
    if (options_.tls_cluster) {
      args.insert(args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
    }
  } else {
    args.insert(args.end(), {"--port", std::to_string(port_)});
  }
  if (options_.append_only) {
    for (const char* a : {"--appendonly", "yes", "--appendfsync", "always"}) args.emplace_back(a);
  } else {
    args.insert(args.end(), {"--appendonly", "no"});
  }
  if (!options_.password.empty()) args.insert(args.end(), {"--requirepass", options_.password});
  if (options_.cluster) {
    args.insert(args.end(),
                {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf",
                 "--cluster-port", std::to_string(cluster_port_), "--cluster-node-timeout",
                 std::to_string(options_.cluster_node_timeout_ms)});
  }
  if (!options_.replica_of.empty()) {
    const auto colon = options_.replica_of.rfind(':');
    args.insert(args.end(), {"--replicaof", options_.replica_of.substr(0, colon),
                             options_.replica_of.substr(colon + 1)});
  }
  if (options_.cluster || !options_.replica_of.empty()) {
    // A replica authenticates to its master with the password all nodes share, and a master
    // serves a new replica at once instead of waiting 5 s for more replicas to join the sync.
    if (!options_.password.empty()) args.insert(args.end(), {"--masterauth", options_.password});
    args.insert(args.end(), {"--repl-diskless-sync-delay", "0"});
  }
  if (options_.unix_socket)
    args.insert(args.end(), {"--unixsocket", socket_path(), "--unixsocketperm", "700"});
  args.insert(args.end(), options_.extra.begin(), options_.extra.end());

  // Another server binary (e.g. a newer Redis or Valkey) when the environment names one.
  const char* binary = std::getenv("STREAMCAR_TEST_REDIS_SERVER");
  if (binary != nullptr && *binary != '\0') args.front() = binary;
  // Dies with the test process, and holds none of its descriptors (child_process.h).
  pid_ = SpawnChild(
      {.argv = args, .stdout_path = dir_ + "/redis.out", .stderr_path = dir_ + "/redis.out"});
  // Ready when it answers (LOADING counts as not yet).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    redis::ConnectionOptions options = ClientOptions();
    options.connect_timeout = Millis(200);
    if (auto c = redis::Connection::Open(options); c.ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream out(dir_ + "/redis.out");
  const std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  FAIL() << "redis-server did not start on port " << port_ << "; it said:\n" << said;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::Signal(int signal) const {
  if (pid_ > 0) ::kill(pid_, signal);
}

redis::ConnectionOptions RedisServer::ClientOptions() const {
  redis::ConnectionOptions options;
  options.endpoint.kind =
      options_.tls ? config::RedisEndpoint::Kind::kTls : config::RedisEndpoint::Kind::kTcp;
  options.endpoint.host = "127.0.0.1";
  options.endpoint.port = port_;
  options.password = options_.password;
  if (options_.tls) {
    options.tls.ca_file = certificates_.ca_cert;
    if (options_.tls_auth_clients == "yes") {
      options.tls.cert_file = certificates_.client_cert;
      options.tls.key_file = certificates_.client_key;
    }
  }
  return options;
}

std::unique_ptr<redis::Connection> RedisServer::Connect(const std::string& username,
                                                        const std::string& password) const {
  redis::ConnectionOptions options = ClientOptions();
  options.username = username;
  options.password = password.empty() ? options_.password : password;
  auto connection = redis::Connection::Open(options);
  if (!connection.ok()) {
    ADD_FAILURE() << "cannot connect to test redis: " << connection.status().message();
    return nullptr;
  }
  return std::move(*connection);
}

redis::Reply RedisServer::Run(const std::vector<std::string>& args) const {
  redis::Reply reply = RunAllowingError(args);
  if (reply.IsError()) {
    std::string command;
    for (const auto& a : args) command += (command.empty() ? "" : " ") + a.substr(0, 64);
    ADD_FAILURE() << "redis refused `" << command << "`: " << reply.view().Str();
  }
  return reply;
}

redis::Reply RedisServer::RunAllowingError(const std::vector<std::string>& args) const {
  auto connection = Connect();
  if (!connection) return {};
  redis::Command command(args.front());
  for (size_t i = 1; i < args.size(); ++i) command.Arg(args[i]);
  auto replies = connection->RunPipeline({command});
  if (!replies.ok()) {
    ADD_FAILURE() << "redis command failed: " << replies.status().message();
    return {};
  }
  return std::move((*replies)[0]);
}

}  // namespace streamcar::testing

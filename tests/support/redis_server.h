#pragma once
// A real redis-server for one test: its own free port, its own data directory, killed at the end.
// Tests use it to prove Redis behaviour; there is no mock of Redis anywhere.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "sidecar/redis/connection.h"
#include "tests/support/certificates.h"

namespace streamcar::testing {

struct RedisServerOptions {
  bool append_only = false;        // AOF with appendfsync always: survives kill -9
  std::string password;            // requirepass
  std::vector<std::string> extra;  // more redis-server arguments
  bool unix_socket = false;
  // TLS only (port() is then the TLS port); "no", "optional" or "yes" for client certificates.
  bool tls = false;
  std::string tls_auth_clients = "no";
  // Cluster mode: nodes.conf in dir() (so a restarted node keeps its identity), a bus port of its
  // own (the default, port + 10000, exceeds 65535 for a test port above 55535) and a short node
  // timeout so that failures are detected within a test's patience.
  bool cluster = false;
  int cluster_node_timeout_ms = 1000;
  // With tls: the cluster bus and replication over TLS too (--tls-cluster, --tls-replication).
  bool tls_cluster = false;
  // With tls: these certificates instead of a fresh set in dir() (the nodes of one cluster must
  // trust each other).
  TestCertificates certificates;
  // "host:port" of the master this server replicates at start (masterauth = password).
  std::string replica_of;
  // Launched as `redis-server <config_file> ...` (the file stays where it is: a sentinel rewrites
  // it); with `sentinel`, as a Redis Sentinel (`--sentinel`).
  std::string config_file;
  bool sentinel = false;
};

class RedisServer {
 public:
  explicit RedisServer(RedisServerOptions options = {});
  ~RedisServer();

  int port() const { return port_; }
  // The cluster bus port (0 unless options.cluster).
  int cluster_port() const { return cluster_port_; }
  // The process id while running, else -1.
  pid_t pid() const { return pid_; }
  // "127.0.0.1:<port>".
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }
  std::string socket_path() const { return dir_ + "/redis.sock"; }
  std::string url() const {
    return std::string(options_.tls ? "rediss" : "redis") +
           "://127.0.0.1:" + std::to_string(port_) + "/0";
  }
  // With tls: the certificates the server uses and trusts.
  const TestCertificates& certificates() const { return certificates_; }
  // Options that reach this server (TLS trusted through the test CA).
  redis::ConnectionOptions ClientOptions() const;

  // SIGKILL, and wait for it to be gone.
  void Kill();
  // Start again on the same port and directory (AOF replays).
  void Start();
  bool running() const { return pid_ > 0; }
  // Sends `signal` (SIGSTOP, SIGCONT, SIGTERM...) to the running server; a signal that ends it
  // is followed by Kill() or Start() by the caller.
  void Signal(int signal) const;

  // A fresh client connection (our own Connection: the code under test is also the client).
  std::unique_ptr<redis::Connection> Connect(const std::string& username = "",
                                             const std::string& password = "") const;
  // Runs one command on a fresh connection and returns the reply. Fails the test on an I/O error
  // and on an error reply: a setup step that Redis refused must not pass unnoticed.
  redis::Reply Run(const std::vector<std::string>& args) const;
  // The same for a command the test expects may fail: an error reply is returned, not a failure.
  redis::Reply RunAllowingError(const std::vector<std::string>& args) const;

 private:
  RedisServerOptions options_;
  int port_ = 0;
  int cluster_port_ = 0;
  std::string dir_;
  pid_t pid_ = -1;
  TestCertificates certificates_;
};

// A free TCP port on 127.0.0.1, outside the kernel's ephemeral range and reserved for this
// process (no other test process picks it while this one runs).
int FreePort();
// A fresh temporary directory.
std::string MakeTempDir(const std::string& prefix);

}  // namespace streamcar::testing

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
};

class RedisServer {
 public:
  explicit RedisServer(RedisServerOptions options = {});
  ~RedisServer();

  int port() const { return port_; }
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

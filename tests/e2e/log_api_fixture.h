#pragma once
// Shared pieces of the log API's end-to-end tests (SPEC 10): the real binary with an `api:` block
// and a `streams:` list, a real redis-server, and HTTP written over raw sockets (so what a hostile
// client can do, a test can do too), plus the process's memory and thread count from /proc.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {

using Clock = std::chrono::steady_clock;

// A TCP connection to 127.0.0.1:port, or -1. `receive_buffer` > 0 sets SO_RCVBUF before connecting
// (a small one makes a client that never reads fill its window quickly).
int ConnectTo(int port, int receive_buffer = 0);
// Sends all of `data` (false when the peer is gone).
bool SendAll(int fd, const std::string& data);
// Reads what arrives within `wait` into *buffer; false when nothing came or the peer closed (then
// *closed is set).
bool ReadSome(int fd, std::string* buffer, std::chrono::milliseconds wait, bool* closed);

// A JSON string's value after "key": (the first occurrence), for the plain texts the tests use.
std::string JsonString(const std::string& json, const std::string& key);

// The resident memory of process `pid` in KiB (VmRSS), -1 when it cannot be read.
int64_t ResidentKiB(pid_t pid);
// The number of threads of process `pid` (entries of /proc/<pid>/task), -1 when it cannot be read.
int ThreadCount(pid_t pid);
// Raises this process's open-file limit to its hard limit: the tests hold hundreds of connections,
// and the binary they start inherits the limit.
void RaiseOpenFileLimit();

struct ApiAnswer {
  int status = 0;  // 0: no answer in time
  std::string body;
  std::chrono::milliseconds took{0};  // from connect to the whole answer
};

// One HTTP/1.1 request on a connection of its own (Connection: close): `headers` are whole lines
// without CRLF; Host is added, and Content-Length when there is a body or the method is POST. What
// arrived until the server closed, or until `timeout`, is the answer.
ApiAnswer Exchange(int port, const std::string& method, const std::string& path,
                   const std::vector<std::string>& headers = {}, const std::string& body = "",
                   std::chrono::milliseconds timeout = std::chrono::seconds(3));

// Reads the answer to an SSE request sent on `fd` until the peer closes, `stop` is set, or the
// answer is not 200: *status gets the answer's status when its head arrives, and `on_id` the id
// of each event, in order.
void ReadEventStream(int fd, const std::atomic<bool>& stop, std::atomic<int>* status,
                     const std::function<void(const std::string&)>& on_id);

// A Server-Sent Events follower on a thread of its own, collecting the ids of the events it reads
// in order until it is destroyed.
class SseFollower {
 public:
  SseFollower(int port, const std::string& path, const std::vector<std::string>& headers = {});
  ~SseFollower();
  SseFollower(const SseFollower&) = delete;
  SseFollower& operator=(const SseFollower&) = delete;

  int status() const { return status_.load(); }  // 0 until the answer's head arrived
  std::vector<std::string> ids() const;
  // Waits until `count` events arrived.
  bool WaitEvents(size_t count, std::chrono::milliseconds timeout) const;

 private:
  void Run(int port, const std::string& request);

  std::atomic<bool> stop_{false};
  std::atomic<int> status_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> ids_;
  std::thread thread_;
};

// Polls GET /healthz on `port` every 100 ms on a thread of its own until destroyed, keeping the
// slowest answer and the number of polls not answered 200 within 1 s.
class HealthProbe {
 public:
  explicit HealthProbe(int port);
  ~HealthProbe();
  HealthProbe(const HealthProbe&) = delete;
  HealthProbe& operator=(const HealthProbe&) = delete;

  int polls() const { return polls_.load(); }
  int failures() const { return failures_.load(); }  // not 200, or 200 later than 1 s
  std::chrono::milliseconds slowest() const { return std::chrono::milliseconds(slowest_.load()); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> polls_{0};
  std::atomic<int> failures_{0};
  std::atomic<int64_t> slowest_{0};
  std::thread thread_;
};

struct LogApiConfig {
  std::string streams;    // the items of "streams:", each indented 2 spaces
  std::string api_extra;  // more "api:" keys, each line indented 2 spaces
  std::string top_extra;  // more top-level YAML (archive:, ...)
  std::string listen_host = "127.0.0.1";
  std::string connect_timeout = "1s";  // redis.connect_timeout
  std::string command_timeout = "2s";  // redis.command_timeout
};

class LogApiTest : public E2eTest {
 protected:
  LogApiTest() : api_port_(FreePort()) {}

  // The YAML of a sidecar that serves the log API (and the admin port) and has no subscription.
  std::string LogApiYaml(const LogApiConfig& c) const;
  // Starts it and waits for /readyz (a fatal failure otherwise, with the binary's log: callers
  // wrap it in ASSERT_NO_FATAL_FAILURE where what follows needs the API).
  void StartApi(const LogApiConfig& c);
  void StartApi(const std::string& streams, const std::string& api_extra = "") {
    StartApi(LogApiConfig{.streams = streams, .api_extra = api_extra});
  }

  int api_port_;
  std::unique_ptr<SidecarProcess> sidecar_;
};

}  // namespace streamcar::testing

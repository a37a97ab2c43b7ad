#pragma once
// A real HTTP handler for tests: an in-process server on a free port that records every request
// and answers as the test says. Thread-safe.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace httplib {
class Server;
}

namespace streamcar::testing {

struct ReceivedRequest {
  std::string method;
  std::string path;
  std::multimap<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::chrono::steady_clock::time_point at;
  std::string Header(const std::string& lower_name) const;
};

struct HandlerReply {
  int status = 200;
  std::string body;
  std::map<std::string, std::string> headers;
  std::chrono::milliseconds delay{0};  // sleep before answering
};

class TestHandler {
 public:
  using Behaviour = std::function<HandlerReply(const ReceivedRequest&)>;

  // Starts listening on `port` (0: a free port). Answers 200 until told otherwise.
  explicit TestHandler(int port = 0);
  // Listens on the Unix socket `unix_socket` instead (SPEC 11, handler.unix_socket); port() is 0.
  explicit TestHandler(const std::string& unix_socket);
  ~TestHandler();

  int port() const { return port_; }
  std::string url(const std::string& path = "/") const;
  void SetBehaviour(Behaviour behaviour);
  // Stops listening (connections are then refused) and starts again on the same port.
  void Stop();
  void Restart();

  std::vector<ReceivedRequest> Requests() const;
  size_t Count() const;
  // Waits until `predicate(requests)` holds; false on timeout.
  bool WaitFor(const std::function<bool(const std::vector<ReceivedRequest>&)>& predicate,
               std::chrono::milliseconds timeout);
  bool WaitForCount(size_t n, std::chrono::milliseconds timeout);

 private:
  void Listen();

  int port_;
  std::string unix_socket_;  // set: listens here, not on a port
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<ReceivedRequest> requests_;
  Behaviour behaviour_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace streamcar::testing

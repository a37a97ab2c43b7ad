#pragma once
// Watches every command a redis-server executes (MONITOR on a connection of its own), so a test
// can assert what a whole scenario sent: e.g. that no destructive command was ever issued.
// Plain TCP servers without a password only (the servers most tests start).

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace streamcar::testing {

class RedisMonitor {
 public:
  // Connects to 127.0.0.1:`port` and starts MONITOR; ok() says whether Redis confirmed it.
  explicit RedisMonitor(int port);
  ~RedisMonitor();
  RedisMonitor(const RedisMonitor&) = delete;
  RedisMonitor& operator=(const RedisMonitor&) = delete;

  bool ok() const { return ok_; }
  // Every command seen so far, as its words (the command name upper-cased).
  std::vector<std::vector<std::string>> Commands() const;
  // The same, each with whether a script ran it (MONITOR's "[0 lua]"): what a test needs to
  // tell one atomic script step from separate commands.
  struct Seen {
    std::vector<std::string> words;
    bool from_script = false;
  };
  std::vector<Seen> CommandsWithSource() const;
  // The commands whose name (and, for a two-word name like "XGROUP DESTROY", the first
  // argument) is `name`, as printable lines.
  std::vector<std::string> Matching(const std::string& name) const;

 private:
  void ReadLoop();
  void Parse(const std::string& line);

  int fd_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::vector<std::vector<std::string>> commands_;
  std::vector<bool> from_script_;  // one per commands_ entry
  std::string buffer_;
  std::thread thread_;
};

}  // namespace streamcar::testing

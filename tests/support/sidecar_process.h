#pragma once
// The real streamcar binary as a child process, for end-to-end tests: a config file written from
// the test, stderr captured to a file, signals (TERM, KILL), the exit code and the admin endpoints.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace streamcar::testing {

// The path of build/streamcar (set by CMake).
std::string StreamcarBinary();

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the binary to completion with `args` (and extra environment "K=V" entries).
CommandResult RunStreamcar(const std::vector<std::string>& args,
                           const std::vector<std::string>& env = {});

class SidecarProcess {
 public:
  // Writes `config_yaml` to a file and starts `streamcar run -c <file>`.
  explicit SidecarProcess(const std::string& config_yaml, const std::vector<std::string>& env = {});
  ~SidecarProcess();

  void Terminate();  // SIGTERM
  void Interrupt();  // SIGINT
  void Kill();       // SIGKILL
  // Waits for the exit; the exit code, or nullopt on timeout. A signal death is 128+signal.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool running();
  std::string Logs() const;
  const std::string& config_path() const { return config_path_; }

 private:
  std::string dir_;
  std::string config_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

// GET http://127.0.0.1:<port><path>: status and body (status 0 when nothing answered).
std::pair<int, std::string> HttpGet(int port, const std::string& path);
// The value of the first metric line that starts with `name` and contains every label in
// `labels` (e.g. {"outcome=\"success\""}); -1 when absent.
double MetricValue(const std::string& metrics_text, const std::string& name,
                   const std::vector<std::string>& labels = {});

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

}  // namespace streamcar::testing

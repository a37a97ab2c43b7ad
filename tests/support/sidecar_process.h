#pragma once
// The real streamcar binary as a child process, for end-to-end tests: a config file written from
// the test, stderr captured to a file, signals (TERM, KILL, STOP/CONT), the exit code and the
// admin endpoints.
//
// The harness never hides a failing process: at teardown a sidecar that is still running gets
// SIGTERM and must exit with the code the test expects (0 unless ExpectExit says otherwise), and
// its stderr must hold no sanitizer report. Otherwise the test fails and the log is printed.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace streamcar::testing {

// The path of build/streamcar (set by CMake).
std::string StreamcarBinary();

// The first sanitizer report marker (AddressSanitizer, UBSan "runtime error:", ThreadSanitizer,
// LeakSanitizer) found in `log`, or "" when there is none.
std::string SanitizerReport(const std::string& log);

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the binary to completion with `args` (and extra environment "K=V" entries). A run longer
// than `timeout` is killed and fails the test (exit_code -1); so does a sanitizer report in its
// stderr.
CommandResult RunStreamcar(const std::vector<std::string>& args,
                           const std::vector<std::string>& env = {},
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));

class SidecarProcess {
 public:
  // Writes `config_yaml` to a file and starts `streamcar run -c <file>`.
  explicit SidecarProcess(const std::string& config_yaml, const std::vector<std::string>& env = {},
                          int admin_port = 0);
  // Stops the process (SIGTERM) when still running and checks its exit and its log (above).
  ~SidecarProcess();
  SidecarProcess(const SidecarProcess&) = delete;
  SidecarProcess& operator=(const SidecarProcess&) = delete;

  // The exit code this test expects (default 0); checked at teardown.
  void ExpectExit(int code) { expected_exit_ = code; }

  void Terminate();  // SIGTERM
  void Interrupt();  // SIGINT
  // SIGKILL and wait: an exit the test caused, so teardown does not check its code. Returns the
  // exit code the process had when it had already ended on its own (then it was not killed).
  std::optional<int> Kill();
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT
  // Waits for the exit; the exit code, or nullopt on timeout. A signal death is 128+signal.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool running();
  std::string Logs() const;
  // Every thread's stack of the running process (gdb, attached for a moment), for the failure
  // message of a process that hangs; a line saying why when there is none to take.
  std::string ThreadStacks() const;
  const std::string& config_path() const { return config_path_; }
  pid_t pid() const { return pid_; }
  int admin_port() const { return admin_port_; }

 private:
  std::string dir_;
  std::string config_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  int admin_port_ = 0;
  int expected_exit_ = 0;
  bool killed_ = false;
  bool paused_ = false;
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

#include "tests/support/sidecar_process.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/child_process.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
            const std::string& out_path, const std::string& err_path) {
  std::vector<std::string> argv = {StreamcarBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  // Dies with the test process, and holds none of its descriptors (child_process.h).
  return SpawnChild({.argv = argv, .env = env, .stdout_path = out_path, .stderr_path = err_path});
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// At most this much of a log goes into a failure message.
constexpr size_t kLogTail = 16000;

std::string Tail(const std::string& log) {
  return log.size() <= kLogTail ? log : "[...]" + log.substr(log.size() - kLogTail);
}

std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return DecodeStatus(status);
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

std::string StreamcarBinary() { return STREAMCAR_BINARY; }

std::string SanitizerReport(const std::string& log) {
  for (const char* marker :
       {"ERROR: AddressSanitizer", "runtime error:", "WARNING: ThreadSanitizer", "LeakSanitizer"}) {
    if (log.find(marker) != std::string::npos) return marker;
  }
  return {};
}

CommandResult RunStreamcar(const std::vector<std::string>& args,
                           const std::vector<std::string>& env, std::chrono::milliseconds timeout) {
  const std::string dir = MakeTempDir("streamcar-cmd-");
  const pid_t pid = Spawn(args, env, dir + "/out", dir + "/err");
  std::optional<int> code = WaitFor(pid, timeout);
  if (!code) {
    ::kill(pid, SIGKILL);
    WaitFor(pid, std::chrono::seconds(10));
  }
  CommandResult result{code.value_or(-1), ReadFile(dir + "/out"), ReadFile(dir + "/err")};
  std::filesystem::remove_all(dir);
  std::string command;
  for (const auto& a : args) command += " " + a;
  if (!code) {
    ADD_FAILURE() << "streamcar" << command << " did not finish within " << timeout.count()
                  << " ms (killed)\nstderr:\n"
                  << Tail(result.err);
  }
  if (auto report = SanitizerReport(result.err); !report.empty()) {
    ADD_FAILURE() << "streamcar" << command << ": " << report << " in stderr:\n"
                  << Tail(result.err);
  }
  return result;
}

SidecarProcess::SidecarProcess(const std::string& config_yaml, const std::vector<std::string>& env,
                               int admin_port)
    : admin_port_(admin_port) {
  dir_ = MakeTempDir("streamcar-e2e-");
  config_path_ = dir_ + "/streamcar.yaml";
  log_path_ = dir_ + "/stderr.log";
  std::ofstream(config_path_) << config_yaml;
  pid_ = Spawn({"run", "-c", config_path_}, env, dir_ + "/stdout.log", log_path_);
}

SidecarProcess::~SidecarProcess() {
  if (paused_) Resume();
  bool hung = false;
  std::string stacks;
  if (running()) {
    // A graceful stop, as Kubernetes does: drain, flush, exit 0; LeakSanitizer runs at exit.
    ::kill(pid_, SIGTERM);
    if (!Wait(std::chrono::seconds(60))) {
      hung = true;
      stacks = ThreadStacks();
      ::kill(pid_, SIGKILL);
      Wait(std::chrono::seconds(10));
    }
  }
  const std::string log = Logs();
  if (hung) {
    ADD_FAILURE() << "sidecar (pid " << pid_ << ") did not exit within 60 s of SIGTERM\n"
                  << Tail(log) << "\nits threads then:\n"
                  << stacks;
  } else if (!killed_ && exit_code_ != expected_exit_) {
    ADD_FAILURE() << "sidecar (pid " << pid_ << ") exited with "
                  << (exit_code_ ? std::to_string(*exit_code_) : "nothing") << ", expected "
                  << expected_exit_ << "\n"
                  << Tail(log);
  }
  if (auto report = SanitizerReport(log); !report.empty()) {
    ADD_FAILURE() << "sidecar (pid " << pid_ << "): " << report << " in its stderr\n" << Tail(log);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void SidecarProcess::Terminate() {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, SIGTERM);
}

void SidecarProcess::Interrupt() {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, SIGINT);
}

std::optional<int> SidecarProcess::Kill() {
  if (pid_ <= 0) return std::nullopt;
  if (auto ended = Wait(std::chrono::milliseconds(0))) return ended;
  ::kill(pid_, SIGKILL);
  killed_ = true;
  paused_ = false;
  Wait(std::chrono::seconds(10));
  return std::nullopt;
}

void SidecarProcess::Pause() {
  if (pid_ > 0 && !exit_code_ && ::kill(pid_, SIGSTOP) == 0) paused_ = true;
}

void SidecarProcess::Resume() {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, SIGCONT);
  paused_ = false;
}

std::optional<int> SidecarProcess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return exit_code_;
  exit_code_ = WaitFor(pid_, timeout);
  return exit_code_;
}

bool SidecarProcess::running() { return pid_ > 0 && !Wait(std::chrono::milliseconds(0)); }

std::string SidecarProcess::Logs() const { return ReadFile(log_path_); }

std::string SidecarProcess::ThreadStacks() const {
  if (pid_ <= 0 || exit_code_) return "(the process has ended)";
  // First what the kernel says of each thread (a process stuck in the kernel, in D state or
  // half way through its exit, shows nothing in gdb), then gdb's user-space stacks.
  std::string kernel;
  std::error_code error;
  const std::string tasks = "/proc/" + std::to_string(pid_) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    const std::string path = task.path().string();
    kernel += "task " + task.path().filename().string() + ": " + ReadFile(path + "/stat") +
              ReadFile(path + "/stack");
  }
  const std::string out = dir_ + "/stacks.txt";
  const pid_t gdb = SpawnChild(
      {.argv = {"gdb", "-p", std::to_string(pid_), "-batch", "-nx", "-ex", "thread apply all bt"},
       .stdout_path = out,
       .stderr_path = out});
  if (!WaitFor(gdb, std::chrono::seconds(60))) {
    ::kill(gdb, SIGKILL);
    WaitFor(gdb, std::chrono::seconds(10));
    return kernel + "(gdb took over 60 s)";
  }
  const std::string stacks = ReadFile(out);
  return kernel + (stacks.empty() ? "(no stacks from gdb: is it installed?)" : stacks);
}

std::pair<int, std::string> HttpGet(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::seconds(1));
  client.set_read_timeout(std::chrono::seconds(5));
  auto result = client.Get(path.c_str());
  if (!result) return {0, ""};
  return {result->status, result->body};
}

double MetricValue(const std::string& metrics_text, const std::string& name,
                   const std::vector<std::string>& labels) {
  std::istringstream lines(metrics_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (!line.starts_with(name + "{") && !line.starts_with(name + " ")) continue;
    bool all = true;
    for (const auto& label : labels) all = all && line.find(label) != std::string::npos;
    if (!all) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

}  // namespace streamcar::testing

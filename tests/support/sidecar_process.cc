#include "tests/support/sidecar_process.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

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
  pid_t pid = ::fork();
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    // Nothing else of the test process: an orphan left by a crashed test must not hold the
    // test runner's pipes open.
    ::close_range(3, ~0U, 0);
    for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    std::string binary = StreamcarBinary();
    argv.push_back(binary.data());
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

std::string StreamcarBinary() { return STREAMCAR_BINARY; }

CommandResult RunStreamcar(const std::vector<std::string>& args,
                           const std::vector<std::string>& env) {
  const std::string dir = MakeTempDir("streamcar-cmd-");
  const pid_t pid = Spawn(args, env, dir + "/out", dir + "/err");
  int status = 0;
  ::waitpid(pid, &status, 0);
  CommandResult result{DecodeStatus(status), ReadFile(dir + "/out"), ReadFile(dir + "/err")};
  std::filesystem::remove_all(dir);
  return result;
}

SidecarProcess::SidecarProcess(const std::string& config_yaml,
                               const std::vector<std::string>& env) {
  dir_ = MakeTempDir("streamcar-e2e-");
  config_path_ = dir_ + "/streamcar.yaml";
  log_path_ = dir_ + "/stderr.log";
  std::ofstream(config_path_) << config_yaml;
  pid_ = Spawn({"run", "-c", config_path_}, env, dir_ + "/stdout.log", log_path_);
}

SidecarProcess::~SidecarProcess() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(5));
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

void SidecarProcess::Kill() {
  if (pid_ > 0 && !exit_code_) ::kill(pid_, SIGKILL);
  Wait(std::chrono::seconds(5));
}

std::optional<int> SidecarProcess::Wait(std::chrono::milliseconds timeout) {
  if (exit_code_) return exit_code_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exit_code_ = DecodeStatus(status);
      return exit_code_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool SidecarProcess::running() { return pid_ > 0 && !Wait(std::chrono::milliseconds(0)); }

std::string SidecarProcess::Logs() const { return ReadFile(log_path_); }

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

#include "tests/support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

extern char** environ;

namespace streamcar::testing {
namespace {

// The program's path: `name` itself when it has a slash, else the first executable of that name
// in PATH (resolved before the fork: the child of a multi-threaded process may only make
// async-signal-safe calls, and a PATH search allocates).
std::string ResolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;  // execve fails, the child exits 127
}

// This process's environment with `extra` ("NAME=value") added or replacing.
std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> merged;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : extra) replaced = replaced || kv.substr(0, kv.find('=')) == name;
    if (!replaced) merged.push_back(entry);
  }
  merged.insert(merged.end(), extra.begin(), extra.end());
  return merged;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

int OpenOutput(const std::string& path) {
  return ::open(path.empty() ? "/dev/null" : path.c_str(),
                O_WRONLY | O_CREAT | (path.empty() ? 0 : O_APPEND), 0644);
}

}  // namespace

pid_t SpawnChild(const ChildSpec& spec) {
  std::vector<std::string> args = spec.argv;
  const std::string program = ResolveProgram(args.empty() ? "" : args.front());
  std::vector<std::string> environment = MergedEnvironment(spec.env);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(environment);
  // Truncated once here; the child appends, so stdout and stderr may share one file.
  for (const auto* path : {&spec.stdout_path, &spec.stderr_path}) {
    if (!path->empty()) ::close(::open(path->c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  }
  const pid_t parent = ::getpid();
  const bool main_thread = ::syscall(SYS_gettid) == parent;

  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // The child: async-signal-safe calls only.
  if (main_thread) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent died before the death signal was armed: nobody would ever send it.
    if (::getppid() != parent) ::_exit(127);
  }
  const int out = OpenOutput(spec.stdout_path);
  const int err = OpenOutput(spec.stderr_path);
  if (out < 0 || err < 0) ::_exit(127);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(err, STDERR_FILENO);
  const int null_in = ::open("/dev/null", O_RDONLY);
  if (null_in >= 0) ::dup2(null_in, STDIN_FILENO);
  // Nothing else of the test process: no pipe of the test runner, no socket of a test server.
  ::close_range(3, ~0U, 0);
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) ::_exit(126);
  ::execve(program.c_str(), argv.data(), envp.data());
  ::_exit(127);
}

}  // namespace streamcar::testing

// The test harness's own promises (tests/support): a test process that crashes leaves no server
// behind and no descriptor of the test runner's pipe open.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::testing {
namespace {

using std::chrono::seconds;

// Whether `pid` is gone: no such process, or a zombie (killed, not yet reaped by its new parent).
bool Gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close == std::string::npos || line.substr(close + 2, 1) == "Z";
}

// A test process that abort()s while its redis-server runs, its stdout and stderr a pipe as under
// `ctest | tee`: the pipe reaches end-of-file (no orphan holds it) and the server is gone. Before
// redis-server was started through SpawnChild, it inherited the pipe and outlived the test: the
// read below waited forever and the server kept its port.
TEST(TestSupportTest, ARedisServerDiesWithATestProcessThatAborts) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const pid_t test_process = ::fork();
  ASSERT_GE(test_process, 0);
  if (test_process == 0) {
    // The crashing test process: single-threaded here (only the forking thread survives fork).
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    {
      auto* server = new RedisServer();  // never destroyed: the process aborts
      if (::testing::Test::HasFailure() || !server->running()) ::_exit(3);
      std::ostringstream said;
      const std::string info(server->Run({"INFO", "server"}).view().Str());
      const auto at = info.find("process_id:");
      if (at == std::string::npos) ::_exit(3);
      said << "server " << std::atol(info.c_str() + at + 11) << " " << server->dir() << "\n";
      const std::string text = said.str();
      if (::write(STDOUT_FILENO, text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
        ::_exit(3);
      }
    }
    std::abort();
  }
  ::close(pipe_fds[1]);
  // Everything the pipe carries, until end-of-file or 30 s.
  std::string output;
  bool eof = false;
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!eof && std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) {
      eof = true;
    } else {
      output.append(buffer, static_cast<size_t>(n));
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(test_process, &status, 0), test_process);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) << output;

  pid_t server = 0;
  std::string dir;
  std::istringstream(output.substr(std::min(output.find("server "), output.size()))) >> dir >>
      server >> dir;
  ASSERT_GT(server, 0) << "the aborting test process did not start its server:\n" << output;
  const bool gone = Eventually([&] { return Gone(server); }, seconds(10));
  if (!gone) ::kill(server, SIGKILL);  // not left behind by this test either
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  EXPECT_TRUE(eof) << "the pipe stayed open after the test process died";
  EXPECT_TRUE(gone) << "redis-server " << server << " outlived the test process that started it";
}

}  // namespace
}  // namespace streamcar::testing

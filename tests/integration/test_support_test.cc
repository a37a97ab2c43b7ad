// The test harness's own promises (tests/support): a test process that crashes leaves no server
// behind and no descriptor of the test runner's pipe open, and a test handler binds any port
// FreePort() hands out.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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
#include "tests/support/test_handler.h"

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
    ::prctl(PR_SET_DUMPABLE, 0);  // a crash this test means to cause leaves no core file
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

// A port with a connection in TIME_WAIT, left by a server that bound with SO_REUSEADDR alone (as
// redis-server and the sidecar do) and closed first: FreePort() counts it free, and the handler
// must bind it. httplib's default (SO_REUSEPORT alone) could not: "test handler cannot bind".
TEST(TestSupportTest, AHandlerBindsAPortWithAConnectionInTimeWait) {
  const int port = FreePort();
  {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(::listen(listener, 1), 0);
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    const int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(accepted, 0);
    ::close(accepted);  // the server's side closes first: its end goes to TIME_WAIT
    char byte;
    EXPECT_EQ(::recv(client, &byte, 1, 0), 0);  // the FIN arrived
    ::close(client);
    ::close(listener);
  }
  TestHandler handler(port);
  EXPECT_EQ(handler.port(), port);
  httplib::Client client("127.0.0.1", port);
  auto result = client.Post("/", "{}", "application/json");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 200);
}

}  // namespace
}  // namespace streamcar::testing

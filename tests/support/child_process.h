#pragma once
// Starting the child processes of a test (redis-server, the streamcar binary, tools) so that a
// test process that dies, even by abort() or SIGKILL, leaves nothing behind:
// - the child gets SIGKILL when the test process dies (PR_SET_PDEATHSIG), so no orphaned server
//   keeps a port, a data directory or CPU;
// - the child holds no descriptor of the test process (its stdout and stderr go to files, every
//   other descriptor is closed), so an orphan could never keep the test runner's pipe open and
//   hang a piped run (`ctest | tee`).
//
// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. The death signal is
// therefore set only when the caller is the process's main thread (where gtest runs the test
// bodies); a child started from another thread gets the descriptor hygiene only, and whoever
// started it must stop it.

#include <sys/types.h>

#include <string>
#include <vector>

namespace streamcar::testing {

struct ChildSpec {
  // argv[0] is the program: a path, or a name looked up in PATH.
  std::vector<std::string> argv;
  // "NAME=value" entries added to this process's environment (replacing the same NAME).
  std::vector<std::string> env;
  // Where the child's stdout and stderr go (created or truncated); "" for /dev/null. Both may
  // name the same file.
  std::string stdout_path;
  std::string stderr_path;
  // The child's working directory; "" to keep the test's.
  std::string cwd;
};

// Forks and executes `spec`; the child's pid (the caller waits for it). A program that cannot
// be executed makes the child exit with 127 (126 when cwd cannot be entered).
pid_t SpawnChild(const ChildSpec& spec);

}  // namespace streamcar::testing

#include "tests/support/postgres_server.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "tests/support/child_process.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {
namespace {

namespace fs = std::filesystem;

bool HasPgCtl(const fs::path& dir) {
  return fs::exists(dir / "pg_ctl") && fs::exists(dir / "initdb");
}

// The number of a version directory ("15", "9.6"), for choosing the newest.
double VersionOf(const fs::path& dir) { return std::atof(dir.filename().c_str()); }

}  // namespace

std::string PostgresBinDir() {
  if (const char* bin = std::getenv("STREAMCAR_TEST_PG_BIN"); bin != nullptr && *bin != '\0') {
    return bin;
  }
  std::error_code ec;
  std::vector<fs::path> versions;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    if (HasPgCtl(entry.path() / "bin")) versions.push_back(entry.path());
  }
  if (!versions.empty()) {
    std::sort(versions.begin(), versions.end(),
              [](const fs::path& a, const fs::path& b) { return VersionOf(a) < VersionOf(b); });
    return (versions.back() / "bin").string();
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty() && HasPgCtl(dir)) return dir;
    }
  }
  return "";
}

PostgresServer::PostgresServer(PostgresServerOptions options) : options_(options) {
  bin_ = PostgresBinDir();
  if (bin_.empty()) {
    error_ = "PostgreSQL is not installed (no initdb/pg_ctl; scripts/setup installs it)";
    ADD_FAILURE() << error_;
    return;
  }
  dir_ = MakeTempDir("streamcar-pg-");
  port_ = FreePort();
  as_postgres_user_ = ::geteuid() == 0;
  if (as_postgres_user_) {
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr) {
      error_ = "running as root and there is no `postgres` user to run the server as";
      ADD_FAILURE() << error_;
      return;
    }
    if (::chown(dir_.c_str(), user->pw_uid, user->pw_gid) != 0) {
      error_ = "cannot hand " + dir_ + " to the postgres user";
      ADD_FAILURE() << error_;
      return;
    }
  }
  if (!CopyClusterTemplate()) {
    ADD_FAILURE() << error_;
    return;
  }
  if (!Start()) ADD_FAILURE() << error_;
}

// initdb takes seconds (about five on the CI machine) and every PostgreSQL test needs a fresh
// cluster; a copy of an initialized one takes a fraction of a second. The first server on a
// machine, for this PostgreSQL build and user, initializes the template into a private
// directory and renames it into place (atomic: a concurrent test either wins the rename or
// copies the winner's); every server then copies it into its own directory.
bool PostgresServer::CopyClusterTemplate() {
  std::error_code ec;
  const auto stamp =
      fs::last_write_time(fs::path(bin_) / "postgres", ec).time_since_epoch().count();
  const std::string key =
      std::to_string(std::hash<std::string>{}(bin_ + "@" + std::to_string(stamp)));
  const fs::path template_dir = fs::temp_directory_path() / ("streamcar-pg-template-" + key + "-" +
                                                             std::to_string(::geteuid()));
  std::string output;
  if (!fs::exists(template_dir / "PG_VERSION", ec)) {
    if (Run({bin_ + "/initdb", "-D", dir_ + "/template", "-U", "streamcar", "--auth=trust",
             "--encoding=UTF8", "--no-locale", "--no-sync"},
            &output) != 0) {
      error_ = "initdb failed: " + output;
      return false;
    }
    fs::rename(dir_ + "/template", template_dir, ec);
    if (ec && !fs::exists(template_dir / "PG_VERSION")) {
      // Not placed and nobody else's either (another file system?): this server uses its own.
      fs::rename(dir_ + "/template", dir_ + "/data", ec);
      if (ec) error_ = "cannot move the initialized cluster: " + ec.message();
      return !ec;
    }
    if (ec) fs::remove_all(dir_ + "/template", ec);  // another test placed it first
  }
  if (Run({"cp", "-a", template_dir.string(), dir_ + "/data"}, &output) != 0) {
    error_ = "copying the initialized cluster " + template_dir.string() + " failed: " + output;
    return false;
  }
  return true;
}

PostgresServer::~PostgresServer() {
  Stop();
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

std::string PostgresServer::url() const {
  return "postgres://streamcar@127.0.0.1:" + std::to_string(port_) + "/postgres";
}

bool PostgresServer::Start() {
  std::string server_options = "-p " + std::to_string(port_) + " -k " + dir_ +
                               " -c listen_addresses=127.0.0.1 -c max_connections=50";
  if (!options_.fsync) server_options += " -c fsync=off";
  std::string output;
  if (Run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-l", dir_ + "/server.log", "-w", "-t", "60",
           "-o", server_options, "start"},
          &output) != 0) {
    std::ifstream log(dir_ + "/server.log");
    std::stringstream text;
    text << log.rdbuf();
    error_ = "pg_ctl start failed: " + output + "\n" + text.str();
    return false;
  }
  running_ = true;
  return true;
}

void PostgresServer::Stop() {
  if (!running_) return;
  std::string output;
  Run({bin_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "-t", "60", "stop"},
      &output);
  running_ = false;
}

bool PostgresServer::Restart() {
  Stop();
  return Start();
}

std::string PostgresServer::Psql(const std::string& sql) const {
  std::string output;
  if (Run({bin_ + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url(), "-c", sql},
          &output) != 0) {
    ADD_FAILURE() << "psql failed: " << output;
    return "";
  }
  return output;
}

int PostgresServer::Run(const std::vector<std::string>& argv, std::string* output) const {
  std::vector<std::string> args;
  if (as_postgres_user_) args = {"runuser", "-u", "postgres", "--"};
  args.insert(args.end(), argv.begin(), argv.end());
  const std::string out_path = dir_ + "/command.out";
  // The server's working directory must be readable by the postgres user.
  const pid_t pid =
      SpawnChild({.argv = args, .stdout_path = out_path, .stderr_path = out_path, .cwd = dir_});
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(out_path);
  std::stringstream text;
  text << in.rdbuf();
  *output = text.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace streamcar::testing

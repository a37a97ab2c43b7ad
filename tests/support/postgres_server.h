#pragma once
// A real PostgreSQL server for one test: initdb into a temporary directory, a free port, its Unix
// socket in that directory, stopped and removed at the end. Like redis_server.h: no mock.
//
// The binaries come from STREAMCAR_TEST_PG_BIN, else the newest /usr/lib/postgresql/<v>/bin
// (Debian), else PATH. initdb refuses to run as root: as root the server runs as the `postgres`
// system user (runuser), the directory handed over to it.

#include <string>
#include <vector>

namespace streamcar::testing {

struct PostgresServerOptions {
  // Off for tests (a commit still reaches the OS at once, so it survives a crash of the server,
  // only not a power cut; much faster); the
  // benchmark turns it on to measure what a real deployment pays.
  bool fsync = false;
};

class PostgresServer {
 public:
  explicit PostgresServer(PostgresServerOptions options = {});
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // False (with the reason in error()) when the server could not be made; the constructor also
  // fails the current test then.
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  int port() const { return port_; }
  // A libpq URI for the `postgres` database as the `streamcar` superuser (trust auth, TCP).
  std::string url() const;

  // pg_ctl stop -m immediate (like a crash), then start again on the same port and data.
  bool Restart();
  // Runs SQL through psql; its output, or "" after failing the test.
  std::string Psql(const std::string& sql) const;

 private:
  // Runs argv (as the postgres user when we are root); the exit code; output to *output.
  int Run(const std::vector<std::string>& argv, std::string* output) const;
  // Fills dir_/data with an initialized cluster (see the .cc); false with error_ set.
  bool CopyClusterTemplate();
  bool Start();
  void Stop();

  PostgresServerOptions options_;
  std::string bin_;
  std::string dir_;
  int port_ = 0;
  bool as_postgres_user_ = false;
  bool running_ = false;
  std::string error_;
};

// The directory holding initdb and pg_ctl, or "" when PostgreSQL is not installed.
std::string PostgresBinDir();

}  // namespace streamcar::testing

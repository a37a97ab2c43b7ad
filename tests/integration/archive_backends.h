#pragma once
// The archive backends the conformance suite and the folder tests run against: each gives a
// URL for OpenArchive backed by a real store made for the test (a SQLite file in a temporary
// directory, a private PostgreSQL server).

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "sidecar/log/archive_store.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {

class SqliteBackend {
 public:
  static constexpr const char* kName = "sqlite";
  SqliteBackend() : dir_(MakeTempDir("streamcar-archive-")) {}
  ~SqliteBackend() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string url() const { return "sqlite://" + dir_ + "/archive.db"; }

 private:
  std::string dir_;
};

#ifdef STREAMCAR_HAVE_POSTGRES
class PostgresBackend {
 public:
  static constexpr const char* kName = "postgres";
  std::string url() const { return server_.url(); }
  PostgresServer& server() { return server_; }

 private:
  PostgresServer server_;
};
#endif

// Every backend this build has, for TYPED_TEST_SUITE(Suite, Backends, BackendNames).
#ifdef STREAMCAR_HAVE_POSTGRES
using Backends = ::testing::Types<SqliteBackend, PostgresBackend>;
#else
using Backends = ::testing::Types<SqliteBackend>;
#endif
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int /*index*/) {
    return T::kName;
  }
};

// Opens `url`, failing the test (and returning null) when it cannot.
inline std::unique_ptr<log::ArchiveStore> OpenOrFail(const std::string& url) {
  auto store = log::OpenArchive(url);
  if (!store.ok()) {
    ADD_FAILURE() << "OpenArchive(" << url << "): " << store.status().ToString();
    return nullptr;
  }
  return std::move(*store);
}

}  // namespace streamcar::testing

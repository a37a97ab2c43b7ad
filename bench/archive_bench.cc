// The archive's throughput (issue 16's targets): folds of 100-byte entries, 1,000 per batch, into
// SQLite and (when built in) PostgreSQL, and a window read of 10,000 archived entries through
// ArchiveStore::Read. Prints one JSON line.
//
//   archive_bench [--entries N] [--postgres DSN]
// Without --postgres, a private PostgreSQL server is started (fsync on, as in production) when
// the build has PostgreSQL support. SQLite runs in a temporary directory (synchronous=FULL).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "sidecar/log/archive_store.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"

namespace {

using streamcar::StreamEntry;
using streamcar::log::ArchiveStore;
using Clock = std::chrono::steady_clock;

constexpr int kBatch = 1000;
constexpr int kWindow = 10000;

struct Result {
  double fold_per_second = 0;
  double read_ms = 0;
  bool ok = false;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Entries of about 100 bytes: two fields, ids one millisecond apart from a fixed start.
std::vector<StreamEntry> Batch(int64_t first_ms, int count) {
  std::vector<StreamEntry> batch(count);
  for (int i = 0; i < count; ++i) {
    batch[i].id = std::to_string(first_ms + i) + "-0";
    batch[i].fields = {{"type", "order.created"}, {"data", std::string(79, 'x')}};
  }
  return batch;
}

Result Measure(const std::string& url, int entries) {
  Result result;
  auto opened = streamcar::log::OpenArchive(url);
  if (!opened.ok()) {
    std::fprintf(stderr, "archive_bench: %s\n", opened.status().ToString().c_str());
    return result;
  }
  ArchiveStore& store = **opened;
  const int64_t start_ms = 1700000000000;
  const auto started = Clock::now();
  for (int done = 0; done < entries; done += kBatch) {
    auto folded = store.Fold("bench", Batch(start_ms + done, std::min(kBatch, entries - done)), 1);
    if (!folded.ok()) {
      std::fprintf(stderr, "archive_bench: fold: %s\n", folded.status().ToString().c_str());
      return result;
    }
  }
  result.fold_per_second = entries / Seconds(Clock::now() - started);
  // A window of 10,000 from the middle of the archive; the median of 5 reads.
  const std::string after = std::to_string(start_ms + entries / 4) + "-0";
  std::vector<double> times;
  for (int run = 0; run < 5; ++run) {
    const auto read_started = Clock::now();
    auto page = store.Read("bench", after, "", kWindow);
    times.push_back(Seconds(Clock::now() - read_started) * 1000);
    if (!page.ok() || page->entries.size() != static_cast<size_t>(std::min(kWindow, entries))) {
      std::fprintf(stderr, "archive_bench: the window read failed or came back short\n");
      return result;
    }
  }
  std::sort(times.begin(), times.end());
  result.read_ms = times[times.size() / 2];
  result.ok = true;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  int entries = 200000;
  std::string postgres_dsn;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--entries" && i + 1 < argc) {
      entries = std::max(std::atoi(argv[++i]), kWindow * 2);
    } else if (arg == "--postgres" && i + 1 < argc) {
      postgres_dsn = argv[++i];
    } else {
      std::fprintf(stderr, "usage: archive_bench [--entries N] [--postgres DSN]\n");
      return 2;
    }
  }
  const std::string dir = streamcar::testing::MakeTempDir("streamcar-archive-bench-");
  const Result sqlite = Measure("sqlite://" + dir + "/bench.db", entries);
  std::string json = "{\"entries\":" + std::to_string(entries) +
                     ",\"batch\":" + std::to_string(kBatch) + ",\"entry_bytes\":100" +
                     ",\"fold_sqlite_entries_per_s\":" + std::to_string(sqlite.fold_per_second) +
                     ",\"read_10000_sqlite_ms\":" + std::to_string(sqlite.read_ms);
  bool ok = sqlite.ok;
#ifdef STREAMCAR_HAVE_POSTGRES
  std::unique_ptr<streamcar::testing::PostgresServer> server;
  if (postgres_dsn.empty()) {
    server = std::make_unique<streamcar::testing::PostgresServer>(
        streamcar::testing::PostgresServerOptions{.fsync = true});
    if (!server->ok()) {
      std::fprintf(stderr, "archive_bench: %s\n", server->error().c_str());
      return 1;
    }
    postgres_dsn = server->url();
  }
  const Result postgres = Measure(postgres_dsn, entries);
  ok = ok && postgres.ok;
  json += ",\"fold_postgres_entries_per_s\":" + std::to_string(postgres.fold_per_second) +
          ",\"read_10000_postgres_ms\":" + std::to_string(postgres.read_ms);
#else
  if (!postgres_dsn.empty()) {
    std::fprintf(stderr, "archive_bench: this build has no PostgreSQL support\n");
    return 2;
  }
#endif
  std::printf("%s}\n", json.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return ok ? 0 : 1;
}

// The merge-read with the real pieces: a SQLite archive and the real ArchiveFolder folding and
// trimming while entries are appended and readers page through a window again and again.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "sidecar/log/archive_folder.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"
#include "tests/support/redis_server.h"

namespace streamcar::log {
namespace {

using streamcar::testing::MakeTempDir;
using streamcar::testing::RedisServer;

class LogReaderArchiveTest : public ::testing::Test {
 protected:
  LogReaderArchiveTest() : dir_(MakeTempDir("streamcar-reader-archive-")) {}
  ~LogReaderArchiveTest() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<redis::Session> NewSession() {
    auto session = std::make_unique<redis::Session>(server_.ClientOptions(), "test", &health_);
    StopSignal stop;
    EXPECT_TRUE(session->EnsureConnected(stop).ok());
    return session;
  }

  std::string dir_;
  RedisServer server_;
  redis::RedisHealth health_;
};

TEST_F(LogReaderArchiveTest, WindowStaysExactWhileTheFolderFoldsAndTrims) {
  auto opened = OpenArchive("sqlite://" + dir_ + "/archive.db");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ArchiveStore* archive = opened->get();
  std::vector<std::string> window;
  for (int i = 1; i <= 2000; ++i) {
    window.emplace_back(
        server_.Run({"XADD", "feed", std::to_string(1000 + i) + "-0", "i", std::to_string(i)})
            .view()
            .Str());
  }
  const std::string until = FormatId(*Successor(*ParseId(window.back())));

  std::atomic<bool> done{false};
  // Appends keep moving the retention rule's trim point (keep the newest 50) over the window.
  std::thread appender([&] {
    auto session = NewSession();
    for (int i = 1; i <= 2500 && !done.load(); ++i) {
      auto added = session->Run(
          redis::Command("XADD").Arg("feed").Arg("*").Arg("late").Arg(std::to_string(i)));
      EXPECT_TRUE(added.ok());
    }
  });
  std::thread folder([&] {
    auto session = NewSession();
    FolderOptions options;
    options.stream = "feed";
    options.holder = "test";
    options.batch = 29;
    options.max_len = 50;
    ArchiveFolder folder(options, archive, nullptr);
    auto token = folder.TakeLease(*session);
    EXPECT_TRUE(token.ok() && *token > 0) << token.status().ToString();
    if (!token.ok()) done = true;
    while (!done.load()) {
      auto batch = folder.FoldBatch(*session, *token);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) done = true;  // ends the readers' loop too
    }
  });

  auto session = NewSession();
  LogReader reader(session.get(), archive);
  std::mt19937 random(5);
  int reads = 0;
  // Read until the whole window has been folded and trimmed from Redis (and at least 5 times).
  while (!done.load() &&
         (reads < 5 ||
          server_.Run({"XRANGE", "feed", "-", window.back(), "COUNT", "1"}).view().Size() > 0)) {
    WindowQuery query{.until = until, .count = 1 + static_cast<int>(random() % 700)};
    std::vector<std::string> got;
    while (true) {
      auto page = reader.Read("feed", query);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (const auto& entry : page->entries) got.push_back(entry.id);
      if (!page->next) break;
      query.after = *page->next;
    }
    EXPECT_EQ(got, window) << "read " << reads << ", count " << query.count;
    ++reads;
    if (got != window || reads > 2000) break;
  }
  done = true;
  appender.join();
  folder.join();
  EXPECT_GE(CompareIds(*archive->Watermark("feed"), window.back()), 0);
  EXPECT_GE(reads, 5);
}

}  // namespace
}  // namespace streamcar::log

// The archive end to end: the real binary folds and trims a stream while entries are added, and
// is killed with SIGKILL again and again at random moments. Whatever a kill interrupts (a fold,
// the W record, a trim), the archive and Redis together must end up holding every entry added
// exactly once: nothing lost, nothing twice.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "sidecar/log/archive_store.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/integration/archive_backends.h"

namespace streamcar::testing {
namespace {

class ArchiveE2eTest : public E2eTest {
 protected:
  std::string Config(const std::string& archive_url) const {
    return "version: 1\nredis:\n  url: " + redis_->url() +
           "\n  command_timeout: 2s\nconsumer:\n  name: folder-1\nadmin:\n  listen: 127.0.0.1:" +
           std::to_string(admin_port_) +
           "\nstreams:\n  - name: feed\n    retention: { max_len: 40, interval: 50ms }\n"
           "    archive: true\narchive:\n  url: \"" +
           archive_url + "\"\n  interval: 50ms\n  batch: 100\n";
  }

  // Adds entries from another thread until stopped; every id added, in order.
  void StartAdding() {
    adder_ = std::thread([this] {
      auto connection = redis_->Connect();
      for (int i = 0; !stop_adding_.load(); ++i) {
        auto reply = connection->RunPipeline({redis::Command("XADD")
                                                  .Arg("feed")
                                                  .Arg("*")
                                                  .Arg("n")
                                                  .Arg(std::to_string(i))
                                                  .Arg("blob")
                                                  .Arg(std::string("\0\xff", 2))});
        ASSERT_TRUE(reply.ok() && !(*reply)[0].IsError());
        std::lock_guard lock(mutex_);
        added_.emplace_back((*reply)[0].view().Str());
        // About 2,000 entries a second: a steady producer, not a flood the folder cannot follow.
        if (i % 10 == 9) std::this_thread::sleep_for(milliseconds(5));
      }
    });
  }
  void StopAdding() {
    stop_adding_ = true;
    if (adder_.joinable()) adder_.join();
  }
  size_t AddedCount() {
    std::lock_guard lock(mutex_);
    return added_.size();
  }

  void KillRepeatedlyThenCheck(const std::string& archive_url) {
    const std::string yaml = Config(archive_url);
    StartAdding();
    std::mt19937 random(12345);
    int kills = 0;
    for (; kills < 8; ++kills) {
      auto sidecar =
          std::make_unique<SidecarProcess>(yaml, std::vector<std::string>{}, admin_port_);
      ASSERT_TRUE(WaitReady()) << sidecar->Logs();
      // Let it fold at least once in this life, then kill it a random moment later: inside a
      // fold, between the fold and the W record, between the record and the trim...
      ASSERT_TRUE(Eventually(
          [&] { return Metric("streamcar_archive_folded_total", {"stream=\"feed\""}) > 0; },
          seconds(20)))
          << sidecar->Logs();
      std::this_thread::sleep_for(milliseconds(random() % 150));  // chaos, not synchronization
      sidecar->Kill();
    }
    StopAdding();
    // A last life finishes the work: Redis holds at most the 40 newest once it has caught up.
    auto last = std::make_unique<SidecarProcess>(yaml, std::vector<std::string>{}, admin_port_);
    ASSERT_TRUE(WaitReady()) << last->Logs();
    ASSERT_TRUE(Eventually([&] { return Len("feed") <= 40; }, seconds(60))) << last->Logs();
    last->Terminate();
    ASSERT_EQ(last->Wait(seconds(20)), 0) << last->Logs();

    auto archive = OpenOrFail(archive_url);
    ASSERT_NE(archive, nullptr);
    std::vector<std::string> seen;
    std::string after;
    while (true) {
      auto page = archive->Read("feed", after, "", 1000);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      if (page->entries.empty()) break;
      for (const auto& entry : page->entries) {
        seen.push_back(entry.id);
        ASSERT_EQ(entry.fields.size(), 2u);
        EXPECT_EQ(entry.fields[1].second, std::string("\0\xff", 2));
      }
      after = seen.back();
    }
    const size_t archived = seen.size();
    auto live = redis_->Run({"XRANGE", "feed", "-", "+"});
    for (size_t i = 0; i < live.view().Size(); ++i) seen.emplace_back(live.view()[i][0].Str());
    std::lock_guard lock(mutex_);
    EXPECT_GT(archived, added_.size() / 2) << "the folder hardly folded anything";
    EXPECT_EQ(seen.size(), added_.size())
        << "archive " << archived << " + redis " << (seen.size() - archived);
    EXPECT_EQ(seen, added_) << "archive then Redis must be every id added, once, in order";
    EXPECT_EQ(kills, 8);
  }

  ~ArchiveE2eTest() override { StopAdding(); }

  std::thread adder_;
  std::atomic<bool> stop_adding_{false};
  std::mutex mutex_;
  std::vector<std::string> added_;
};

TEST_F(ArchiveE2eTest, SqliteArchiveSurvivesRepeatedKillsWithEveryEntryOnce) {
  SqliteBackend backend;
  KillRepeatedlyThenCheck(backend.url());
}

// Issue 16's yardstick: a stream trimmed to 1,000 entries in Redis still answers a window read
// of its first million entries, archive and live tail merged, every entry once and in order.
TEST_F(ArchiveE2eTest, AStreamTrimmedToAThousandStillReadsItsFirstMillion) {
  if (UnderSanitizer()) GTEST_SKIP() << "a million entries take minutes under a sanitizer";
  constexpr int kEntries = 1'000'000;
  auto connection = redis_->Connect();
  for (int start = 0; start < kEntries; start += 10'000) {
    std::vector<redis::Command> pipeline;
    for (int i = start; i < start + 10'000; ++i) {
      // Ids <i+1>-0: the id of entry i is known without reading it back.
      pipeline.push_back(redis::Command("XADD")
                             .Arg("feed")
                             .Arg(std::to_string(i + 1) + "-0")
                             .Arg("n")
                             .Arg(std::to_string(i)));
    }
    auto replies = connection->RunPipeline(pipeline);
    ASSERT_TRUE(replies.ok()) << replies.status().ToString();
    ASSERT_FALSE(replies->back().IsError());
  }
  SqliteBackend backend;
  const std::string yaml =
      "version: 1\nredis:\n  url: " + redis_->url() +
      "\nadmin:\n  listen: 127.0.0.1:" + std::to_string(admin_port_) +
      "\nstreams:\n  - name: feed\n    retention: { max_len: 1000, interval: 200ms }\n"
      "    archive: true\narchive:\n  url: \"" +
      backend.url() + "\"\n  interval: 200ms\n  batch: 10000\n";
  {
    SidecarProcess sidecar(yaml, {}, admin_port_);
    ASSERT_TRUE(WaitReady()) << sidecar.Logs();
    ASSERT_TRUE(Eventually([&] { return Len("feed") <= 1000; }, seconds(300))) << sidecar.Logs();
  }
  EXPECT_EQ(Len("feed"), 1000);

  auto read =
      RunStreamcar({"read", "-c", WriteConfig(yaml), "feed", "--since", "0", "--until",
                    std::to_string(kEntries + 1) + "-0", "--count", std::to_string(kEntries)},
                   {}, seconds(180));
  ASSERT_EQ(read.exit_code, 0) << read.err;
  // One line per entry: "<id> <time> n=<i>".
  int expected = 0;
  size_t line_start = 0;
  while (line_start < read.out.size()) {
    const size_t line_end = read.out.find('\n', line_start);
    const std::string_view line(
        read.out.data() + line_start,
        (line_end == std::string::npos ? read.out.size() : line_end) - line_start);
    const std::string want = std::to_string(expected + 1) + "-0 ";
    ASSERT_EQ(line.substr(0, want.size()), want) << "entry " << expected;
    ++expected;
    if (line_end == std::string::npos) break;
    line_start = line_end + 1;
  }
  EXPECT_EQ(expected, kEntries);
}

// An archive that cannot be opened at start (its directory does not exist yet) does not stop the
// sidecar: it starts, keeps the archived stream untrimmed, and folds once the archive can open.
TEST_F(ArchiveE2eTest, StartsWithoutItsArchiveAndFoldsOnceItIsThere) {
  const std::string dir = MakeTempDir("streamcar-late-archive-");
  std::filesystem::remove_all(dir);
  for (int i = 0; i < 100; ++i) redis_->Run({"XADD", "feed", "*", "n", std::to_string(i)});
  SidecarProcess sidecar(Config("sqlite://" + dir + "/archive.db"), {}, admin_port_);
  ASSERT_TRUE(WaitReady()) << sidecar.Logs();
  ASSERT_TRUE(Eventually(
      [&] { return sidecar.Logs().find("archive cannot be opened") != std::string::npos; },
      seconds(20)))
      << sidecar.Logs();
  EXPECT_EQ(Len("feed"), 100) << "an archived stream is not trimmed without its archive";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(Eventually([&] { return Len("feed") <= 40; }, seconds(60))) << sidecar.Logs();
  EXPECT_GE(Metric("streamcar_archive_folded_total", {"stream=\"feed\""}), 60);
  EXPECT_GT(Metric("streamcar_archive_watermark_seconds", {"stream=\"feed\""}), 0);
  sidecar.Terminate();
  EXPECT_EQ(sidecar.Wait(seconds(20)), 0) << sidecar.Logs();
  std::filesystem::remove_all(dir);
}

#ifdef STREAMCAR_HAVE_POSTGRES
// A PostgreSQL server nobody listens for yet: the sidecar starts and serves, and trims nothing.
TEST_F(ArchiveE2eTest, StartsWhilePostgresIsUnreachable) {
  for (int i = 0; i < 100; ++i) redis_->Run({"XADD", "feed", "*", "n", std::to_string(i)});
  const std::string url = "postgres://streamcar@127.0.0.1:" + std::to_string(FreePort()) + "/log";
  SidecarProcess sidecar(Config(url), {}, admin_port_);
  ASSERT_TRUE(WaitReady()) << sidecar.Logs();
  ASSERT_TRUE(Eventually(
      [&] { return sidecar.Logs().find("archive cannot be opened") != std::string::npos; },
      seconds(20)))
      << sidecar.Logs();
  EXPECT_EQ(Len("feed"), 100) << "an archived stream is not trimmed without its archive";
  sidecar.Terminate();
  EXPECT_EQ(sidecar.Wait(seconds(20)), 0) << sidecar.Logs();
}

TEST_F(ArchiveE2eTest, PostgresArchiveSurvivesRepeatedKillsWithEveryEntryOnce) {
  PostgresBackend backend;
  KillRepeatedlyThenCheck(backend.url());
}
#endif

}  // namespace
}  // namespace streamcar::testing

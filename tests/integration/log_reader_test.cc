// The merge-read (SPEC 10) against a real redis-server and an in-memory archive: windows, pages,
// and no gap and no duplicate while folds and trims run during the read.

#include "sidecar/log/log_reader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "sidecar/log/entry_id.h"
#include "sidecar/redis/stream_ops.h"
#include "tests/integration/fake_archive.h"
#include "tests/support/redis_server.h"

namespace streamcar::log {
namespace {

using streamcar::testing::FakeArchive;
using streamcar::testing::RedisServer;

class LogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { session_ = NewSession(); }

  std::unique_ptr<redis::Session> NewSession() {
    auto session = std::make_unique<redis::Session>(server_.ClientOptions(), "test", &health_);
    StopSignal stop;
    EXPECT_TRUE(session->EnsureConnected(stop).ok());
    return session;
  }

  // Appends n entries with explicit ids <base+i>-0 (i = 1..n, "i" field = i); their ids.
  std::vector<std::string> Fill(int n, uint64_t base = 1000) {
    std::vector<std::string> ids;
    for (int i = 1; i <= n; ++i) {
      const std::string id = std::to_string(base + static_cast<uint64_t>(i)) + "-0";
      server_.Run({"XADD", "feed", id, "i", std::to_string(i)});
      ids.push_back(id);
    }
    return ids;
  }

  // One fold and trim the way the folder does it: up to `max` entries above W into the archive
  // (W advances in the same step), then trim Redis at or below the new W. Returns false when
  // there was nothing to fold.
  static bool FoldAndTrim(redis::Session& session, FakeArchive& archive, int max) {
    const std::string w = archive.CurrentWatermark("feed");
    auto reply = session.Run(
        redis::Command("XRANGE").Arg("feed").Arg("(" + w).Arg("+").Arg("COUNT").Arg(int64_t{max}));
    EXPECT_TRUE(reply.ok());
    if (!reply.ok()) return false;
    auto entries = redis::SubscriptionOps::ParseEntries(reply->view());
    if (entries.empty()) return false;
    auto folded = archive.Fold("feed", entries, 1);
    EXPECT_TRUE(folded.ok());
    const std::string above = FormatId(*Successor(*ParseId(folded->watermark)));
    EXPECT_TRUE(session.Run(redis::Command("XTRIM").Arg("feed").Arg("MINID").Arg(above)).ok());
    return true;
  }

  // Every page of the window, following `next`.
  std::vector<std::string> ReadAll(LogReader& reader, WindowQuery query) {
    std::vector<std::string> ids;
    for (int pages = 0; pages < 10000; ++pages) {
      auto page = reader.Read("feed", query);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (const auto& entry : page->entries) ids.push_back(entry.id);
      if (!page->next) break;
      EXPECT_EQ(*page->next, page->entries.back().id);
      query.after = *page->next;
    }
    return ids;
  }

  static std::vector<std::string> Slice(const std::vector<std::string>& ids, size_t from,
                                        size_t to) {
    return {ids.begin() + static_cast<std::ptrdiff_t>(from),
            ids.begin() + static_cast<std::ptrdiff_t>(to)};
  }

  RedisServer server_;
  redis::RedisHealth health_;
  std::unique_ptr<redis::Session> session_;
};

TEST_F(LogReaderTest, RedisOnlyWindowsAndPages) {
  const auto ids = Fill(25);
  LogReader reader(session_.get(), nullptr);
  WindowQuery query;
  query.count = 10;
  auto first = reader.Read("feed", query);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->entries.size(), 10u);
  EXPECT_EQ(first->entries[0].id, ids[0]);
  ASSERT_TRUE(first->next);
  EXPECT_EQ(*first->next, ids[9]);
  EXPECT_EQ(*first->entries[3].Find("i"), "4");
  EXPECT_EQ(ReadAll(reader, query), ids);
  // Exactly a page left: no `next` after it.
  query.after = ids[14];
  auto last = reader.Read("feed", query);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->entries.size(), 10u);
  EXPECT_FALSE(last->next);
  // [since, until): since inclusive, until exclusive.
  query = WindowQuery{.since = ids[4], .until = ids[9], .count = 100};
  EXPECT_EQ(ReadAll(reader, query), Slice(ids, 4, 9));
  // A bound by milliseconds: "1006" is 1006-0, the 6th entry.
  query = WindowQuery{.since = *ParseBound("1006"), .until = *ParseBound("1008"), .count = 100};
  EXPECT_EQ(ReadAll(reader, query), Slice(ids, 5, 7));
  // An empty window and a window beyond the end.
  query = WindowQuery{.since = ids[9], .until = ids[9]};
  EXPECT_TRUE(reader.Read("feed", query)->entries.empty());
  query = WindowQuery{.since = "99999-0"};
  EXPECT_TRUE(reader.Read("feed", query)->entries.empty());
}

TEST_F(LogReaderTest, CountAndIdsAreValidated) {
  LogReader reader(session_.get(), nullptr);
  for (int count : {0, -1, 10001}) {
    auto page = reader.Read("feed", WindowQuery{.count = count});
    EXPECT_EQ(page.status().code(), StatusCode::kInvalid) << count;
  }
  EXPECT_TRUE(reader.Read("feed", WindowQuery{.count = 10000}).ok());
  EXPECT_EQ(reader.Read("feed", WindowQuery{.since = "x"}).status().code(), StatusCode::kInvalid);
  EXPECT_EQ(reader.Read("feed", WindowQuery{.until = "1"}).status().code(), StatusCode::kInvalid);
  EXPECT_EQ(reader.Read("feed", WindowQuery{.after = "1-"}).status().code(), StatusCode::kInvalid);
}

TEST_F(LogReaderTest, MissingStreamIsEmptyAndWrongTypeIsAClearError) {
  FakeArchive archive;
  LogReader reader(session_.get(), &archive);
  auto page = reader.Read("feed", WindowQuery{});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->entries.empty());
  EXPECT_FALSE(page->next);
  server_.Run({"SET", "feed", "text"});
  auto wrong = reader.Read("feed", WindowQuery{});
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(wrong.status().IsServerError("WRONGTYPE"));
  EXPECT_NE(wrong.status().message().find("\"feed\" holds another type, not a stream"),
            std::string::npos)
      << wrong.status().message();
}

TEST_F(LogReaderTest, WindowsAcrossTheWatermark) {
  const auto ids = Fill(100);
  FakeArchive archive;
  ASSERT_TRUE(FoldAndTrim(*session_, archive, 60));
  ASSERT_EQ(server_.Run({"XLEN", "feed"}).view().Integer(), 40);  // 1..60 only in the archive
  LogReader reader(session_.get(), &archive);
  for (int count : {1, 7, 60, 61, 100, 10000}) {
    EXPECT_EQ(ReadAll(reader, WindowQuery{.count = count}), ids) << count;
  }
  EXPECT_EQ(ReadAll(reader, WindowQuery{.since = ids[10], .until = ids[20], .count = 3}),
            Slice(ids, 10, 20));
  EXPECT_EQ(ReadAll(reader, WindowQuery{.since = ids[50], .until = ids[70], .count = 3}),
            Slice(ids, 50, 70));
  EXPECT_EQ(ReadAll(reader, WindowQuery{.since = ids[70], .count = 3}), Slice(ids, 70, 100));
  // The archive's fields come back as they were appended.
  auto page = reader.Read("feed", WindowQuery{.since = ids[2], .count = 1});
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(*page->entries.at(0).Find("i"), "3");
}

// Large entries: a page stops at kPageByteBudget field bytes whatever `count` says, sets `next`,
// and paging on returns every entry exactly once, from Redis, across the watermark, and with a
// fold and a trim between the steps of every read. An entry larger than the budget comes alone.
TEST_F(LogReaderTest, PagesAreCutByBytes) {
  constexpr size_t kValue = size_t{1} << 20;
  std::vector<std::string> ids;
  for (int i = 1; i <= 40; ++i) {
    const std::string id = std::to_string(1000 + i) + "-0";
    server_.Run({"XADD", "feed", id, "v", std::string(kValue, static_cast<char>('a' + i % 26))});
    ids.push_back(id);
  }
  const size_t per_page = kPageByteBudget / (kValue + 1);  // field name "v" is one byte
  // Pages through the window checking every page's size; the ids read.
  auto read_all = [&](LogReader& reader) {
    std::vector<std::string> read;
    WindowQuery query{.count = 10000};
    for (int pages = 0; pages < 100; ++pages) {
      auto page = reader.Read("feed", query);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      size_t bytes = 0;
      for (const auto& entry : page->entries) {
        bytes += entry.fields.at(0).second.size() + 1;
        EXPECT_EQ(entry.fields.at(0).second.size(), kValue);
        read.push_back(entry.id);
      }
      EXPECT_LE(bytes, kPageByteBudget);
      EXPECT_LE(page->entries.size(), per_page);
      if (!page->next) break;
      query.after = *page->next;
    }
    return read;
  };

  LogReader redis_only(session_.get(), nullptr);
  auto first = redis_only.Read("feed", WindowQuery{.count = 10000});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->entries.size(), per_page);
  ASSERT_TRUE(first->next);
  EXPECT_EQ(*first->next, ids[per_page - 1]);
  EXPECT_EQ(read_all(redis_only), ids);

  FakeArchive archive;
  ASSERT_TRUE(FoldAndTrim(*session_, archive, 10));
  LogReader merged(session_.get(), &archive);
  EXPECT_EQ(read_all(merged), ids);

  auto folder = NewSession();
  archive.before_read = [&] { FoldAndTrim(*folder, archive, 3); };
  EXPECT_EQ(read_all(merged), ids);
  archive.before_read = nullptr;

  // Every entry archived: the archive too is read in byte-bounded chunks (a page's worth plus
  // at most one entry), not count + 1 entries at once.
  while (FoldAndTrim(*session_, archive, 1000)) {
  }
  EXPECT_EQ(read_all(merged), ids);
  EXPECT_LE(archive.largest_read_bytes(), kPageByteBudget + kValue + 1);

  const std::string big_id = "2000-0";
  server_.Run({"XADD", "feed", big_id, "v", std::string(kPageByteBudget + 1, 'z')});
  server_.Run({"XADD", "feed", "2001-0", "v", "small"});
  auto big = merged.Read("feed", WindowQuery{.since = big_id, .count = 10});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_EQ(big->entries.size(), 1u);
  EXPECT_EQ(big->entries[0].id, big_id);
  EXPECT_EQ(big->next, big_id);
}

// A few small entries followed by many large ones: the chunk after the small ones must not be
// sized by their average (which would ask for thousands of large entries in one reply). Each
// chunk is at most twice the entries read before it, from Redis and from the archive alike.
TEST_F(LogReaderTest, SmallEntriesBeforeLargeOnesDoNotBlowTheBudget) {
  constexpr size_t kBudget = 64 * 1024;
  constexpr size_t kLarge = 4096;
  std::vector<std::string> ids = Fill(16);  // "i" = 1..16: a few bytes each
  for (int i = 1; i <= 300; ++i) {
    const std::string id = std::to_string(5000 + i) + "-0";
    server_.Run({"XADD", "feed", id, "v", std::string(kLarge, 'x')});
    ids.push_back(id);
  }
  // The largest reply Redis gave (an XRANGE of 16 small and then n large entries holds n x 4 KiB).
  auto largest_xrange = [&](LogReader& reader) {
    auto page = reader.Read("feed", WindowQuery{.count = 10000});
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    EXPECT_TRUE(page.ok() && page->next.has_value());
    return page.ok() ? page->entries.size() : 0;
  };
  LogReader redis_only(session_.get(), nullptr, kBudget);
  const size_t first_page = largest_xrange(redis_only);
  // The page itself holds the budget's worth: 16 small entries and 15 large ones.
  EXPECT_EQ(first_page, 16u + kBudget / (kLarge + 1));

  FakeArchive archive;
  while (FoldAndTrim(*session_, archive, 1000)) {
  }
  LogReader merged(session_.get(), &archive, kBudget);
  auto page = merged.Read("feed", WindowQuery{.count = 10000});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->entries.size(), first_page);
  // 16 small, then at most 32 large in one read: 2 x the entries read before, not 10,000.
  EXPECT_LE(archive.largest_read_bytes(), 32 * (kLarge + 1));
}

// A fold and a trim at the worst moments of a read: between reading W1 and Redis, and between
// Redis and the archive snapshot. Every page of every window must still be exact.
TEST_F(LogReaderTest, FoldAndTrimBetweenTheStepsOfARead) {
  for (int chunk : {1, 5, 40}) {
    for (const char* moment : {"before_watermark", "before_read"}) {
      SCOPED_TRACE(std::string(moment) + " chunk " + std::to_string(chunk));
      server_.Run({"DEL", "feed"});
      const auto ids = Fill(200);
      FakeArchive archive;
      auto folder = NewSession();
      auto hook = [&] { FoldAndTrim(*folder, archive, chunk); };
      (std::string(moment) == "before_watermark" ? archive.before_watermark : archive.before_read) =
          hook;
      LogReader reader(session_.get(), &archive);
      EXPECT_EQ(ReadAll(reader, WindowQuery{.count = 9}), ids);
      EXPECT_EQ(ReadAll(reader, WindowQuery{.since = ids[120], .until = ids[190], .count = 4}),
                Slice(ids, 120, 190));
    }
  }
}

// The loop the issue asks for: readers page through the whole stream again and again while a
// folder folds and trims in random steps on its own thread; every complete read is exact.
TEST_F(LogReaderTest, ReadsStayExactWhileFoldsAndTrimsRun) {
  const auto ids = Fill(3000);
  FakeArchive archive;
  std::atomic<bool> done{false};
  std::thread folder([&] {
    auto session = NewSession();
    std::mt19937 random(7);
    while (!done.load() && FoldAndTrim(*session, archive, 1 + static_cast<int>(random() % 50))) {
    }
    done = true;
  });
  auto reader_session = NewSession();
  LogReader reader(reader_session.get(), &archive);
  int reads = 0;
  std::mt19937 random(11);
  while (!done.load() || reads < 3) {
    const int count = 1 + static_cast<int>(random() % 300);
    const auto read = ReadAll(reader, WindowQuery{.count = count});
    EXPECT_EQ(read, ids) << "count " << count;
    ++reads;
    if (read != ids) break;
  }
  done = true;  // on a failure, stop the folder before the thread is joined
  folder.join();
  EXPECT_GE(reads, 3);
}

}  // namespace
}  // namespace streamcar::log

// The archive's guarantees (SPEC 10), stated once as tests and run against every backend built
// in: SQLite always, PostgreSQL when the build has it (a private server per test, no mock).

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/log/archive_store.h"
#include "tests/integration/archive_backends.h"

namespace streamcar::testing {
namespace {

using log::ArchiveStore;

StreamEntry Entry(const std::string& id, std::vector<std::pair<std::string, std::string>> fields) {
  StreamEntry entry;
  entry.id = id;
  entry.fields = std::move(fields);
  return entry;
}

StreamEntry Simple(const std::string& id) { return Entry(id, {{"n", id}}); }

// Every archived entry of `stream`, read page by page (`page` at a time).
std::vector<StreamEntry> ReadAll(ArchiveStore& store, const std::string& stream, int page = 1000) {
  std::vector<StreamEntry> out;
  std::string after;
  while (true) {
    auto read = store.Read(stream, after, "", page);
    EXPECT_TRUE(read.ok()) << read.status().ToString();
    if (!read.ok() || read->entries.empty()) break;
    for (auto& e : read->entries) out.push_back(std::move(e));
    after = out.back().id;
  }
  return out;
}

std::vector<std::string> Ids(const std::vector<StreamEntry>& entries) {
  std::vector<std::string> ids;
  for (const auto& e : entries) ids.push_back(e.id);
  return ids;
}

template <typename Backend>
class ArchiveConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrFail(backend_.url());
    ASSERT_NE(store_, nullptr);
  }
  Backend backend_;
  std::unique_ptr<ArchiveStore> store_;
};

TYPED_TEST_SUITE(ArchiveConformanceTest, Backends, BackendNames);

TYPED_TEST(ArchiveConformanceTest, NothingFoldedReadsAsZeroWatermark) {
  auto w = this->store_->Watermark("orders");
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(*w, "0-0");
  auto page = this->store_->Read("orders", "", "", 10);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->watermark, "0-0");
  EXPECT_TRUE(page->entries.empty());
}

TYPED_TEST(ArchiveConformanceTest, FoldIsIdempotent) {
  const std::vector<StreamEntry> batch = {Simple("100-0"), Simple("100-1"), Simple("205-0")};
  auto first = this->store_->Fold("orders", batch, 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->watermark, "205-0");
  EXPECT_EQ(first->inserted, 3);

  auto again = this->store_->Fold("orders", batch, 1);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->watermark, "205-0");
  EXPECT_EQ(again->inserted, 0);
  // A fold that overlaps the first one stores only what is new.
  auto overlap = this->store_->Fold("orders", {Simple("205-0"), Simple("300-0")}, 1);
  ASSERT_TRUE(overlap.ok());
  EXPECT_EQ(overlap->inserted, 1);

  EXPECT_EQ(Ids(ReadAll(*this->store_, "orders")),
            (std::vector<std::string>{"100-0", "100-1", "205-0", "300-0"}));
}

TYPED_TEST(ArchiveConformanceTest, RefoldKeepsTheFirstCopy) {
  ASSERT_TRUE(this->store_->Fold("orders", {Entry("1-0", {{"v", "first"}})}, 1).ok());
  ASSERT_TRUE(this->store_->Fold("orders", {Entry("1-0", {{"v", "second"}})}, 1).ok());
  auto all = ReadAll(*this->store_, "orders");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].fields, (std::vector<std::pair<std::string, std::string>>{{"v", "first"}}));
}

TYPED_TEST(ArchiveConformanceTest, WatermarkNeverMovesBackwards) {
  ASSERT_TRUE(this->store_->Fold("orders", {Simple("10-0"), Simple("20-5")}, 1).ok());
  auto lower = this->store_->Fold("orders", {Simple("5-0")}, 1);
  ASSERT_TRUE(lower.ok()) << lower.status().ToString();
  EXPECT_EQ(lower->watermark, "20-5");
  auto empty = this->store_->Fold("orders", {}, 1);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->watermark, "20-5");
  EXPECT_EQ(*this->store_->Watermark("orders"), "20-5");
  // The lower entry is archived all the same (it is at or below W).
  EXPECT_EQ(Ids(ReadAll(*this->store_, "orders")),
            (std::vector<std::string>{"5-0", "10-0", "20-5"}));
  // Sequence numbers compare as numbers, not text: 20-10 is above 20-5.
  auto higher = this->store_->Fold("orders", {Simple("20-10")}, 1);
  ASSERT_TRUE(higher.ok());
  EXPECT_EQ(higher->watermark, "20-10");
}

TYPED_TEST(ArchiveConformanceTest, WindowReadsRoundTripBytesAndRepeatedFields) {
  const std::string binary("\0\x01\xff\xfe\r\n{\"x\":1}", 13);
  std::vector<StreamEntry> batch;
  for (int i = 0; i < 250; ++i) {
    const std::string id = std::to_string(1000 + i / 3) + "-" + std::to_string(i % 3);
    batch.push_back(Entry(id, {{"name", "a"},
                               {"name", "b"},  // repeated, order kept
                               {"", ""},       // empty name and value
                               {"bin", binary + std::to_string(i)},
                               {std::string("k\0ey", 4), std::string(300, 'x')}}));
  }
  batch.push_back(Entry("2000-0", {}));  // an entry with no fields
  ASSERT_TRUE(this->store_->Fold("orders", batch, 1).ok());

  // Every page in order, 7 at a time, is exactly what was folded.
  auto all = ReadAll(*this->store_, "orders", 7);
  ASSERT_EQ(all.size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_EQ(all[i].id, batch[i].id);
    EXPECT_EQ(all[i].fields, batch[i].fields) << "entry " << batch[i].id;
  }

  // `after` and `until` are exclusive; `count` caps the page; W comes with every page.
  auto window = this->store_->Read("orders", "1010-0", "1012-1", 100);
  ASSERT_TRUE(window.ok());
  EXPECT_EQ(window->watermark, "2000-0");
  EXPECT_EQ(Ids(window->entries),
            (std::vector<std::string>{"1010-1", "1010-2", "1011-0", "1011-1", "1011-2", "1012-0"}));
  auto capped = this->store_->Read("orders", "1010-0", "", 2);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(Ids(capped->entries), (std::vector<std::string>{"1010-1", "1010-2"}));
  auto past_end = this->store_->Read("orders", "2000-0", "", 10);
  ASSERT_TRUE(past_end.ok());
  EXPECT_TRUE(past_end->entries.empty());
  auto empty_window = this->store_->Read("orders", "1010-0", "1010-1", 10);
  ASSERT_TRUE(empty_window.ok());
  EXPECT_TRUE(empty_window->entries.empty());
  // A window of ids in the middle of a millisecond.
  auto until_only = this->store_->Read("orders", "", "1000-2", 10);
  ASSERT_TRUE(until_only.ok());
  EXPECT_EQ(Ids(until_only->entries), (std::vector<std::string>{"1000-0", "1000-1"}));
  // Streams do not see each other.
  auto other = this->store_->Read("other", "", "", 10);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->entries.empty());
  EXPECT_EQ(other->watermark, "0-0");
}

TYPED_TEST(ArchiveConformanceTest, IdsKeepTheirOrderOverTheWholeUnsignedRange) {
  // Redis ids are two unsigned 64-bit numbers; SQL has only signed ones.
  const std::vector<std::string> ids = {"0-1",
                                        "1-0",
                                        "9223372036854775807-0",
                                        "9223372036854775808-0",
                                        "18446744073709551615-0",
                                        "18446744073709551615-9223372036854775808",
                                        "18446744073709551615-18446744073709551615"};
  std::vector<StreamEntry> batch;
  for (const auto& id : ids) batch.push_back(Simple(id));
  auto folded = this->store_->Fold("orders", batch, 1);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded->watermark, ids.back());
  EXPECT_EQ(Ids(ReadAll(*this->store_, "orders", 2)), ids);
  auto middle = this->store_->Read("orders", "1-0", "18446744073709551615-0", 10);
  ASSERT_TRUE(middle.ok());
  EXPECT_EQ(Ids(middle->entries),
            (std::vector<std::string>{"9223372036854775807-0", "9223372036854775808-0"}));
}

TYPED_TEST(ArchiveConformanceTest, StaleFolderIsRefusedByItsToken) {
  ASSERT_TRUE(this->store_->Fold("orders", {Simple("10-0")}, 5).ok());
  auto stale = this->store_->Fold("orders", {Simple("11-0"), Simple("12-0")}, 4);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kFatal);
  EXPECT_NE(stale.status().message().find("fenced"), std::string::npos);
  // Nothing of the refused fold was written, and W did not move.
  EXPECT_EQ(Ids(ReadAll(*this->store_, "orders")), (std::vector<std::string>{"10-0"}));
  EXPECT_EQ(*this->store_->Watermark("orders"), "10-0");
  // The same token folds again; a higher one too, and then 5 is stale.
  ASSERT_TRUE(this->store_->Fold("orders", {Simple("11-0")}, 5).ok());
  ASSERT_TRUE(this->store_->Fold("orders", {Simple("12-0")}, 6).ok());
  EXPECT_FALSE(this->store_->Fold("orders", {Simple("13-0")}, 5).ok());
  // Tokens are per stream.
  EXPECT_TRUE(this->store_->Fold("payments", {Simple("1-0")}, 1).ok());
  // A second store on the same URL (another replica) is fenced by the same record.
  auto replica = OpenOrFail(this->backend_.url());
  ASSERT_NE(replica, nullptr);
  auto from_replica = replica->Fold("orders", {Simple("14-0")}, 3);
  EXPECT_EQ(from_replica.status().code(), StatusCode::kFatal);
  EXPECT_EQ(Ids(ReadAll(*this->store_, "orders")),
            (std::vector<std::string>{"10-0", "11-0", "12-0"}));
}

TYPED_TEST(ArchiveConformanceTest, ConcurrentFoldersOnlyTheHigherTokenWritesAfterItAppears) {
  // Two folders on two connections, as two replicas would be: the old one (token 1) keeps
  // folding while the new one (token 2) starts. From the new one's first commit on, every fold
  // of the old one is refused and writes nothing.
  auto other = OpenOrFail(this->backend_.url());
  ASSERT_NE(other, nullptr);
  std::atomic<bool> new_started{false};
  std::atomic<bool> done{false};
  std::atomic<int> refused_count{0};
  std::vector<std::string> old_written;
  std::vector<std::string> old_refused;
  bool old_wrote_after_refusal = false;
  std::thread old_folder([&] {
    for (int i = 0; !done.load(); ++i) {
      const std::string id = std::to_string(1000 + i) + "-1";  // odd sequence: the old folder's
      auto result = this->store_->Fold("orders", {Simple(id)}, 1);
      if (result.ok()) {
        if (!old_refused.empty()) old_wrote_after_refusal = true;
        old_written.push_back(id);
      } else {
        EXPECT_EQ(result.status().code(), StatusCode::kFatal) << result.status().ToString();
        old_refused.push_back(id);
        ++refused_count;
      }
      if (i == 5) new_started = true;
      // Pacing, not synchronization: SQLite's busy handler sleeps while it waits for the write
      // lock, so a folder that took the lock back at once would starve the other connection.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<std::string> new_written;
  while (!new_started.load()) std::this_thread::yield();
  for (int i = 0; i < 20; ++i) {
    const std::string id = std::to_string(1000 + i) + "-2";
    auto result = other->Fold("orders", {Simple(id)}, 2);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    new_written.push_back(id);
  }
  // The old folder keeps trying until it has been refused a few times.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (refused_count.load() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  done = true;
  old_folder.join();

  EXPECT_FALSE(old_wrote_after_refusal);
  EXPECT_GE(old_refused.size(), 3u);
  std::set<std::string> expected(old_written.begin(), old_written.end());
  expected.insert(new_written.begin(), new_written.end());
  const auto archived = Ids(ReadAll(*this->store_, "orders"));
  EXPECT_EQ(std::set<std::string>(archived.begin(), archived.end()), expected);
  for (const auto& id : old_refused) {
    EXPECT_EQ(expected.count(id), 0u) << "a refused fold wrote " << id;
  }
}

TYPED_TEST(ArchiveConformanceTest, ReopenAfterCloseKeepsEverything) {
  std::vector<StreamEntry> batch;
  for (int i = 1; i <= 100; ++i) batch.push_back(Entry(std::to_string(i) + "-0", {{"i", "x"}}));
  ASSERT_TRUE(this->store_->Fold("orders", batch, 7).ok());
  this->store_.reset();
  auto reopened = OpenOrFail(this->backend_.url());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(*reopened->Watermark("orders"), "100-0");
  EXPECT_EQ(ReadAll(*reopened, "orders").size(), 100u);
  // The fence survives too.
  EXPECT_EQ(reopened->Fold("orders", {Simple("101-0")}, 6).status().code(), StatusCode::kFatal);
  EXPECT_TRUE(reopened->Fold("orders", {Simple("101-0")}, 7).ok());
}

// `openers` threads open `url` at the same moment and fold one entry each; returns what failed.
std::vector<std::string> OpenAtOnce(const std::string& url, int openers, const std::string& id) {
  std::vector<std::string> failures(openers);
  std::vector<std::thread> threads;
  for (int i = 0; i < openers; ++i) {
    threads.emplace_back([&, i] {
      auto store = log::OpenArchive(url);
      if (!store.ok()) {
        failures[i] = "open: " + store.status().ToString();
        return;
      }
      auto folded = (*store)->Fold("orders", {Simple(id)}, 1);
      if (!folded.ok()) failures[i] = "fold: " + folded.status().ToString();
    });
  }
  for (auto& t : threads) t.join();
  std::erase(failures, "");
  return failures;
}

// Replicas, and the sidecar's own reader, folder and API, open one archive at the same moment
// (a pod's start): none may fail on the others' locks.
TYPED_TEST(ArchiveConformanceTest, ManyOpeningAtOnceAllSucceed) {
  this->store_.reset();
  for (int round = 1; round <= 5; ++round) {
    EXPECT_EQ(OpenAtOnce(this->backend_.url(), 8, std::to_string(round) + "-0"),
              std::vector<std::string>{})
        << "round " << round;
  }
  auto reopened = OpenOrFail(this->backend_.url());
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(*reopened->Watermark("orders"), "5-0");
}

// The same on a file nobody has opened yet: SQLite's switch to WAL takes an exclusive lock and
// reports the others busy without waiting on the busy handler (a CI run lost a test to it).
TEST(SqliteArchiveTest, ManyOpeningAFreshFileAtOnceAllSucceed) {
  for (int round = 1; round <= 20; ++round) {
    SqliteBackend fresh;
    EXPECT_EQ(OpenAtOnce(fresh.url(), 8, "1-0"), std::vector<std::string>{}) << "round " << round;
  }
}

TYPED_TEST(ArchiveConformanceTest, BadIdsAreRefusedWritingNothing) {
  auto bad = this->store_->Fold("orders", {Simple("1-0"), Simple("not-an-id")}, 1);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalid);
  EXPECT_TRUE(ReadAll(*this->store_, "orders").empty());
  EXPECT_EQ(this->store_->Read("orders", "x", "", 1).status().code(), StatusCode::kInvalid);
}

TEST(OpenArchiveTest, RefusesWhatItCannotOpen) {
  EXPECT_EQ(log::OpenArchive("mysql://u:secret@h/db").status().code(), StatusCode::kInvalid);
  EXPECT_EQ(log::OpenArchive("mysql://u:secret@h/db").status().message().find("secret"),
            std::string::npos);
  EXPECT_EQ(log::OpenArchive("sqlite://relative.db").status().code(), StatusCode::kInvalid);
  EXPECT_EQ(log::OpenArchive("sqlite:///nonexistent-dir/x/archive.db").status().code(),
            StatusCode::kIo);
#ifdef STREAMCAR_HAVE_POSTGRES
  // Nothing listens there.
  EXPECT_EQ(log::OpenArchive("postgres://nobody@127.0.0.1:" + std::to_string(FreePort()) + "/x")
                .status()
                .code(),
            StatusCode::kIo);
#else
  auto pg = log::OpenArchive("postgres://u@127.0.0.1:5432/db");
  EXPECT_EQ(pg.status().code(), StatusCode::kInvalid);
  EXPECT_NE(pg.status().message().find("this build has no PostgreSQL support"), std::string::npos);
#endif
}

#ifdef STREAMCAR_HAVE_POSTGRES
TEST(PostgresArchiveTest, ComesBackAfterTheServerRestarts) {
  PostgresBackend backend;
  auto store = OpenOrFail(backend.url());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Fold("orders", {Simple("1-0")}, 1).ok());
  ASSERT_TRUE(backend.server().Restart());
  // The connection was lost: the store makes a new one (at once, or on the next call).
  auto folded = store->Fold("orders", {Simple("2-0")}, 1);
  if (!folded.ok()) {
    EXPECT_EQ(folded.status().code(), StatusCode::kIo);
    folded = store->Fold("orders", {Simple("2-0")}, 1);
  }
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded->watermark, "2-0");
  auto page = store->Read("orders", "", "", 10);
  if (!page.ok()) page = store->Read("orders", "", "", 10);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(Ids(page->entries), (std::vector<std::string>{"1-0", "2-0"}));
}
#endif

}  // namespace
}  // namespace streamcar::testing

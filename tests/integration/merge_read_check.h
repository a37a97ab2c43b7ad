#pragma once
// The merge-read check (SPEC 10) shared by LogMergeReadTest (every archive backend, standalone
// Redis) and the guarantee suite (every topology, SQLite; tests/e2e/guarantee_merge_read_test.cc):
// a reader thread reads the whole window page by page, pass after pass, while another thread
// appends and the real folder moves entries from Redis into the archive and trims them. Every
// pass must see ids strictly increasing and exactly the entries appended, from the first on, with
// no gap and no duplicate, whichever side each page came from.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sidecar/log/archive_folder.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/log_reader.h"
#include "sidecar/redis/session.h"
#include "tests/integration/archive_backends.h"

namespace streamcar::testing {

struct MergeReadCheck {
  std::string stream = "feed";
  std::string archive_url;
  // A connected session named `role` (a failure fails the test and returns null).
  std::function<std::unique_ptr<redis::Session>(const std::string& role)> connect;
  int initial = 600;
  int appended_while_reading = 600;
  int min_passes = 30;
};

inline void ExpectMergeReadGapFree(const MergeReadCheck& check) {
  constexpr int kBatch = 13;  // small batches: many folds and trims interleave with the reads
  constexpr int kKeep = 5;
  std::mutex mutex;
  std::vector<std::string> appended;  // every id, in append order (= id order)
  auto append = [&](redis::Session& session, int i) {
    auto reply = session.Run(
        redis::Command("XADD").Arg(check.stream).Arg("*").Arg("i").Arg(std::to_string(i)));
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_FALSE(reply->IsError()) << reply->view().Str();
    std::lock_guard lock(mutex);
    appended.emplace_back(reply->view().Str());
  };
  {
    auto session = check.connect("setup");
    ASSERT_NE(session, nullptr);
    for (int i = 0; i < check.initial; ++i) append(*session, i);
  }
  const int total = check.initial + check.appended_while_reading;

  std::atomic<bool> stop{false};
  std::atomic<int> folded{0};
  std::atomic<int> passes{0};
  std::thread appender([&] {
    auto session = check.connect("appender");
    if (session == nullptr) return;
    for (int i = check.initial; i < total && !stop.load(); ++i) {
      append(*session, i);
      if (i % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // pacing
    }
  });
  std::thread folder_thread([&] {
    auto store = OpenOrFail(check.archive_url);
    auto session = check.connect("folder");
    if (store == nullptr || session == nullptr) return;
    log::FolderOptions options;
    options.stream = check.stream;
    options.holder = "folder";
    options.batch = kBatch;
    options.max_len = kKeep;
    log::ArchiveFolder folder(options, store.get(), nullptr);
    while (!stop.load()) {
      auto token = folder.TakeLease(*session);
      ASSERT_TRUE(token.ok() && *token > 0)
          << (token.ok() ? "no lease" : token.status().ToString());
      auto batch = folder.FoldBatch(*session, *token);
      ASSERT_TRUE(batch.ok()) << batch.status().ToString();
      folded += static_cast<int>(batch->read);
      if (batch->read == 0) std::this_thread::yield();
    }
  });

  // Whatever the assertions below do, the threads are stopped and joined.
  struct Joiner {
    std::atomic<bool>* stop;
    std::thread* a;
    std::thread* b;
    ~Joiner() {
      *stop = true;
      if (a->joinable()) a->join();
      if (b->joinable()) b->join();
    }
  } joiner{&stop, &appender, &folder_thread};

  // The reader: whole passes over the window, 17 entries a page.
  auto store = OpenOrFail(check.archive_url);
  ASSERT_NE(store, nullptr);
  auto session = check.connect("reader");
  ASSERT_NE(session, nullptr);
  log::LogReader reader(session.get(), store.get());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool finished = false;
  while (std::chrono::steady_clock::now() < deadline) {
    size_t appended_before = 0;
    {
      std::lock_guard lock(mutex);
      appended_before = appended.size();
    }
    std::vector<std::string> pass;
    log::WindowQuery query;
    query.count = 17;
    while (true) {
      auto page = reader.Read(check.stream, query);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      for (const auto& entry : page->entries) pass.push_back(entry.id);
      if (!page->next) break;
      query.after = *page->next;
    }
    std::vector<std::string> expected;
    {
      std::lock_guard lock(mutex);
      expected = appended;
    }
    // Strictly increasing ids, and exactly a prefix of what was appended that holds at least
    // everything appended before the pass began. (The one appender may have one entry in Redis
    // that it has not noted yet: the pass may hold one more than `expected`.)
    for (size_t i = 1; i < pass.size(); ++i) {
      ASSERT_LT(log::CompareIds(pass[i - 1], pass[i]), 0)
          << "pass " << passes.load() << ": " << pass[i - 1] << " then " << pass[i];
    }
    ASSERT_GE(pass.size(), appended_before) << "pass " << passes.load() << " missed entries";
    ASSERT_LE(pass.size(), expected.size() + 1);
    const size_t checked = std::min(pass.size(), expected.size());
    ASSERT_EQ(std::vector<std::string>(pass.begin(), pass.begin() + checked),
              std::vector<std::string>(expected.begin(), expected.begin() + checked))
        << "pass " << passes.load() << " is not the appended entries in order";
    ++passes;
    // Done once every entry has been appended, the folder has caught up, and enough passes ran
    // during the folds.
    if (passes.load() >= check.min_passes && appended_before == static_cast<size_t>(total)) {
      auto len = session->Run(redis::Command("XLEN").Arg(check.stream));
      ASSERT_TRUE(len.ok()) << len.status().ToString();
      if (len->view().Integer() <= kKeep + kBatch) {
        finished = true;
        break;
      }
    }
  }
  stop = true;
  if (appender.joinable()) appender.join();
  if (folder_thread.joinable()) folder_thread.join();
  EXPECT_TRUE(finished) << "passes " << passes.load() << ", folded " << folded.load();
  EXPECT_GE(folded.load(), total - kKeep - kBatch);
}

}  // namespace streamcar::testing

#pragma once
// A real redis-server, one archive backend and a session on the server: what the folder's tests
// (archive_folder_test.cc) and the manual trim's (manual_trim_test.cc) stand on. Entries have a
// binary field and a repeated name, so that every check also checks the fields came back whole.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sidecar/common/stop_signal.h"
#include "sidecar/log/archive_folder.h"
#include "sidecar/log/archive_store.h"
#include "sidecar/redis/session.h"
#include "tests/integration/archive_backends.h"
#include "tests/support/redis_server.h"

namespace streamcar::testing {

template <typename Backend>
class ArchiveRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrFail(backend_.url());
    ASSERT_NE(store_, nullptr);
    session_ = std::make_unique<redis::Session>(redis_.ClientOptions(), "folder", &health_);
    StopSignal stop;
    ASSERT_TRUE(session_->EnsureConnected(stop).ok());
  }

  // Appends n entries with a binary field; their ids in order.
  std::vector<std::string> Append(int n, const std::string& stream = "feed") {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      const std::string value = std::string("v\0\xff", 3) + std::to_string(appended_++);
      ids.emplace_back(redis_.Run({"XADD", stream, "*", "n", value, "n", "again"}).view().Str());
    }
    return ids;
  }

  std::vector<std::string> RedisIds(const std::string& stream = "feed") {
    std::vector<std::string> ids;
    auto reply = redis_.Run({"XRANGE", stream, "-", "+"});
    for (size_t i = 0; i < reply.view().Size(); ++i) ids.emplace_back(reply.view()[i][0].Str());
    return ids;
  }

  std::vector<StreamEntry> Archived(const std::string& stream = "feed") {
    std::vector<StreamEntry> out;
    std::string after;
    while (true) {
      auto page = store_->Read(stream, after, "", 1000);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok() || page->entries.empty()) break;
      for (auto& e : page->entries) out.push_back(std::move(e));
      after = out.back().id;
    }
    return out;
  }

  // Archive and Redis together hold every appended id exactly once, and the archive holds the
  // fields as they were written.
  void ExpectEachOnce(const std::vector<std::string>& appended,
                      const std::string& stream = "feed") {
    std::vector<std::string> all;
    for (const auto& e : Archived(stream)) {
      all.push_back(e.id);
      ASSERT_EQ(e.fields.size(), 2u);
      EXPECT_EQ(e.fields[0].first, "n");
      EXPECT_EQ(e.fields[0].second.substr(0, 3), std::string("v\0\xff", 3));
      EXPECT_EQ(e.fields[1], (std::pair<std::string, std::string>{"n", "again"}));
    }
    const auto live = RedisIds(stream);
    all.insert(all.end(), live.begin(), live.end());
    EXPECT_EQ(all, appended) << "archive then Redis, in id order, must be exactly what was added";
  }

  log::FolderOptions Options(const std::string& holder = "c1") {
    log::FolderOptions options;
    options.stream = "feed";
    options.holder = holder;
    options.batch = 7;
    options.max_len = 10;
    options.lease_ttl = Millis(30000);
    return options;
  }

  std::string RedisWatermark() {
    auto reply = redis_.Run({"GET", "{feed}:archive:watermark"});
    return reply.IsNil() ? "" : std::string(reply.view().Str());
  }

  Backend backend_;
  RedisServer redis_;
  redis::RedisHealth health_;
  std::unique_ptr<redis::Session> session_;
  std::unique_ptr<log::ArchiveStore> store_;
  int appended_ = 0;
};

}  // namespace streamcar::testing

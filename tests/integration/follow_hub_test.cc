// Following streams live (SPEC 10) against a real redis-server: one shared blocking read, exact
// resume, catch-up from the archive, lagging followers, and a Redis restart mid-follow.

#include "sidecar/log/follow_hub.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "sidecar/log/entry_id.h"
#include "tests/integration/fake_archive.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::log {
namespace {

using std::chrono::milliseconds;
using streamcar::testing::Eventually;
using streamcar::testing::RedisServer;
using streamcar::testing::RedisServerOptions;

// Takes entries from `follower` until it has `n` or `timeout` passed. Errors while Redis is
// unreachable are tolerated (the follower stays usable); any other error fails the test.
std::vector<std::string> Collect(Follower& follower, size_t n,
                                 milliseconds timeout = milliseconds(20000)) {
  std::vector<std::string> ids;
  const auto deadline = SteadyClock::now() + timeout;
  std::vector<StreamEntry> batch;
  while (ids.size() < n && SteadyClock::now() < deadline) {
    Status status = follower.Next(&batch, Millis(200));
    if (!status.ok()) {
      EXPECT_TRUE(status.code() == StatusCode::kIo || status.code() == StatusCode::kTimeout)
          << status.ToString();
      if (status.code() != StatusCode::kIo && status.code() != StatusCode::kTimeout) break;
    }
    for (const auto& entry : batch) ids.push_back(entry.id);
  }
  return ids;
}

class FollowHubTest : public ::testing::Test {
 protected:
  explicit FollowHubTest(RedisServerOptions options = {}) : server_(std::move(options)) {}

  std::string Add(const std::string& stream = "feed") {
    return std::string(
        server_.Run({"XADD", stream, "*", "n", std::to_string(++added_)}).view().Str());
  }
  std::vector<std::string> AddMany(int n, const std::string& stream = "feed") {
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) ids.push_back(Add(stream));
    return ids;
  }
  // Clients blocked in XREAD right now (CLIENT LIST).
  int BlockedXreads() {
    std::istringstream lines(std::string(server_.Run({"CLIENT", "LIST"}).view().Str()));
    int blocked = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" cmd=xread ") != std::string::npos &&
          line.find(" flags=b ") != std::string::npos) {
        ++blocked;
      }
    }
    return blocked;
  }

  RedisServer server_;
  int added_ = 0;
};

TEST_F(FollowHubTest, ManyFollowersShareOneBlockingRead) {
  // A long block: a stream that joins later must interrupt the shared read, not wait it out.
  FollowHub hub(server_.ClientOptions(), nullptr, FollowOptions{.block = Millis(60000)});
  constexpr int kFollowers = 6;
  std::vector<std::unique_ptr<Follower>> followers;
  for (int i = 0; i < kFollowers; ++i) followers.push_back(hub.Follow("feed", "$"));
  // A second stream joins the same XREAD.
  auto other = hub.Follow("other", "$");
  EXPECT_EQ(hub.FollowerCount("feed"), kFollowers);
  EXPECT_EQ(hub.FollowerCount("other"), 1);
  // The shared read waits on "feed" alone...
  std::vector<StreamEntry> batch;
  ASSERT_TRUE(followers[0]->Next(&batch, Millis(10)).ok());
  ASSERT_TRUE(Eventually([&] { return BlockedXreads() == 1; }, milliseconds(10000)));
  // ...when "other" joins: its entries arrive without waiting out the 60 s block.
  ASSERT_TRUE(other->Next(&batch, Millis(10)).ok());
  const auto other_ids = AddMany(20, "other");
  EXPECT_EQ(Collect(*other, 20, milliseconds(20000)), other_ids);
  std::vector<std::vector<std::string>> got(kFollowers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kFollowers; ++i) {
    threads.emplace_back([&, i] { got[i] = Collect(*followers[i], 200); });
  }
  // Every follower has joined (the feed was started) before anything is appended: "$" was
  // resolved at Follow(), so entries appended now are theirs either way.
  const auto ids = AddMany(200);
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kFollowers; ++i) EXPECT_EQ(got[i], ids) << "follower " << i;
  // Idle again: exactly one client of the whole hub waits in XREAD for both streams.
  EXPECT_TRUE(Eventually([&] { return BlockedXreads() == 1; }, milliseconds(10000)));
  followers.clear();
  EXPECT_EQ(hub.FollowerCount("feed"), 0);
}

TEST_F(FollowHubTest, ResumesExactlyAfterAnIdAndDollarMeansFromNow) {
  const auto old = AddMany(50);
  FollowHub hub(server_.ClientOptions(), nullptr);
  auto resumed = hub.Follow("feed", old[19]);
  auto from_now = hub.Follow("feed", "$");
  auto from_start = hub.Follow("feed", "0-0");
  const auto fresh = AddMany(5);
  std::vector<std::string> expected(old.begin() + 20, old.end());
  expected.insert(expected.end(), fresh.begin(), fresh.end());
  EXPECT_EQ(Collect(*resumed, expected.size()), expected);
  EXPECT_EQ(Collect(*from_now, fresh.size()), fresh);
  auto all = old;
  all.insert(all.end(), fresh.begin(), fresh.end());
  EXPECT_EQ(Collect(*from_start, all.size()), all);
  // Nothing more arrives: an empty wait is not an error.
  std::vector<StreamEntry> none;
  EXPECT_TRUE(resumed->Next(&none, Millis(100)).ok());
  EXPECT_TRUE(none.empty());
}

TEST_F(FollowHubTest, CatchesUpFromTheArchiveBelowTheWatermark) {
  const auto ids = AddMany(30);
  streamcar::testing::FakeArchive archive;
  // Fold the first 20 and trim them from Redis, as the folder does.
  auto reply = server_.Run({"XRANGE", "feed", "-", ids[19]});
  std::vector<StreamEntry> entries;
  for (size_t i = 0; i < reply.view().Size(); ++i) {
    entries.push_back(StreamEntry{.id = std::string(reply.view()[i][0].Str()),
                                  .fields = {{"n", std::to_string(i + 1)}}});
  }
  ASSERT_TRUE(archive.Fold("feed", entries, 1).ok());
  server_.Run({"XTRIM", "feed", "MINID", FormatId(*Successor(*ParseId(ids[19])))});
  ASSERT_EQ(server_.Run({"XLEN", "feed"}).view().Integer(), 10);
  FollowHub hub(server_.ClientOptions(), &archive);
  auto follower = hub.Follow("feed", ids[4]);
  const auto fresh = AddMany(3);
  std::vector<std::string> expected(ids.begin() + 5, ids.end());
  expected.insert(expected.end(), fresh.begin(), fresh.end());
  EXPECT_EQ(Collect(*follower, expected.size()), expected);
  EXPECT_GT(archive.reads(), 0);
}

TEST_F(FollowHubTest, ALaggingFollowerLosesNothing) {
  FollowHub hub(server_.ClientOptions(), nullptr, FollowOptions{.buffer_entries = 8});
  auto fast = hub.Follow("feed", "$");
  auto slow = hub.Follow("feed", "$");
  std::vector<StreamEntry> batch;
  ASSERT_TRUE(slow->Next(&batch, Millis(50)).ok());  // joined, then does not read for a while
  const auto first = AddMany(5);
  EXPECT_EQ(Collect(*slow, 5), first);
  // 300 entries pass through the shared read (the fast follower takes them all) while the slow
  // one waits: its position falls far below the 8 entries the buffer holds.
  const auto more = AddMany(300);
  std::vector<std::string> expected = first;
  expected.insert(expected.end(), more.begin(), more.end());
  EXPECT_EQ(Collect(*fast, expected.size()), expected);
  EXPECT_EQ(Collect(*slow, more.size()), more);
}

// Issue 29 F1: the shared read resumes after its last id, but the entries just above it were
// folded into the archive and trimmed before that read ran (Redis restarted, the read lagged).
// XREAD silently returns only what is left; the followers must still get every entry, the
// trimmed ones from the archive, once and in order. One script appends 20 entries and trims the
// first 15 atomically, so the blocked shared read sees only the last 5: deterministic.
TEST_F(FollowHubTest, AReadResumingAboveTrimmedEntriesCatchesUpFromTheArchive) {
  streamcar::testing::FakeArchive archive;
  FollowHub hub(server_.ClientOptions(), &archive);
  auto follower = hub.Follow("feed", "$");
  auto second = hub.Follow("feed", "$");
  const auto before = AddMany(3);
  ASSERT_EQ(Collect(*follower, 3), before);
  ASSERT_EQ(Collect(*second, 3), before);
  ASSERT_TRUE(Eventually([&] { return BlockedXreads() == 1; }, milliseconds(10000)));
  const uint64_t base = ParseId(before.back())->ms + 1000;
  std::vector<std::string> ids;
  std::vector<StreamEntry> folded;
  for (uint64_t i = 1; i <= 20; ++i) {
    ids.push_back(std::to_string(base + i) + "-0");
    if (i <= 15) folded.push_back(StreamEntry{.id = ids.back(), .fields = {{"n", "f"}}});
  }
  // The archive holds the 15 first (the folder commits W before it trims), Redis the 5 last.
  ASSERT_TRUE(archive.Fold("feed", folded, 1).ok());
  std::string script = "for i = 1, #ARGV do redis.call('XADD', KEYS[1], ARGV[i], 'n', 'f') end ";
  script += "redis.call('XTRIM', KEYS[1], 'MINID', '" + FormatId(*Successor(*ParseId(ids[14]))) +
            "') return redis.call('XLEN', KEYS[1])";
  std::vector<std::string> eval = {"EVAL", script, "1", "feed"};
  eval.insert(eval.end(), ids.begin(), ids.end());
  ASSERT_EQ(server_.Run(eval).view().Integer(), 5);
  EXPECT_EQ(Collect(*follower, ids.size(), milliseconds(5000)), ids);
  EXPECT_EQ(Collect(*second, ids.size(), milliseconds(5000)), ids);
  EXPECT_GT(archive.reads(), 0);
  // Then live again, from the shared read.
  const auto after = AddMany(3);
  EXPECT_EQ(Collect(*follower, 3), after);
  EXPECT_EQ(Collect(*second, 3), after);
}

// A resume point above the stream's top (a Last-Event-ID from the future) must not start the
// shared read there: that read would wait for ids above it, and every later follower of the
// stream would be moved up to it and starve.
TEST_F(FollowHubTest, AResumePointAboveTheTopStarvesNobody) {
  AddMany(2);
  FollowHub hub(server_.ClientOptions(), nullptr);
  auto future = hub.Follow("feed", "99999999999999-0");
  std::vector<StreamEntry> batch;
  ASSERT_TRUE(future->Next(&batch, Millis(50)).ok());  // the first follower: starts the feed
  EXPECT_TRUE(batch.empty());
  auto now = hub.Follow("feed", "$");
  ASSERT_TRUE(now->Next(&batch, Millis(50)).ok());
  const auto ids = AddMany(3);
  EXPECT_EQ(Collect(*now, 3), ids);
  // The future follower still skips everything at or below its resume point.
  const std::string later =
      std::string(server_.Run({"XADD", "feed", "99999999999999-5", "n", "x"}).view().Str());
  EXPECT_EQ(Collect(*future, 1), std::vector<std::string>{later});
  EXPECT_EQ(Collect(*now, 1), std::vector<std::string>{later});
}

// The buffer is bounded in bytes too: large entries push a lagging follower out of it (it then
// catches up through the reader, XRANGE) long before the entry bound would.
TEST_F(FollowHubTest, TheBufferIsBoundedInBytes) {
  FollowHub hub(server_.ClientOptions(), nullptr,
                FollowOptions{.buffer_entries = 100000, .buffer_bytes = 8192});
  auto fast = hub.Follow("feed", "$");
  auto slow = hub.Follow("feed", "$");
  std::vector<StreamEntry> batch;
  ASSERT_TRUE(fast->Next(&batch, Millis(50)).ok());
  ASSERT_TRUE(slow->Next(&batch, Millis(50)).ok());
  auto xranges = [&] {
    const std::string info(server_.Run({"INFO", "commandstats"}).view().Str());
    const size_t at = info.find("cmdstat_xrange:calls=");
    return at == std::string::npos ? 0 : std::stoi(info.substr(at + 21));
  };
  const int before = xranges();
  const std::string big(2000, 'b');
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    ids.emplace_back(server_.Run({"XADD", "feed", "*", "v", big}).view().Str());
  }
  EXPECT_EQ(Collect(*fast, ids.size()), ids);
  EXPECT_EQ(Collect(*slow, ids.size()), ids);
  EXPECT_GT(xranges(), before);
}

TEST_F(FollowHubTest, AWrongTypeKeyFailsItsFollowersOnly) {
  server_.Run({"SET", "bad", "text"});
  FollowHub hub(server_.ClientOptions(), nullptr);
  auto bad = hub.Follow("bad", "0-0");
  auto good = hub.Follow("feed", "$");
  std::vector<StreamEntry> batch;
  Status status = bad->Next(&batch, Millis(2000));
  EXPECT_TRUE(status.IsServerError("WRONGTYPE")) << status.ToString();
  const auto ids = AddMany(3);
  EXPECT_EQ(Collect(*good, 3), ids);
}

TEST_F(FollowHubTest, StopWakesWaitingFollowers) {
  FollowHub hub(server_.ClientOptions(), nullptr, FollowOptions{.block = Millis(30000)});
  auto follower = hub.Follow("feed", "$");
  std::vector<StreamEntry> batch;
  ASSERT_TRUE(follower->Next(&batch, Millis(50)).ok());
  Status result;
  std::thread waiter([&] { result = follower->Next(&batch, Millis(60000)); });
  const auto started = SteadyClock::now();
  hub.Stop();  // does not wait out the 30 s BLOCK
  waiter.join();
  EXPECT_EQ(result.code(), StatusCode::kCancelled);
  EXPECT_LT(SteadyClock::now() - started, Millis(10000));
}

TEST_F(FollowHubTest, AFollowerMayOutliveItsHub) {
  std::unique_ptr<Follower> follower;
  {
    FollowHub hub(server_.ClientOptions(), nullptr);
    follower = hub.Follow("feed", "$");
  }
  std::vector<StreamEntry> batch;
  EXPECT_EQ(follower->Next(&batch, Millis(100)).code(), StatusCode::kCancelled);
  follower.reset();  // no use of the hub after it is gone (ASan would say)
}

class FollowHubRestartTest : public FollowHubTest {
 protected:
  FollowHubRestartTest() : FollowHubTest(RedisServerOptions{.append_only = true}) {}
};

TEST_F(FollowHubRestartTest, RedisRestartMidFollowLosesNothing) {
  FollowHub hub(server_.ClientOptions(), nullptr);
  auto follower = hub.Follow("feed", "$");
  const auto before = AddMany(10);
  EXPECT_EQ(Collect(*follower, 10), before);
  const auto unread = AddMany(5);  // appended, not yet taken by the follower
  server_.Kill();
  std::vector<StreamEntry> batch;
  // While Redis is down the follower reports it (or nothing) and stays usable.
  (void)follower->Next(&batch, Millis(300));
  std::vector<std::string> got;
  for (const auto& entry : batch) got.push_back(entry.id);
  server_.Start();
  const auto after = AddMany(10);
  auto rest = Collect(*follower, unread.size() + after.size() - got.size());
  got.insert(got.end(), rest.begin(), rest.end());
  std::vector<std::string> expected = unread;
  expected.insert(expected.end(), after.begin(), after.end());
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace streamcar::log

// `streamcar trim` (SPEC 1 and 10) against the real binary, a real redis-server and a real archive
// (SQLite; PostgreSQL too when built in): an archived stream is folded before it is trimmed and
// `streamcar read` still returns every entry once; a trim racing a running sidecar's retention
// beat folds each entry once; --dry-run changes nothing; each selector; the exit codes.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "sidecar/log/archive_store.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/integration/archive_backends.h"

namespace streamcar::testing {
namespace {

std::vector<std::string> FirstWords(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) words.push_back(line.substr(0, line.find(' ')));
  return words;
}

template <typename Backend>
class TrimCliTest : public E2eTest {
 protected:
  // "feed" archived (with `retention` when given), "plain" and "text" not.
  std::string Yaml(const std::string& retention = "") const {
    return "version: 1\nredis:\n  url: " + redis_->url() +
           "\n  command_timeout: 2s\nconsumer:\n  name: folder-1\nadmin:\n  listen: 127.0.0.1:" +
           std::to_string(admin_port_) + "\nstreams:\n  - name: feed\n    archive: true\n" +
           (retention.empty() ? "" : "    retention: " + retention + "\n") +
           "  - name: plain\n  - name: text\narchive:\n  url: \"" + backend_.url() +
           "\"\n  interval: 50ms\n  batch: 100\n";
  }

  // n entries with ids <1000+i>-0 and field i=<i>; their ids.
  std::vector<std::string> Fill(int n, const std::string& stream = "feed") {
    std::vector<std::string> ids;
    for (int i = 1; i <= n; ++i) {
      ids.push_back(std::to_string(1000 + i) + "-0");
      redis_->Run({"XADD", stream, ids.back(), "i", std::to_string(i)});
    }
    return ids;
  }

  // Every id `streamcar read` prints for the stream, archive and Redis merged.
  std::vector<std::string> ReadAll(const std::string& config) {
    auto read = RunStreamcar({"read", "-c", config, "feed", "--count", "100000"});
    EXPECT_EQ(read.exit_code, 0) << read.err;
    return FirstWords(read.out);
  }

  // The archive's ids, then Redis's.
  std::vector<std::string> ArchiveThenRedis() {
    std::vector<std::string> ids;
    auto archive = OpenOrFail(backend_.url());
    if (archive == nullptr) return ids;
    while (true) {
      auto page = archive->Read("feed", ids.empty() ? "" : ids.back(), "", 1000);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok() || page->entries.empty()) break;
      for (const auto& entry : page->entries) ids.push_back(entry.id);
    }
    auto live = redis_->Run({"XRANGE", "feed", "-", "+"});
    for (size_t i = 0; i < live.view().Size(); ++i) ids.emplace_back(live.view()[i][0].Str());
    return ids;
  }

  Backend backend_;
};

TYPED_TEST_SUITE(TrimCliTest, Backends, BackendNames);

TYPED_TEST(TrimCliTest, ArchivedStreamIsFoldedFirstAndReadStillReturnsEveryEntry) {
  const std::string config = this->WriteConfig(this->Yaml());
  const auto ids = this->Fill(50);
  auto trim = RunStreamcar({"trim", "-c", config, "feed", "--max-len", "10"});
  ASSERT_EQ(trim.exit_code, 0) << trim.err;
  const std::string url = TypeParam::kName == std::string("sqlite") ? this->backend_.url() : "";
  EXPECT_TRUE(trim.out.starts_with("folded 40 entries (40 new) up to 1040-0 into " + url))
      << trim.out;
  EXPECT_TRUE(trim.out.ends_with("; trimmed 40 entries (feed: 10 left)\n")) << trim.out;
  EXPECT_EQ(this->Len("feed"), 10);
  EXPECT_EQ(this->ReadAll(config), ids);
  EXPECT_EQ(this->ArchiveThenRedis(), ids);

  // By id, while a folder that died a moment ago still holds the lease: the trim waits for it.
  // 2.5 s: the binary must start and find it held (under ASan it takes about a second to start).
  this->redis_->Run({"SET", "{feed}:archive:lease", "ghost", "PX", "2500"});
  auto by_id = RunStreamcar({"trim", "-c", config, "feed", "--min-id", "1045-0"});
  ASSERT_EQ(by_id.exit_code, 0) << by_id.err;
  EXPECT_TRUE(by_id.out.starts_with("folded 4 entries (4 new) up to 1044-0 into ")) << by_id.out;
  EXPECT_TRUE(by_id.out.ends_with("; trimmed 4 entries (feed: 6 left)\n")) << by_id.out;
  EXPECT_NE(by_id.err.find("waiting for the archive lease of feed, held by \"ghost\""),
            std::string::npos)
      << by_id.err;
  EXPECT_EQ(this->ReadAll(config), ids);
  EXPECT_EQ(this->ArchiveThenRedis(), ids);
}

// A sidecar folds and trims "feed" on its 50 ms beat while entries are added; trims run beside it.
// Each trim waits for the beat's step and folds alone: every entry it folds is new to the archive
// (an entry folded by both would be read twice and inserted once), and archive and Redis together
// hold every entry added, once, in order.
TYPED_TEST(TrimCliTest, RacingARunningSidecarsBeatFoldsEachEntryOnce) {
  const std::string yaml = this->Yaml("{ max_len: 60, interval: 50ms }");
  const std::string config = this->WriteConfig(yaml);
  SidecarProcess sidecar(yaml, {}, this->admin_port_);
  ASSERT_TRUE(this->WaitReady()) << sidecar.Logs();
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::vector<std::string> added;
  std::thread adder([&] {
    auto connection = this->redis_->Connect();
    for (int i = 0; !stop.load(); ++i) {
      auto reply = connection->Run(
          redis::Command("XADD").Arg("feed").Arg("*").Arg("n").Arg(std::to_string(i)));
      ASSERT_TRUE(reply.ok() && reply->view().IsString());
      std::lock_guard lock(mutex);
      added.emplace_back(reply->view().Str());
      if (i % 10 == 9) std::this_thread::sleep_for(milliseconds(5));
    }
  });
  const std::regex line(R"(^folded (\d+) entries \((\d+) new\) up to \S+ into .*; trimmed (\d+) )");
  int64_t trim_folded = 0;
  for (int round = 0; round < 12; ++round) {
    auto trim =
        RunStreamcar({"trim", "-c", config, "feed", "--max-len", round % 2 == 0 ? "5" : "30"});
    ASSERT_EQ(trim.exit_code, 0) << trim.err;
    std::smatch match;
    ASSERT_TRUE(std::regex_search(trim.out, match, line)) << trim.out;
    EXPECT_EQ(match[1], match[2]) << "an entry this trim folded was folded by another: "
                                  << trim.out;
    EXPECT_EQ(match[1], match[3]) << trim.out;
    trim_folded += std::stoll(match[1]);
  }
  stop = true;
  adder.join();
  EXPECT_GT(trim_folded, 0);
  ASSERT_TRUE(Eventually([&] { return this->Len("feed") <= 60; }, seconds(20))) << sidecar.Logs();
  sidecar.Terminate();
  ASSERT_EQ(sidecar.Wait(seconds(20)), 0) << sidecar.Logs();
  EXPECT_EQ(sidecar.Logs().find("fenced"), std::string::npos) << sidecar.Logs();
  std::lock_guard lock(mutex);
  EXPECT_EQ(this->ArchiveThenRedis(), added);
  EXPECT_EQ(this->ReadAll(config), added);
}

using SqliteTrimCliTest = TrimCliTest<SqliteBackend>;

// Every key in Redis with its content, and the archive's rows: what a dry run must not change.
std::map<std::string, std::string> RedisState(RedisServer& redis) {
  std::map<std::string, std::string> state;
  auto keys = redis.Run({"KEYS", "*"});
  for (size_t i = 0; i < keys.view().Size(); ++i) {
    const std::string key(keys.view()[i].Str());
    auto type = redis.Run({"TYPE", key});
    std::string content;
    if (type.view().Str() == "stream") {
      auto entries = redis.Run({"XRANGE", key, "-", "+"});
      for (size_t e = 0; e < entries.view().Size(); ++e) {
        content += std::string(entries.view()[e][0].Str()) + " ";
      }
    } else {
      content = redis.Run({"DUMP", key}).view().Str();
    }
    state[key] = content;
  }
  return state;
}

TEST_F(SqliteTrimCliTest, DryRunSaysWhatTheTrimWouldDoAndChangesNothing) {
  const std::string config = WriteConfig(Yaml());
  const auto ids = Fill(50);
  Fill(10, "plain");
  ASSERT_EQ(RunStreamcar({"trim", "-c", config, "feed", "--max-len", "45"}).exit_code, 0);
  const auto redis_before = RedisState(*redis_);
  const auto archive_before = ArchiveThenRedis();
  ASSERT_TRUE(redis_before.contains("{feed}:archive:token"));
  auto dry = RunStreamcar({"trim", "-c", config, "feed", "--max-len", "10", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.out, "would fold 35 entries up to 1040-0 into " + backend_.url() +
                         "; would trim 35 entries (feed: 10 would be left)\n");
  auto plain = RunStreamcar({"trim", "-c", config, "plain", "--min-id", "1008-0", "--dry-run"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "would trim 7 entries (plain: 3 would be left)\n");
  EXPECT_EQ(RedisState(*redis_), redis_before);
  EXPECT_EQ(ArchiveThenRedis(), archive_before);
  // ... and the trim then does what the dry run said.
  auto trim = RunStreamcar({"trim", "-c", config, "feed", "--max-len", "10"});
  EXPECT_EQ(trim.out, "folded 35 entries (35 new) up to 1040-0 into " + backend_.url() +
                          "; trimmed 35 entries (feed: 10 left)\n")
      << trim.err;
  EXPECT_EQ(ReadAll(config), ids);
}

TEST_F(SqliteTrimCliTest, EachSelectorTrimsExactly) {
  const std::string config = WriteConfig(Yaml());
  // A stream without archive, 250 entries with ids 1-0 ... 250-0: exact, not by whole nodes.
  for (int i = 1; i <= 250; ++i) redis_->Run({"XADD", "plain", std::to_string(i) + "-0", "f", "v"});
  auto by_len = RunStreamcar({"trim", "-c", config, "plain", "--max-len", "7"});
  EXPECT_EQ(by_len.out, "trimmed 243 entries (plain: 7 left)\n") << by_len.err;
  auto by_id = RunStreamcar({"trim", "-c", config, "plain", "--min-id=247"});
  EXPECT_EQ(by_id.out, "trimmed 3 entries (plain: 4 left)\n") << by_id.err;
  auto by_age = RunStreamcar({"trim", "-c", config, "plain", "--max-age", "1m"});
  EXPECT_EQ(by_age.out, "trimmed 4 entries (plain: 0 left)\n") << by_age.err;

  // The archived stream by age, by Redis's clock: five entries an hour old, five new.
  auto time = redis_->Run({"TIME"});
  const int64_t now_ms = std::stoll(std::string(time.view()[0].Str())) * 1000;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(std::to_string(now_ms - 3600 * 1000 + i) + "-0");
    redis_->Run({"XADD", "feed", ids.back(), "old", std::to_string(i)});
  }
  for (int i = 0; i < 5; ++i)
    ids.emplace_back(redis_->Run({"XADD", "feed", "*", "new", "x"}).view().Str());
  auto aged = RunStreamcar({"trim", "-c", config, "feed", "--max-age", "30m"});
  EXPECT_EQ(aged.out, "folded 5 entries (5 new) up to " + ids[4] + " into " + backend_.url() +
                          "; trimmed 5 entries (feed: 5 left)\n")
      << aged.err;
  EXPECT_EQ(ReadAll(config), ids);
  // An RFC 3339 instant stands for its millisecond: nothing is that old now.
  auto instant = RunStreamcar({"trim", "-c", config, "feed", "--min-id", "2001-01-01T00:00:00Z"});
  EXPECT_EQ(instant.out, "folded 0 entries (0 new) up to " + ids[4] + " into " + backend_.url() +
                             "; trimmed 0 entries (feed: 5 left)\n")
      << instant.err;
}

TEST_F(SqliteTrimCliTest, BadUsagesExitTwoAndChangeNothing) {
  const std::string config = WriteConfig(Yaml());
  Fill(20);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"trim", "-c", config, "feed"},
           {"trim", "-c", config, "feed", "--max-len", "5", "--min-id", "1-0"},
           {"trim", "-c", config, "feed", "--max-age", "1h", "--max-len", "5"},
           {"trim", "-c", config, "feed", "--max-len", "5", "--max-len", "6"},
           {"trim", "-c", config, "--max-len", "5"},
           {"trim", "-c", config, "feed", "--max-len", "-1"},
           {"trim", "-c", config, "feed", "--max-len", "x"},
           {"trim", "-c", config, "feed", "--max-len"},
           {"trim", "-c", config, "feed", "--max-age", "5"},
           {"trim", "-c", config, "feed", "--min-id", "yesterday"},
           {"trim", "-c", config, "feed", "--count", "5", "--max-len", "1"},
           {"trim", "-c", config, "feed", "other", "--max-len", "1"},
           {"read", "-c", config, "feed", "--max-len", "5"},
           {"trim", "-c", config, "orders", "--max-len", "1"},
       }) {
    auto result = RunStreamcar(args);
    EXPECT_EQ(result.exit_code, 2) << args.back() << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_EQ(result.out, "");
  }
  auto unlisted = RunStreamcar({"trim", "-c", config, "orders", "--max-len", "1"});
  EXPECT_NE(unlisted.err.find("stream \"orders\" is not listed under streams:"), std::string::npos)
      << unlisted.err;
  EXPECT_NE(unlisted.err.find("(listed: feed, plain, text)"), std::string::npos) << unlisted.err;
  // A stream split into shards has no single key to trim (SPEC 9).
  SidecarConfig sharded;
  sharded.handler_extra = "timeout: 1s";
  sharded.subscription_extra = "    sharding: { shards: 4, drain_timeout: 3s }\n";
  sharded.top_extra = "streams:\n  - name: orders\n";
  auto split =
      RunStreamcar({"trim", "-c", WriteConfig(E2eTest::Yaml(sharded)), "orders", "--max-len", "1"});
  EXPECT_EQ(split.exit_code, 2) << split.err;
  EXPECT_NE(split.err.find("stream \"orders\" is sharded"), std::string::npos) << split.err;
  EXPECT_EQ(Len("feed"), 20);
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"trim", "--help"}, {"help", "trim"}}) {
    auto help = RunStreamcar(args);
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_TRUE(help.out.starts_with("Usage: streamcar trim [-c FILE] STREAM")) << help.out;
  }
  EXPECT_NE(RunStreamcar({"--help"}).out.find("streamcar trim "), std::string::npos);
}

TEST_F(SqliteTrimCliTest, AWrongTypeKeyAndAnUnreachableRedisExitOne) {
  redis_->Run({"SET", "text", "not a stream"});
  auto wrong = RunStreamcar({"trim", "-c", WriteConfig(Yaml()), "text", "--max-len", "1"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("cannot trim text: WRONGTYPE the Redis key \"text\" holds a string"),
            std::string::npos)
      << wrong.err;
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1) << wrong.err;
  EXPECT_EQ(redis_->Run({"GET", "text"}).view().Str(), "not a stream");

  std::string yaml = Yaml();
  const std::string url = redis_->url();
  yaml.replace(yaml.find(url), url.size(), "redis://127.0.0.1:" + std::to_string(FreePort()));
  auto unreachable = RunStreamcar({"trim", "-c", WriteConfig(yaml), "feed", "--max-len", "1"});
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_EQ(std::count(unreachable.err.begin(), unreachable.err.end(), '\n'), 1) << unreachable.err;
  EXPECT_NE(unreachable.err.find("127.0.0.1"), std::string::npos) << unreachable.err;
}

}  // namespace
}  // namespace streamcar::testing

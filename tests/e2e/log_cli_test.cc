// `produce`, `read` and `tail` (SPEC 1 and 10) against the binary, a real redis-server and a real
// SQLite archive.

#include <rapidjson/document.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "sidecar/log/archive_store.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/stream_ops.h"
#include "tests/e2e/e2e_fixture.h"
#include "tests/support/child_process.h"

namespace streamcar::testing {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The first word of each line: the entry ids of `read` and `tail` output.
std::vector<std::string> Ids(const std::string& text) {
  std::vector<std::string> ids;
  for (const auto& line : Lines(text)) ids.push_back(line.substr(0, line.find(' ')));
  return ids;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// `streamcar tail ...` running in the background, its output in files.
class TailProcess {
 public:
  explicit TailProcess(const std::vector<std::string>& args)
      : dir_(MakeTempDir("streamcar-tail-")) {
    std::vector<std::string> argv = {StreamcarBinary()};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = SpawnChild({.argv = argv, .stdout_path = dir_ + "/out", .stderr_path = dir_ + "/err"});
  }
  ~TailProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  std::string out() const { return ReadFile(dir_ + "/out"); }
  std::string err() const { return ReadFile(dir_ + "/err"); }
  // Sends `signal` and waits for the exit; the exit code, or -1 (killed) after 20 s.
  int Stop(int signal) {
    ::kill(pid_, signal);
    int status = 0;
    const bool ended = Eventually([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; },
                                  std::chrono::seconds(20));
    if (!ended) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

class LogCliTest : public E2eTest {
 protected:
  LogCliTest() : archive_dir_(MakeTempDir("streamcar-archive-")) {}
  ~LogCliTest() override { std::filesystem::remove_all(archive_dir_); }

  std::string ArchiveUrl() const { return "sqlite://" + archive_dir_ + "/archive.db"; }

  // A log-API-only configuration: "feed" archived, "ro" read-only.
  std::string Config() {
    return WriteConfig("version: 1\nredis:\n  url: " + redis_->url() +
                       "\nadmin:\n  listen: \"\"\napi:\n  idempotency_ttl: 1h\nstreams:\n"
                       "  - name: feed\n    archive: true\n"
                       "  - name: ro\n    produce: false\n"
                       "archive:\n  url: " +
                       ArchiveUrl() + "\n");
  }

  // n entries with ids <1000+i>-0 and field i=<i>; their ids.
  std::vector<std::string> Fill(int n, const std::string& stream = "feed") {
    std::vector<std::string> ids;
    for (int i = 1; i <= n; ++i) {
      const std::string id = std::to_string(1000 + i) + "-0";
      redis_->Run({"XADD", stream, id, "i", std::to_string(i)});
      ids.push_back(id);
    }
    return ids;
  }

  // Folds the entries up to and including `last` into the SQLite archive and trims them from
  // Redis, as the folder does (fold, then trim at or below W).
  void FoldAndTrim(const std::string& last) {
    auto archive = log::OpenArchive(ArchiveUrl());
    ASSERT_TRUE(archive.ok()) << archive.status().ToString();
    auto reply = redis_->Run({"XRANGE", "feed", "-", last});
    auto entries = redis::SubscriptionOps::ParseEntries(reply.view());
    ASSERT_FALSE(entries.empty());
    auto folded = (*archive)->Fold("feed", entries, 1);
    ASSERT_TRUE(folded.ok()) << folded.status().ToString();
    redis_->Run({"XTRIM", "feed", "MINID", log::FormatId(*log::Successor(*log::ParseId(last)))});
    ASSERT_EQ(redis_->Run({"XRANGE", "feed", "-", last}).view().Size(), 0u);
  }

  std::string archive_dir_;
};

TEST_F(LogCliTest, ProducePrintsTheReceiptAndKeepsFieldsInOrder) {
  const std::string config = Config();
  auto result = RunStreamcar({"produce", "-c", config, "feed", "b=2", "a=x=y", "empty="});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string id = result.out.substr(0, result.out.size() - 1);
  EXPECT_EQ(result.out, id + "\n");
  auto entries = redis_->Run({"XRANGE", "feed", "-", "+"});
  ASSERT_EQ(entries.view().Size(), 1u);
  EXPECT_EQ(entries.view()[0][0].Str(), id);
  const auto fields = entries.view()[0][1];
  ASSERT_EQ(fields.Size(), 6u);
  EXPECT_EQ(fields[0].Str(), "b");
  EXPECT_EQ(fields[2].Str(), "a");
  EXPECT_EQ(fields[3].Str(), "x=y");  // split at the first '='
  EXPECT_EQ(fields[5].Str(), "");
  // "--": a field whose name starts with '-'.
  auto dashed = RunStreamcar({"produce", "-c", config, "feed", "--", "-x=1"});
  EXPECT_EQ(dashed.exit_code, 0) << dashed.err;
  EXPECT_EQ(Len("feed"), 2);
}

TEST_F(LogCliTest, ProduceWithAnIdempotencyKeyAndAnExplicitId) {
  const std::string config = Config();
  auto first = RunStreamcar({"produce", "-c", config, "feed", "a=1", "--idempotency-key", "k1"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto again = RunStreamcar({"produce", "-c", config, "feed", "a=2", "--idempotency-key", "k1"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, first.out);  // the first append's receipt
  EXPECT_NE(again.err.find("nothing appended"), std::string::npos) << again.err;
  EXPECT_EQ(Len("feed"), 1);

  // Issue 29: an id far ahead of Redis's clock is refused (api.max_future_skew); one a second
  // ahead is kept.
  auto future = RunStreamcar({"produce", "-c", config, "feed", "a=3", "--id", "99999999999999-5"});
  EXPECT_EQ(future.exit_code, 1);
  EXPECT_NE(future.err.find("api.max_future_skew"), std::string::npos) << future.err;
  EXPECT_EQ(Len("feed"), 1);
  auto time = redis_->Run({"TIME"});
  const std::string near =
      std::to_string(std::stoll(std::string(time.view()[0].Str())) * 1000 + 1000) + "-5";
  auto explicit_id = RunStreamcar({"produce", "-c", config, "feed", "a=3", "--id", near});
  ASSERT_EQ(explicit_id.exit_code, 0) << explicit_id.err;
  EXPECT_EQ(explicit_id.out, near + "\n");
  auto stale = RunStreamcar({"produce", "-c", config, "feed", "a=4", "--id", near});
  EXPECT_EQ(stale.exit_code, 1);
  EXPECT_NE(stale.err.find("(top: " + near + ")"), std::string::npos) << stale.err;
  EXPECT_EQ(Len("feed"), 2);
}

TEST_F(LogCliTest, UsageAndConfigErrorsExitTwo) {
  const std::string config = Config();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"produce", "-c", config},
           {"produce", "-c", config, "feed"},
           {"produce", "-c", config, "feed", "novalue"},
           {"produce", "-c", config, "feed", "=v"},
           {"produce", "-c", config, "feed", "a=1", "--id", "5"},
           {"produce", "-c", config, "ro", "a=1"},
           {"read", "-c", config},
           {"read", "-c", config, "feed", "--since", "yesterday"},
           {"read", "-c", config, "feed", "--count", "0"},
           {"tail", "-c", config, "feed", "--until", "5"},
       }) {
    auto result = RunStreamcar(args);
    EXPECT_EQ(result.exit_code, 2) << args.back() << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  EXPECT_EQ(Len("ro"), 0);
  for (const char* command : {"produce", "read", "tail"}) {
    auto help = RunStreamcar({command, "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find(std::string("Usage: streamcar ") + command), std::string::npos);
  }
}

TEST_F(LogCliTest, ReadMergesTheArchiveAndTheLiveStream) {
  const std::string config = Config();
  const auto ids = Fill(50);
  FoldAndTrim(ids[29]);  // 1..30 only in the archive now
  EXPECT_EQ(Len("feed"), 20);
  auto all = RunStreamcar({"read", "-c", config, "feed", "--count", "1000"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(Ids(all.out), ids);
  EXPECT_NE(all.out.find(ids[2] + "  1970-01-01T00:00:01.003Z  i=3\n"), std::string::npos)
      << all.out;
  // [since, until) by id and by milliseconds, across the watermark.
  auto window = RunStreamcar({"read", "-c", config, "feed", "--since", ids[20], "--until", "1041"});
  ASSERT_EQ(window.exit_code, 0) << window.err;
  EXPECT_EQ(Ids(window.out), std::vector<std::string>(ids.begin() + 20, ids.begin() + 40));
  // The default count is 100; a cut-short window says so on stderr.
  auto capped = RunStreamcar({"read", "-c", config, "feed", "--count", "7"});
  ASSERT_EQ(capped.exit_code, 0);
  EXPECT_EQ(Ids(capped.out), std::vector<std::string>(ids.begin(), ids.begin() + 7));
  EXPECT_NE(capped.err.find("the window holds more after " + ids[6]), std::string::npos);
}

TEST_F(LogCliTest, ReadJsonIsOneDocument) {
  const std::string config = Config();
  const auto ids = Fill(12);
  FoldAndTrim(ids[4]);
  redis_->Run({"XADD", "feed", "2000-0", "bin", std::string("\xff\x00", 2)});
  auto result = RunStreamcar({"read", "-c", config, "feed", "--json", "--count", "20"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  rapidjson::Document doc;
  doc.Parse(result.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << result.out;
  EXPECT_STREQ(doc["stream"].GetString(), "feed");
  const auto& entries = doc["entries"];
  ASSERT_EQ(entries.Size(), 13u);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(entries[static_cast<rapidjson::SizeType>(i)]["id"].GetString(), ids[i]);
  }
  EXPECT_STREQ(entries[0]["fields"]["i"].GetString(), "1");
  EXPECT_STREQ(entries[12]["fields"]["bin"].GetString(), "/wA=");  // base64 of ff 00
  EXPECT_STREQ(entries[12]["base64_fields"][0].GetString(), "bin");
  EXPECT_TRUE(doc["next"].IsNull());
  auto page = RunStreamcar({"read", "-c", config, "feed", "--json", "--count", "3"});
  doc.Parse(page.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << page.out;
  EXPECT_EQ(doc["entries"].Size(), 3u);
  EXPECT_EQ(doc["next"].GetString(), ids[2]);
}

TEST_F(LogCliTest, ReadOfAMissingStreamIsEmptyAndWrongTypeExitsOne) {
  const std::string config = Config();
  auto empty = RunStreamcar({"read", "-c", config, "nothing"});
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "");
  redis_->Run({"SET", "text", "x"});
  auto wrong = RunStreamcar({"read", "-c", config, "text"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("not a stream"), std::string::npos) << wrong.err;
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1) << wrong.err;
}

TEST_F(LogCliTest, TailFollowsFromSinceUntilInterrupted) {
  const std::string config = Config();
  const auto ids = Fill(10);
  FoldAndTrim(ids[5]);  // the start point lies in the archive
  std::vector<std::string> from_since(ids.begin() + 3, ids.end());
  for (int signal : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(signal);
    TailProcess tail({"tail", "-c", config, "feed", "--since", ids[3]});
    ASSERT_TRUE(Eventually([&] { return Ids(tail.out()) == from_since; }, seconds(20)))
        << tail.out() << tail.err();
    from_since.emplace_back(
        redis_->Run({"XADD", "feed", "*", "live", std::to_string(signal)}).view().Str());
    ASSERT_TRUE(Eventually([&] { return Ids(tail.out()) == from_since; }, seconds(20)))
        << tail.out() << tail.err();
    EXPECT_EQ(tail.Stop(signal), 0) << tail.err();
    EXPECT_EQ(Ids(tail.out()), from_since);
    EXPECT_EQ(SanitizerReport(tail.err()), "") << tail.err();
  }
}

}  // namespace
}  // namespace streamcar::testing

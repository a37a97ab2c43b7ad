// `status`, `dlq list/replay` and `trim` (SPEC 1, 8) against a real 3-master Redis Cluster, the
// real binary: streams on different masters, one subscription whose dead-letter stream shares its
// stream's slot (the one-step replay script) and one whose dead-letter stream lives on another
// master (the two-step replay).

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/redis_cluster.h"
#include "tests/support/redis_server.h"
#include "tests/support/sidecar_process.h"

namespace streamcar::testing {
namespace {

class ClusterCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ =
        std::make_unique<RedisCluster>(RedisClusterOptions{.masters = 3, .replicas_per_master = 0});
    ASSERT_FALSE(HasFatalFailure());
    a_ = cluster_->KeyOnMaster(1, "orders");
    b_ = cluster_->KeyOnMaster(2, "payments");
    b_dlq_ = cluster_->KeyOnMaster(0, "payments-dead");
    dir_ = MakeTempDir("streamcar-cluster-cli-");
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // redis.mode is left to its default, auto: the seed says cluster_enabled:1.
  std::string Config() {
    const std::string path = dir_ + "/streamcar.yaml";
    std::ofstream(path)
        << "version: 1\nredis:\n  url: " << cluster_->SeedUrl() << "\nsubscriptions:\n"
        << "  - stream: " << a_
        << "\n    group: g\n    start: beginning\n    handler: { url: \"http://127.0.0.1:9/\" }\n"
        << "    dead_letter: { stream: \"{" << a_ << "}:dlq\" }\n"
        << "  - stream: " << b_
        << "\n    group: g\n    start: beginning\n    handler: { url: \"http://127.0.0.1:9/\" }\n"
        << "    dead_letter: { stream: " << b_dlq_ << " }\n";
    return path;
  }

  // A dead letter of `stream` (group g) in `dlq`, as the sidecar writes one.
  std::string AddDeadLetter(const std::string& dlq, const std::string& stream,
                            const std::string& original_id) {
    redis::Reply reply = cluster_->Run(dlq, {"XADD",
                                             dlq,
                                             "*",
                                             "order",
                                             "42",
                                             "streamcar.stream",
                                             stream,
                                             "streamcar.id",
                                             original_id,
                                             "streamcar.group",
                                             "g",
                                             "streamcar.attempts",
                                             "3",
                                             "streamcar.reason",
                                             "rejected",
                                             "streamcar.status",
                                             "400",
                                             "streamcar.error",
                                             "bad",
                                             "streamcar.time",
                                             "1700000000000"});
    return std::string(reply.view().Str());
  }
  int64_t Length(const std::string& key) {
    return cluster_->Run(key, {"XLEN", key}).view().Integer();
  }

  std::unique_ptr<RedisCluster> cluster_;
  std::string a_, b_, b_dlq_, dir_;
};

TEST_F(ClusterCliTest, StatusReadsEveryStreamOnItsMaster) {
  for (const auto& key : {a_, b_}) {
    cluster_->Run(key, {"XADD", key, "*", "f", "1"});
    cluster_->Run(key, {"XGROUP", "CREATE", key, "g", "0"});
  }
  cluster_->Run(b_, {"XADD", b_, "*", "f", "2"});
  AddDeadLetter(b_dlq_, b_, "1-1");
  const std::string config = Config();
  auto text = RunStreamcar({"status", "-c", config});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("redis: cluster, 3 masters\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("stream:   2 entries"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("dead letters: 1 in " + b_dlq_), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("dead letters: 0 in {" + a_ + "}:dlq"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("error:"), std::string::npos) << text.out;

  auto json = RunStreamcar({"status", "-c", config, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  rapidjson::Document doc;
  doc.Parse(json.out.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json.out;
  EXPECT_STREQ(doc["redis"]["mode"].GetString(), "cluster");
  EXPECT_EQ(doc["redis"]["masters"].GetInt(), 3);
  ASSERT_EQ(doc["subscriptions"].Size(), 2u);
  EXPECT_EQ(doc["subscriptions"][0]["length"].GetInt64(), 1);
  EXPECT_EQ(doc["subscriptions"][1]["length"].GetInt64(), 2);
  EXPECT_TRUE(doc["subscriptions"][1]["group_exists"].GetBool());
  EXPECT_EQ(doc["subscriptions"][1]["dead_letter"]["length"].GetInt64(), 1);
}

TEST_F(ClusterCliTest, DlqListAndReplayBothPaths) {
  const std::string a_dlq = "{" + a_ + "}:dlq";
  const std::string a_letter = AddDeadLetter(a_dlq, a_, "5-0");
  const std::string b_letter = AddDeadLetter(b_dlq_, b_, "6-0");
  const std::string config = Config();

  auto list = RunStreamcar({"dlq", "list", "-c", config, "--subscription", b_ + "/g"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(b_letter), std::string::npos) << list.out;

  // Same slot: the one-step script.
  auto one = RunStreamcar({"dlq", "replay", "-c", config, "--subscription", a_ + "/g"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("1 dead letters replayed onto " + a_), std::string::npos) << one.out;
  EXPECT_EQ(Length(a_), 1);
  EXPECT_EQ(Length(a_dlq), 0);

  // Another master: XADD on the stream's, then XDEL on the dead-letter stream's.
  auto two = RunStreamcar({"dlq", "replay", "-c", config, "--subscription", b_ + "/g"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.out.find("replayed " + b_letter), std::string::npos) << two.out;
  EXPECT_EQ(Length(b_), 1);
  EXPECT_EQ(Length(b_dlq_), 0);
  auto entry = cluster_->Run(b_, {"XRANGE", b_, "-", "+"});
  ASSERT_EQ(entry.view().Size(), 1u);
  EXPECT_EQ(entry.view()[0][1][0].Str(), "order");
  EXPECT_EQ(entry.view()[0][1][1].Str(), "42");
  EXPECT_EQ(entry.view()[0][1].Size(), 2u);  // the original fields only
}

// `trim` (SPEC 1, 10) on each stream's master: an archived stream on one master is folded first
// (the lease, token and watermark keys in its slot), a plain one on another is cut by Redis TIME on
// its own node; `read` still returns every entry of the archived one.
TEST_F(ClusterCliTest, TrimFoldsAndTrimsEachStreamOnItsMaster) {
  const std::string config = dir_ + "/trim.yaml";
  std::ofstream(config) << "version: 1\nredis:\n  url: " << cluster_->SeedUrl()
                        << "\nstreams:\n  - name: " << a_ << "\n    archive: true\n  - name: " << b_
                        << "\narchive:\n  url: sqlite://" << dir_ << "/archive.db\n";
  std::vector<std::string> ids;
  for (int i = 1; i <= 30; ++i) {
    ids.push_back(std::to_string(1000 + i) + "-0");
    cluster_->Run(a_, {"XADD", a_, ids.back(), "i", std::to_string(i)});
    cluster_->Run(b_, {"XADD", b_, ids.back(), "i", std::to_string(i)});
  }
  auto archived = RunStreamcar({"trim", "-c", config, a_, "--max-len", "10"});
  ASSERT_EQ(archived.exit_code, 0) << archived.err;
  EXPECT_EQ(archived.out, "folded 20 entries (20 new) up to 1020-0 into sqlite://" + dir_ +
                              "/archive.db; trimmed 20 entries (" + a_ + ": 10 left)\n");
  EXPECT_EQ(Length(a_), 10);
  const std::string watermark = "{" + a_ + "}:archive:watermark";
  EXPECT_EQ(cluster_->Run(watermark, {"GET", watermark}).view().Str(), "1020-0");
  auto read = RunStreamcar({"read", "-c", config, a_, "--count", "100"});
  ASSERT_EQ(read.exit_code, 0) << read.err;
  std::vector<std::string> read_ids;
  std::istringstream lines(read.out);
  for (std::string line; std::getline(lines, line);) read_ids.push_back(line.substr(0, 6));
  EXPECT_EQ(read_ids, ids);

  // Ids near the epoch are older than a minute on any node's clock.
  auto plain = RunStreamcar({"trim", "-c", config, b_, "--max-age", "1m"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, "trimmed 30 entries (" + b_ + ": 0 left)\n");
  EXPECT_EQ(Length(b_), 0);
}

}  // namespace
}  // namespace streamcar::testing

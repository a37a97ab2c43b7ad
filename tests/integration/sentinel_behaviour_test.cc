// Redis Sentinel as this machine's redis-server behaves: the facts the sentinel discovery of
// issue 14 rests on (notes/issue-14-plan.md section 0), pinned on a real set of one master, one
// replica and three sentinels with a password of their own.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/redis_sentinel.h"

namespace streamcar::testing {
namespace {

using std::chrono::seconds;

constexpr char kDataPassword[] = "data-secret";
constexpr char kSentinelPassword[] = "sentinel-secret";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ROLE on a fresh connection to `server`; empty when the connection fails (sentinel kills every
// normal client of a node it reconfigures, a poll included).
std::string RoleOf(const RedisServer& server) {
  auto connection = redis::Connection::Open(server.ClientOptions());
  if (!connection.ok()) return "";
  auto role = (*connection)->Run(redis::Command("ROLE"));
  return role.ok() ? std::string((*role)[0].Str()) : "";
}

// `redis-cli SUBSCRIBE +switch-master` on a sentinel, its output in a file: an independent
// subscriber (our Connection has no push-message reader).
class SwitchMasterSubscriber {
 public:
  SwitchMasterSubscriber(const RedisServer& sentinel, const std::string& dir)
      : output_(dir + "/switch-master.out") {
    pid_ = SpawnChild(
        {.argv = {"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(sentinel.port()),
                  "--no-auth-warning", "-a", kSentinelPassword, "SUBSCRIBE", "+switch-master"},
         .stdout_path = output_,
         .stderr_path = output_});
    // Subscribed when the confirmation (subscribe, +switch-master, 1) is out.
    EXPECT_TRUE(Eventually([&] { return ReadFile(output_).find("\n1\n") != std::string::npos; },
                           seconds(10)))
        << ReadFile(output_);
  }
  ~SwitchMasterSubscriber() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::string output() const { return ReadFile(output_); }

 private:
  std::string output_;
  pid_t pid_ = -1;
};

class SentinelBehaviourTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "five redis-servers and failovers: plain stage only";
    dir_ = MakeTempDir("streamcar-sentinel-test-");
    set_ = std::make_unique<SentinelSet>(
        SentinelSetOptions{.data_password = kDataPassword, .sentinel_password = kSentinelPassword});
    ASSERT_FALSE(HasFatalFailure());
  }
  void TearDown() override {
    set_.reset();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  std::string dir_;
  std::unique_ptr<SentinelSet> set_;
};

// SENTINEL FAILOVER: +switch-master carries `<name> <old-ip> <old-port> <new-ip> <new-port>`;
// the promoted replica's clients are killed at promotion; the old master stays a writable master
// for several seconds, until sentinel turns it into a replica and kills its clients (ROLE then
// names the new master).
TEST_F(SentinelBehaviourTest, FailoverPublishesSwitchMasterAndKillsOurConnections) {
  ASSERT_EQ(set_->MasterIndex(), 0);
  SwitchMasterSubscriber subscriber(set_->sentinel(1), dir_);
  auto on_replica = set_->data(1).Connect();
  auto on_master = set_->data(0).Connect();
  ASSERT_TRUE(on_replica && on_master);
  ASSERT_TRUE(on_replica->Run(redis::Command("PING")).ok());
  ASSERT_TRUE(on_master->Run(redis::Command("PING")).ok());

  const auto started = std::chrono::steady_clock::now();
  ASSERT_EQ(set_->Failover(), 1);
  const std::string payload = "mymaster 127.0.0.1 " + std::to_string(set_->data(0).port()) +
                              " 127.0.0.1 " + std::to_string(set_->data(1).port());
  EXPECT_TRUE(Eventually(
      [&] { return subscriber.output().find("\n" + payload + "\n") != std::string::npos; },
      seconds(10)))
      << subscriber.output();
  EXPECT_FALSE(on_replica->Run(redis::Command("PING")).ok())
      << "the promoted replica kept our connection";

  // Until then the old master is still a master that takes our writes (lost when it is turned
  // into a replica): a client must follow +switch-master, not wait for its connection to die.
  // Sentinel waits 8 s (4 publish periods) after it first sees the stale role before it acts.
  EXPECT_EQ(RoleOf(set_->data(0)), "master");
  const auto stale_write = on_master->Run(redis::Command("SET").Arg("stale").Arg("1"));
  EXPECT_TRUE(stale_write.ok()) << stale_write.status().message();

  // The old master is demoted only when sentinel next looks at it (its INFO period).
  EXPECT_TRUE(Eventually([&] { return RoleOf(set_->data(0)) == "slave"; }, seconds(25)));
  const auto demoted = std::chrono::steady_clock::now();
  const auto role_reply = set_->data(0).Run({"ROLE"});
  EXPECT_EQ(role_reply[2].Integer(), set_->data(1).port());
  EXPECT_FALSE(on_master->Run(redis::Command("PING")).ok())
      << "the demoted master kept our connection";
  std::cout << R"({"fact":"old master demoted after sentinel failover","after_ms":)"
            << std::chrono::duration_cast<std::chrono::milliseconds>(demoted - started).count()
            << "}\n";
}

// kill -9 of the master: the sentinels agree (quorum) and promote the replica; a sentinel refuses
// the data password (its own is separate).
TEST_F(SentinelBehaviourTest, KillOfTheMasterPromotesTheReplica) {
  SwitchMasterSubscriber subscriber(set_->sentinel(2), dir_);
  ASSERT_EQ(set_->KillMaster(), 1);
  EXPECT_EQ(set_->MasterPort(), set_->data(1).port());
  const std::string payload = "mymaster 127.0.0.1 " + std::to_string(set_->data(0).port()) +
                              " 127.0.0.1 " + std::to_string(set_->data(1).port());
  EXPECT_TRUE(Eventually(
      [&] { return subscriber.output().find("\n" + payload + "\n") != std::string::npos; },
      seconds(10)))
      << subscriber.output();
  EXPECT_EQ(std::string(set_->data(1).Run({"ROLE"})[0].Str()), "master");

  redis::ConnectionOptions wrong = set_->sentinel(0).ClientOptions();
  wrong.password = kDataPassword;
  const auto refused = redis::Connection::Open(wrong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("WRONGPASS"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace streamcar::testing

// The sidecar under Redis Sentinel (SPEC 8): one master, one replica, three sentinels. The url
// gives only the scheme, the database and the credentials (its host and port here lead nowhere),
// the sentinels have a password of their own (a wrong one is a prompt exit 1 naming the key), and
// a failover mid-run - SENTINEL FAILOVER, or kill -9 of the master - loses no entry a replica
// confirmed and leaves nothing pending.

#include <yaml-cpp/yaml.h>

#include "tests/e2e/topology_e2e.h"
#include "tests/support/redis_sentinel.h"

namespace streamcar::testing {
namespace {

constexpr char kDataPassword[] = "data-secret-7f3a";
constexpr char kSentinelPassword[] = "sentinel-secret-91c2";
constexpr int kDatabase = 2;

class SentinelTest : public TopologyE2eTest {
 protected:
  void SetUp() override {
    set_ = std::make_unique<SentinelSet>(
        SentinelSetOptions{.data_password = kDataPassword, .sentinel_password = kSentinelPassword});
    ASSERT_FALSE(HasFatalFailure());
    handler_.SetBehaviour([this](const ReceivedRequest& r) {
      deliveries_.Record(r);
      return HandlerReply{};
    });
  }

  // The redis: block for the sentinels. The url's host:port is a closed port: only its scheme,
  // database and (here: none) credentials count.
  std::string SentinelRedisYaml(const std::string& sentinel_password) const {
    return std::string("  url: redis://127.0.0.1:1/") + std::to_string(kDatabase) +
           "\n  password: " + kDataPassword +
           "\n  mode: sentinel\n  command_timeout: 2s\n  sentinel:\n    master: " +
           set_->options().master_name + "\n    addresses: " + set_->AddressesYaml() +
           "\n    password: " + sentinel_password + "\n";
  }
  TopologyConfig Config(const std::string& sentinel_password = kSentinelPassword) const {
    TopologyConfig config;
    config.redis = SentinelRedisYaml(sentinel_password);
    config.subscriptions = {{.name = "orders",
                             .stream = "orders",
                             .max_attempts = 0,
                             .min_idle = "3s",
                             .claim_interval = "500ms"}};
    return config;
  }

  // Options that reach data node `port` in the test's database.
  redis::ConnectionOptions DataOptions() const {
    redis::ConnectionOptions options = set_->data(0).ClientOptions();
    options.endpoint.db = kDatabase;
    return options;
  }
  // One command on the current master, in the test's database; an empty reply when it fails.
  redis::Reply OnMaster(const std::vector<std::string>& args) {
    redis::ConnectionOptions options = DataOptions();
    options.endpoint.port = set_->MasterPort();
    auto connection = redis::Connection::Open(options);
    if (!connection.ok()) return {};
    redis::Command command(args.front());
    for (size_t i = 1; i < args.size(); ++i) command.Arg(args[i]);
    auto reply = (*connection)->Run(command);
    return reply.ok() ? std::move(*reply) : redis::Reply{};
  }
  int64_t Pending() {
    auto reply = OnMaster({"XPENDING", "orders", "billing"});
    if (!reply.view().IsArray() || reply.view().Size() == 0) return -1;
    return reply.view()[0].Integer();
  }
  std::vector<int> SentinelPorts() const {
    std::vector<int> ports;
    for (int i = 0; i < set_->sentinel_count(); ++i) ports.push_back(set_->sentinel(i).port());
    return ports;
  }

  void StartProducer(SidecarProcess& sidecar) {
    producer_ = std::make_unique<SteadyProducer>(
        "orders", DataOptions(),
        SentinelLocator(SentinelPorts(), kSentinelPassword, set_->options().master_name),
        set_->MasterPort());
    AwaitSteadyDelivery("orders", sidecar);
  }

  std::unique_ptr<SentinelSet> set_;
};

class SentinelFaultTest : public SentinelTest {
 protected:
  void SetUp() override {
    if (UnderSanitizer()) GTEST_SKIP() << "five redis-servers, failovers: plain stage only";
    SentinelTest::SetUp();
  }
};

TEST_F(SentinelTest, DiscoversTheMasterWithSeparateSentinelAuth) {
  // A wrong sentinel password (the data password is right): a prompt exit 1 naming the key.
  {
    const auto started = std::chrono::steady_clock::now();
    auto refused = StartTopologySidecar(Config("not-the-sentinel-password"));
    refused->ExpectExit(1);
    const auto code = refused->Wait(seconds(15));
    const std::string logs = refused->Logs();
    ASSERT_TRUE(code.has_value()) << "still running after 15 s:\n" << logs;
    EXPECT_EQ(*code, 1) << logs;
    EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(15));
    EXPECT_NE(logs.find("redis.sentinel.password"), std::string::npos) << logs;
    for (const char* secret : {"not-the-sentinel-password", kDataPassword, kSentinelPassword}) {
      EXPECT_EQ(logs.find(secret), std::string::npos) << "a password in the log:\n" << logs;
    }
  }

  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    ids.emplace_back(OnMaster({"XADD", "orders", "*", "n", std::to_string(i)}).view().Str());
    ASSERT_FALSE(ids.back().empty());
  }

  // `check` keeps both passwords out of its output.
  const TopologyConfig config = Config();
  const std::string path = WriteConfig(TopologyYaml(config));
  const auto checked = RunStreamcar({"check", "-c", path});
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_EQ(checked.out.find(kDataPassword), std::string::npos) << checked.out;
  EXPECT_EQ(checked.out.find(kSentinelPassword), std::string::npos) << checked.out;
  {
    const YAML::Node effective = YAML::Load(checked.out);
    EXPECT_EQ(effective["redis"]["mode"].as<std::string>(""), "sentinel") << checked.out;
    EXPECT_EQ(effective["redis"]["sentinel"]["password"].as<std::string>(""), "***") << checked.out;
    EXPECT_EQ(effective["subscriptions"][0]["dead_letter"]["stream"].as<std::string>(""),
              "orders:dlq");
  }

  auto sidecar = StartTopologySidecar(config);
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  ASSERT_TRUE(WaitUntil([&] { return deliveries_.Total() >= 20 && Pending() == 0; }, seconds(20)))
      << sidecar->Logs();
  for (const auto& id : ids) EXPECT_EQ(deliveries_.For("orders", id).size(), 1u) << id;
  // The url's database: nothing was created in database 0.
  {
    redis::ConnectionOptions options = DataOptions();
    options.endpoint.db = 0;
    options.endpoint.port = set_->MasterPort();
    auto connection = redis::Connection::Open(options);
    ASSERT_TRUE(connection.ok());
    auto exists = (*connection)->Run(redis::Command("EXISTS").Arg("orders"));
    ASSERT_TRUE(exists.ok());
    EXPECT_EQ(exists->view().Integer(), 0);
  }
  const std::string metrics = Metrics();
  EXPECT_EQ(MetricValue(metrics, "streamcar_redis_nodes"), 1) << metrics;
  EXPECT_EQ(MetricValue(metrics, "streamcar_redis_failovers_total"), 0);
  EXPECT_EQ(MetricValue(metrics, "streamcar_redis_redirects_total", {"kind=\"moved\""}), 0);
  EXPECT_EQ(MetricValue(metrics, "streamcar_redis_redirects_total", {"kind=\"ask\""}), 0);
  const std::string logs = sidecar->Logs();
  EXPECT_EQ(logs.find(kDataPassword), std::string::npos) << logs;
  EXPECT_EQ(logs.find(kSentinelPassword), std::string::npos) << logs;
}

TEST_F(SentinelFaultTest, SentinelFailoverMidRunLosesNothing) {
  auto sidecar = StartTopologySidecar(Config());
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  const int old_port = set_->MasterPort();
  StartProducer(*sidecar);
  ASSERT_FALSE(HasFatalFailure());

  const auto fault = std::chrono::steady_clock::now();
  const int promoted = set_->Failover();
  ASSERT_GE(promoted, 0);
  // The old master keeps accepting writes until the sentinels demote it (seconds later): the
  // producer's writes there are not confirmed by a replica and do not count.
  const auto settled = SettleAndStop(fault, [&](int port) { return port != old_port; });

  Conclude(
      "orders", fault, settled, "sentinel failover", [&] { return Pending(); }, *sidecar,
      /*stall_bound=*/false);
  EXPECT_TRUE(WaitMetric("streamcar_redis_failovers_total", {}, 1)) << sidecar->Logs();
  EXPECT_EQ(Metric("streamcar_redis_nodes"), 1);
  EXPECT_TRUE(WaitReady(seconds(10))) << sidecar->Logs();
}

TEST_F(SentinelFaultTest, KillMinus9OfTheMasterMidRunLosesNothing) {
  auto sidecar = StartTopologySidecar(Config());
  ASSERT_TRUE(WaitReady(seconds(30))) << sidecar->Logs();
  const int old_port = set_->MasterPort();
  StartProducer(*sidecar);
  ASSERT_FALSE(HasFatalFailure());
  ReadyzWatcher readyz(admin_port_);

  const auto fault = std::chrono::steady_clock::now();
  const int promoted = set_->KillMaster();
  ASSERT_GE(promoted, 0);
  const auto settled = SettleAndStop(fault, [&](int port) { return port != old_port; });

  Conclude(
      "orders", fault, settled, "kill -9 of the sentinel master", [&] { return Pending(); },
      *sidecar, /*stall_bound=*/false);
  EXPECT_TRUE(WaitMetric("streamcar_redis_failovers_total", {}, 1)) << sidecar->Logs();
  // SPEC 5: not ready while the master is gone (a Redis outage of at least down-after 1 s),
  // ready again once the new one is found.
  EXPECT_TRUE(readyz.SawNotReadySince(fault));
  EXPECT_TRUE(WaitReady(seconds(10))) << sidecar->Logs();
  EXPECT_EQ(Metric("streamcar_redis_nodes"), 1);
}

}  // namespace
}  // namespace streamcar::testing

// URLs through the real binary (issue 32): a Redis password holding '@', ':', '/' and '%',
// written percent-encoded in redis.url, authenticates (an ACL user and requirepass) and is never
// printed; a handler on the IPv6 loopback "[::1]" is reached, with the brackets in its Host header.

#include <httplib.h>

#include <mutex>
#include <thread>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class UrlE2eTest : public E2eTest {
 protected:
  std::string RedisUrl(const std::string& userinfo) const {
    return "redis://" + userinfo + "@127.0.0.1:" + std::to_string(redis_->port()) + "/0";
  }

  // Delivers one entry through `sidecar`, and checks that none of `secrets` reached its logs.
  void ExpectDelivered(SidecarProcess& sidecar, const std::vector<std::string>& secrets) {
    const std::string id = Add({"k", "v"});
    ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar.Logs();
    EXPECT_EQ(handler_.Requests()[0].Header("streamcar-id"), id);
    ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << sidecar.Logs();
    for (const auto& secret : secrets) {
      EXPECT_EQ(sidecar.Logs().find(secret), std::string::npos) << secret << "\n" << sidecar.Logs();
    }
  }
};

// A handler on the IPv6 loopback that records each request's Host header and target
// (TestHandler listens on 127.0.0.1).
class Ipv6Handler {
 public:
  Ipv6Handler() {
    server_.Post(".*", [this](const httplib::Request& request, httplib::Response& response) {
      const std::lock_guard lock(mutex_);
      seen_.emplace_back(request.get_header_value("Host"), request.target);
      response.status = 200;
    });
    port_ = server_.bind_to_any_port("::1");
    if (port_ <= 0) return;  // no IPv6 loopback here
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~Ipv6Handler() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const { return port_; }
  // (Host header, request target) of each request so far.
  std::vector<std::pair<std::string, std::string>> Seen() const {
    const std::lock_guard lock(mutex_);
    return seen_;
  }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> seen_;
};

TEST_F(UrlE2eTest, PercentEncodedAclUserAndPasswordAuthenticate) {
  // The user name holds '@', the password '@', ':', '/' and '%'; the URL has each encoded.
  redis_->Run({"ACL", "SETUSER", "app@one", "on", ">p@ss:w/rd%1", "~*", "&*", "+@all"});
  SidecarConfig c;
  c.redis_url = RedisUrl("app%40one:p%40ss%3Aw%2Frd%251");
  auto sidecar = StartSidecar(c);
  ExpectDelivered(*sidecar, {"p@ss", "p%40ss", "w%2Frd"});
  // The sidecar's connections are the ACL user's, not the default user's.
  const std::string clients(redis_->Run({"CLIENT", "LIST"}).view().Str());
  EXPECT_NE(clients.find("user=app@one"), std::string::npos) << clients;
  // check prints the url with the password masked, neither encoded nor decoded.
  const auto checked = RunStreamcar({"check", "-c", sidecar->config_path()});
  EXPECT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_NE(checked.out.find("redis://app%40one:***@127.0.0.1:"), std::string::npos) << checked.out;
  EXPECT_EQ(checked.out.find("p%40ss"), std::string::npos) << checked.out;
  EXPECT_EQ(checked.out.find("p@ss"), std::string::npos) << checked.out;
}

TEST_F(UrlE2eTest, PercentEncodedRequirepassAuthenticates) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.password = "s3:cr@t/x"});
  SidecarConfig c;
  c.redis_url = RedisUrl(":s3%3Acr%40t%2Fx");
  auto sidecar = StartSidecar(c);
  ExpectDelivered(*sidecar, {"s3:cr@t", "s3%3Acr"});
}

TEST_F(UrlE2eTest, AnInvalidEscapeIsAConfigurationErrorThatPrintsNoPassword) {
  SidecarConfig c;
  c.redis_url = RedisUrl("app:s3cr%zzet");
  const auto checked = RunStreamcar({"check", "-c", WriteConfig(c)});
  EXPECT_EQ(checked.exit_code, 2) << checked.err;
  EXPECT_NE(checked.err.find("redis.url: invalid percent-escape in the password"),
            std::string::npos)
      << checked.err;
  EXPECT_NE(checked.err.find("in redis://app:***@127.0.0.1:"), std::string::npos) << checked.err;
  EXPECT_EQ(checked.err.find("s3cr"), std::string::npos) << checked.err;
}

TEST_F(UrlE2eTest, HandlerOnIpv6Loopback) {
  Ipv6Handler handler;
  if (handler.port() <= 0) GTEST_SKIP() << "no IPv6 loopback here (ip -6 addr show lo)";
  const std::string authority = "[::1]:" + std::to_string(handler.port());
  SidecarConfig c;
  c.handler_url = "HTTP://" + authority + "/orders?source=streamcar#not-sent";
  auto sidecar = StartSidecar(c);
  Add({"k", "v"});
  ASSERT_TRUE(Eventually([&] { return !handler.Seen().empty(); }, seconds(10))) << sidecar->Logs();
  const auto seen = handler.Seen();
  EXPECT_EQ(seen[0].first, authority);  // the Host header keeps the brackets
  EXPECT_EQ(seen[0].second, "/orders?source=streamcar");
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << sidecar->Logs();
  EXPECT_EQ(handler_.Count(), 0u);  // the fixture's handler on 127.0.0.1 saw nothing
}

}  // namespace
}  // namespace streamcar::testing

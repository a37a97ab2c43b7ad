// The binary over rediss:// with an ACL user restricted to its keys.

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class TlsE2eTest : public E2eTest {
 protected:
  std::string TlsYaml(const std::string& password) {
    // The keys: the stream, its dead-letter stream and its consumer-name lease (SPEC 4.7).
    redis_->Run({"ACL", "SETUSER", "billing-app", "on", ">app-secret", "~orders", "~orders:dlq",
                 "~{orders}:consumer:*", "+@all", "-@dangerous", "+info"});
    const auto& certs = redis_->certificates();
    SidecarConfig c;
    c.redis_extra = "  username: billing-app\n  password: " + password +
                    "\n  tls:\n    ca_file: " + certs.ca_cert +
                    "\n    cert_file: " + certs.client_cert +
                    "\n    key_file: " + certs.client_key + "\n";
    return Yaml(c);
  }
};

TEST_F(TlsE2eTest, DeliversOverMutualTlsAsARestrictedAclUser) {
  redis_ =
      std::make_unique<RedisServer>(RedisServerOptions{.tls = true, .tls_auth_clients = "yes"});
  SidecarProcess sidecar(TlsYaml("app-secret"));
  std::string id = Add({"k", "v"});
  ASSERT_TRUE(handler_.WaitForCount(1, seconds(10))) << sidecar.Logs();
  EXPECT_EQ(handler_.Requests()[0].Header("streamcar-id"), id);
  ASSERT_TRUE(Eventually([&] { return PendingCount() == 0; }, seconds(10))) << sidecar.Logs();
  EXPECT_TRUE(Eventually([&] { return HttpGet(admin_port_, "/readyz").first == 200; }, seconds(5)));
}

TEST_F(TlsE2eTest, WrongPasswordExitsOneAndNoSecretIsLogged) {
  redis_ =
      std::make_unique<RedisServer>(RedisServerOptions{.tls = true, .tls_auth_clients = "yes"});
  SidecarProcess sidecar(TlsYaml("wrong-secret-123"));
  sidecar.ExpectExit(1);
  auto code = sidecar.Wait(seconds(10));
  ASSERT_TRUE(code.has_value()) << sidecar.Logs();
  EXPECT_EQ(*code, 1);
  const std::string logs = sidecar.Logs();
  EXPECT_NE(logs.find("WRONGPASS"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("wrong-secret-123"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("app-secret"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("PRIVATE KEY"), std::string::npos) << logs;
}

TEST_F(TlsE2eTest, UntrustedServerExitsOneWithAClearError) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.tls = true});
  SidecarConfig c;
  c.redis_extra = "  tls:\n    ca_file: " + redis_->certificates().other_ca_cert + "\n";
  SidecarProcess sidecar(Yaml(c));
  sidecar.ExpectExit(1);
  auto code = sidecar.Wait(seconds(10));
  ASSERT_TRUE(code.has_value()) << sidecar.Logs();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(sidecar.Logs().find("not trusted"), std::string::npos) << sidecar.Logs();
}

TEST_F(TlsE2eTest, VerifyFalseWarnsAtStart) {
  redis_ = std::make_unique<RedisServer>(RedisServerOptions{.tls = true});
  SidecarConfig c;
  c.redis_extra = "  tls:\n    verify: false\n";
  SidecarProcess sidecar(Yaml(c));
  ASSERT_TRUE(WaitReady()) << sidecar.Logs();
  EXPECT_NE(sidecar.Logs().find("verification is OFF"), std::string::npos) << sidecar.Logs();
}

}  // namespace
}  // namespace streamcar::testing

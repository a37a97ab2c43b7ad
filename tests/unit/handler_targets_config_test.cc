// The keys of SPEC 11's handler targets (config/route_fields.h, config/validate.cc):
// handler.unix_socket, handler.auth and routes. Every bad value is refused with the file, the
// line and the key's path, and `check` prints each key (never the secret).

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "sidecar/config/loader.h"

namespace streamcar::config {
namespace {

EnvLookup Env(std::map<std::string, std::string> values = {}) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

// A subscription with `handler` (YAML flow items inside handler: { url, ... }) and `extra`
// (subscription keys, each line indented 4 spaces).
std::string File(const std::string& handler, const std::string& extra = "") {
  return "version: 1\nsubscriptions:\n  - stream: orders\n    group: billing\n    start: new\n"
         "    handler: { url: \"http://127.0.0.1:8080/orders\"" +
         (handler.empty() ? "" : ", " + handler) + " }\n" + extra;
}

StatusOr<Config> LoadText(const std::string& yaml, const EnvLookup& env = Env()) {
  return LoadConfigText(yaml, "test.yaml", env);
}

std::string ErrorOf(const std::string& yaml, const EnvLookup& env = Env()) {
  auto config = LoadText(yaml, env);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << yaml;
  return config.ok() ? "" : config.status().message();
}

class TokenDir {
 public:
  TokenDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "streamcar-config-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TokenDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string Write(const std::string& name, const std::string& content) const {
    std::ofstream(path_ + "/" + name, std::ios::binary) << content;
    return path_ + "/" + name;
  }
  std::string path() const { return path_; }

 private:
  std::string path_;
};

TEST(HandlerAuthConfig, KeysLoadAndCheckPrintsThePathButNeverTheSecret) {
  TokenDir dir;
  const std::string token = dir.Write("token", "eyJ.token.sig\n");
  auto config = LoadText(File("auth: { bearer_token_file: \"" + token +
                              "\", hmac_secret: \"${SECRET}\" }, unix_socket: /run/app/http.sock"),
                         Env({{"SECRET", "s3cr3t-0123456789abcdef"}}));
  ASSERT_TRUE(config.ok()) << config.status().message();
  const HandlerConfig& handler = config->subscriptions[0].handler;
  EXPECT_EQ(handler.auth.bearer_token_file, token);
  EXPECT_EQ(handler.auth.hmac_secret, "s3cr3t-0123456789abcdef");
  EXPECT_EQ(handler.unix_socket, "/run/app/http.sock");
  const std::string printed = EmitEffectiveYaml(*config);
  EXPECT_NE(printed.find("      unix_socket: /run/app/http.sock\n      auth:\n        "
                         "bearer_token_file: " +
                         token + "\n        hmac_secret: \"***\"\n"),
            std::string::npos)
      << printed;
  EXPECT_EQ(printed.find("s3cr3t"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("eyJ"), std::string::npos) << "the token itself is never read out";
}

TEST(HandlerAuthConfig, ATokenFileWithoutAUsableTokenFailsTheLoad) {
  TokenDir dir;
  const std::string missing = dir.path() + "/missing";
  EXPECT_EQ(ErrorOf(File("auth: { bearer_token_file: \"" + missing + "\" }")),
            "test.yaml:6: subscriptions[0].handler.auth.bearer_token_file: cannot read " + missing +
                ": No such file or directory");
  const std::string empty = dir.Write("empty", "\n");
  EXPECT_EQ(ErrorOf(File("auth: { bearer_token_file: \"" + empty + "\" }")),
            "test.yaml:6: subscriptions[0].handler.auth.bearer_token_file: " + empty +
                " is empty: no token to send");
  const std::string spaced = dir.Write("spaced", "two words\n");
  EXPECT_EQ(ErrorOf(File("auth: { bearer_token_file: \"" + spaced + "\" }")),
            "test.yaml:6: subscriptions[0].handler.auth.bearer_token_file: " + spaced +
                " holds a byte that cannot be in a token (whitespace, a control character or "
                "non-ASCII) at offset 3");
}

TEST(HandlerAuthConfig, AuthorizationTwiceIsRefused) {
  TokenDir dir;
  const std::string token = dir.Write("token", "t\n");
  EXPECT_EQ(ErrorOf(File("headers: { authorization: \"Bearer x\" }, auth: { bearer_token_file: \"" +
                         token + "\" }")),
            "test.yaml:3: subscriptions[0].handler.auth.bearer_token_file: handler.headers sets "
            "authorization too; the token file's bearer token is that header: remove one of them");
}

TEST(HandlerAuthConfig, AMisspeltKeyIsNamedWithTheKeyMeant) {
  EXPECT_EQ(
      ErrorOf(File("auth: { hmac_secret: x, bearer_token_fil: /t }")),
      "test.yaml:6: subscriptions[0].handler.auth.bearer_token_fil: unknown key (did you mean "
      "bearer_token_file?)");
}

TEST(UnixSocketConfig, PathRules) {
  EXPECT_EQ(ErrorOf(File("unix_socket: run/app.sock")),
            "test.yaml:6: subscriptions[0].handler.unix_socket: must be an absolute path, like "
            "/var/run/app/http.sock (got \"run/app.sock\")");
  EXPECT_EQ(ErrorOf(File("unix_socket: /" + std::string(120, 's'))),
            "test.yaml:6: subscriptions[0].handler.unix_socket: a Unix socket path has at most "
            "107 bytes (got 121)");
  // Plain HTTP over the socket, for every url of the handler.
  EXPECT_EQ(ErrorOf("version: 1\nsubscriptions:\n  - stream: orders\n    group: billing\n"
                    "    start: new\n    handler: { url: \"https://app/\", unix_socket: /s }\n"),
            "test.yaml:3: subscriptions[0].handler.url: handler.unix_socket carries plain HTTP: "
            "use an http:// url (got \"https://app/\")");
  EXPECT_EQ(ErrorOf(File("unix_socket: /s, health_url: \"https://app/h\"")),
            "test.yaml:3: subscriptions[0].handler.health_url: handler.unix_socket carries plain "
            "HTTP: use an http:// url (got \"https://app/h\")");
  EXPECT_EQ(ErrorOf(File("unix_socket: /s",
                         "    routes:\n      - { field: t, equals: a, url: \"http://app/a\" }\n"
                         "      - { field: t, equals: b, url: \"https://app/b\" }\n")),
            "test.yaml:3: subscriptions[0].routes[1].url: handler.unix_socket carries plain HTTP: "
            "use an http:// url (got \"https://app/b\")");
  // The scheme in any case (RFC 3986): HTTPS:// is https:// here too.
  EXPECT_EQ(ErrorOf(File("unix_socket: /s, health_url: \"HTTPS://app/h\"")),
            "test.yaml:3: subscriptions[0].handler.health_url: handler.unix_socket carries plain "
            "HTTP: use an http:// url (got \"HTTPS://app/h\")");
}

TEST(RoutesConfig, LoadAndPrintEveryKeyOfEachRoute) {
  auto config = LoadText(File("", R"(    routes:
      - field: type
        equals: order.created
        url: http://127.0.0.1:8080/created
      - { field: type, prefix: "order.", url: "http://127.0.0.1:8080/orders" }
      - { field: type, equals: heartbeat, drop: true }
)"));
  ASSERT_TRUE(config.ok()) << config.status().message();
  const auto& routes = config->subscriptions[0].routes;
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].equals, "order.created");
  EXPECT_FALSE(routes[0].prefix.has_value());
  EXPECT_EQ(routes[1].prefix, "order.");
  EXPECT_TRUE(routes[2].drop);
  const std::string printed = EmitEffectiveYaml(*config);
  EXPECT_NE(printed.find(R"(    routes:
      - field: type
        equals: order.created
        url: http://127.0.0.1:8080/created
        drop: false
      - field: type
        prefix: order.
        url: http://127.0.0.1:8080/orders
        drop: false
      - field: type
        equals: heartbeat
        url: ""
        drop: true
)"),
            std::string::npos)
      << printed;
  // What check prints loads again to the same (but for the comment on the default dead-letter
  // stream, which a second load reads as set).
  std::string settled = printed;
  const std::string comment = "  # {orders}:dlq if the server is a cluster";
  settled.erase(settled.find(comment), comment.size());
  EXPECT_EQ(EmitEffectiveYaml(*LoadText(printed)), settled);
}

TEST(RoutesConfig, ASubscriptionsListReplacesTheDefaults) {
  auto config = LoadText(
      "version: 1\ndefaults:\n  handler: { url: \"http://h/\" }\n"
      "  routes: [{ field: a, equals: b, drop: true }]\nsubscriptions:\n"
      "  - { stream: s1, group: g, start: new }\n"
      "  - { stream: s2, group: g, start: new, routes: [] }\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->subscriptions[0].routes.size(), 1u);
  EXPECT_TRUE(config->subscriptions[1].routes.empty());
}

TEST(RoutesConfig, EachBadRouteIsNamedByItsPath) {
  const std::string head = "    routes:\n      - { field: t, equals: a, url: \"http://h/a\" }\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"      - { field: t, equals: a, prefix: b, url: \"http://h/\" }\n",
       "test.yaml:9: subscriptions[0].routes[1].prefix: set equals or prefix, not both"},
      {"      - { field: t, url: \"http://h/\" }\n",
       "test.yaml:9: subscriptions[0].routes[1]: needs equals or prefix (what the value of field "
       "\"t\" is compared with)"},
      {"      - { field: t, equals: a, drop: true, url: \"http://h/\" }\n",
       "test.yaml:9: subscriptions[0].routes[1].url: a route with drop: true acknowledges its "
       "entries without delivering them; it has no url"},
      {"      - { field: t, equals: a }\n",
       "test.yaml:9: subscriptions[0].routes[1].url: required: where this route's entries are "
       "delivered (or drop: true to acknowledge them without a delivery)"},
      {"      - { equals: a, drop: true }\n",
       "test.yaml:9: subscriptions[0].routes[1].field: required"},
      {"      - { field: \"\", equals: a, drop: true }\n",
       "test.yaml:9: subscriptions[0].routes[1].field: must not be empty"},
      {"      - { field: t, equals: a, url: \"ftp://h/\" }\n",
       "test.yaml:9: subscriptions[0].routes[1].url: must be an http:// or https:// URL (got "
       "\"ftp://h/\")"},
      {"      - { field: t, equals: a, dropp: true }\n",
       "test.yaml:9: subscriptions[0].routes[1].dropp: unknown key (did you mean drop?)"},
      {"      - { field: t, equals: a, drop: maybe }\n",
       "test.yaml:9: subscriptions[0].routes[1].drop: must be true or false (got \"maybe\")"},
      {"      - just-a-string\n",
       "test.yaml:9: subscriptions[0].routes[1]: must be a mapping of keys to values"},
  };
  for (const auto& [route, message] : cases) {
    EXPECT_EQ(ErrorOf(File("", head + route)), message) << route;
  }
  EXPECT_EQ(ErrorOf(File("", "    routes: { field: t }\n")),
            "test.yaml:7: subscriptions[0].routes: must be a list of routes, e.g. [{field: type, "
            "equals: order.created, url: \"http://127.0.0.1:8080/created\"}]");
}

}  // namespace
}  // namespace streamcar::config

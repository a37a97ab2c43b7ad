// The one URL reader (common/url.h) by RFC 3986's cases, and what each URL key makes of it:
// redis.url (config/redis_url.h), the handler's urls and the OTLP endpoint, the archive url
// (config/url_rules.h), and a handler url split for the wire (delivery/http_target.h).

#include "sidecar/common/url.h"

#include <gtest/gtest.h>

#include "sidecar/config/loader.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/config/url_rules.h"
#include "sidecar/delivery/http_target.h"

namespace streamcar {
namespace {

Url Parse(const std::string& text, UrlRules rules = {}) {
  std::string error;
  auto url = ParseUrl(text, &error, rules);
  EXPECT_TRUE(url.has_value()) << text << ": " << error;
  return url.value_or(Url{.hosts = {UrlHost{}}});
}

std::string ErrorOf(const std::string& text, UrlRules rules = {}) {
  std::string error;
  EXPECT_FALSE(ParseUrl(text, &error, rules).has_value()) << text;
  return error;
}

config::RedisEndpoint Redis(const std::string& text) {
  std::string error;
  auto endpoint = config::ParseRedisUrl(text, &error);
  EXPECT_TRUE(endpoint.has_value()) << text << ": " << error;
  return endpoint.value_or(config::RedisEndpoint{});
}

std::string RedisError(const std::string& text) {
  std::string error;
  EXPECT_FALSE(config::ParseRedisUrl(text, &error).has_value()) << text;
  return error;
}

TEST(Url, SplitsEveryPart) {
  const Url url = Parse("http://user:pw@example.com:8080/a/b?x=1&y=2#top");
  EXPECT_EQ(url.scheme, "http");
  EXPECT_EQ(url.username, "user");
  EXPECT_EQ(url.password, "pw");
  ASSERT_EQ(url.hosts.size(), 1u);
  EXPECT_EQ(url.hosts[0].host, "example.com");
  EXPECT_EQ(url.hosts[0].port, 8080);
  EXPECT_EQ(url.hosts[0].text, "example.com:8080");
  EXPECT_EQ(url.path, "/a/b");
  EXPECT_EQ(url.query, "x=1&y=2");
  EXPECT_EQ(url.fragment, "top");
}

TEST(Url, UserInfoIsPercentDecoded) {
  // Each reserved character of a password, encoded: '@' ':' '/' '%' and '?' '#'.
  const Url url = Parse("redis://us%3Aer:p%40s%3As%2Fs%25%3F%23@h:1/0");
  EXPECT_EQ(url.username, "us:er");
  EXPECT_EQ(url.password, "p@s:s/s%?#");
  EXPECT_EQ(url.hosts[0].host, "h");
  // A user without a password, an empty password, and an unencoded '@' (the last one ends the
  // user info, as browsers read it).
  EXPECT_EQ(Parse("redis://app@h").password, std::nullopt);
  EXPECT_EQ(Parse("redis://app:@h").password, "");
  const Url raw = Parse("redis://u:p@ss@h:1");
  EXPECT_EQ(raw.password, "p@ss");
  EXPECT_EQ(raw.hosts[0].host, "h");
}

TEST(Url, AnInvalidEscapeIsAnErrorThatQuotesNoSecret) {
  for (const char* bad : {"redis://u:p%zzss@h", "redis://u:p%4@h", "redis://u:pass%@h"}) {
    const std::string error = ErrorOf(bad);
    EXPECT_NE(error.find("invalid percent-escape in the password"), std::string::npos) << error;
    EXPECT_EQ(error.find("pass"), error.find("password")) << error;  // only the word
  }
  EXPECT_NE(ErrorOf("redis://u%g1:p@h").find("in the user name"), std::string::npos);
}

TEST(Url, Ipv6LiteralsInBrackets) {
  const Url with_port = Parse("redis://[::1]:6379/0");
  EXPECT_EQ(with_port.hosts[0].host, "::1");
  EXPECT_TRUE(with_port.hosts[0].ipv6);
  EXPECT_EQ(with_port.hosts[0].port, 6379);
  EXPECT_EQ(with_port.hosts[0].text, "[::1]:6379");
  const Url without_port = Parse("http://[2001:db8::7]/x");
  EXPECT_EQ(without_port.hosts[0].host, "2001:db8::7");
  EXPECT_EQ(without_port.hosts[0].port, 0);
  EXPECT_EQ(without_port.path, "/x");
  EXPECT_NE(ErrorOf("http://[fe80::1%25eth0]:8080/").find("zone ids"), std::string::npos);
  EXPECT_NE(ErrorOf("http://[v1.x]/").find("IPvFuture"), std::string::npos);
  EXPECT_NE(ErrorOf("http://[::g]/").find("invalid IPv6 address \"[::g]\""), std::string::npos);
  EXPECT_NE(ErrorOf("http://[::1/").find("no ']'"), std::string::npos);
  EXPECT_NE(ErrorOf("http://[::1]x/").find("after ']'"), std::string::npos);
  EXPECT_NE(ErrorOf("redis://::1:6379").find("needs brackets"), std::string::npos);
}

TEST(Url, SchemeIsCaseInsensitive) {
  EXPECT_EQ(Parse("HTTPS://Example.COM/X").scheme, "https");
  EXPECT_EQ(Parse("HTTPS://Example.COM/X").path, "/X");  // the rest keeps its case
  EXPECT_EQ(UrlScheme("ReDiS://h"), "redis");
  for (const char* none : {"", "h:1", "://h", "1http://h", "ht tp://h", "http:/h"}) {
    EXPECT_EQ(UrlScheme(none), "") << none;
  }
  EXPECT_NE(ErrorOf("127.0.0.1:6379").find("not a URL"), std::string::npos);
}

TEST(Url, PortsFrom1To65535AndAnEmptyPortIsTheDefault) {
  EXPECT_EQ(Parse("http://h:1/").hosts[0].port, 1);
  EXPECT_EQ(Parse("http://h:65535/").hosts[0].port, 65535);
  EXPECT_EQ(Parse("http://h/").hosts[0].port, 0);
  EXPECT_EQ(Parse("http://h:/").hosts[0].port, 0);
  for (const char* bad : {"0", "65536", "99999", "-1", "+1", "80a", "99999999999"}) {
    EXPECT_EQ(ErrorOf(std::string("http://h:") + bad + "/"),
              std::string("invalid port \"") + bad + "\" (1 to 65535)");
  }
}

TEST(Url, HostsAreCheckedAndAnEmptyOneOnlyWhereAllowed) {
  for (const char* empty : {"http:///x", "http://:80/", "redis://u:p@/0"}) {
    EXPECT_EQ(ErrorOf(empty), "no host") << empty;
  }
  EXPECT_EQ(Parse("sqlite:///var/x.db", {.empty_host = true}).path, "/var/x.db");
  EXPECT_NE(ErrorOf("http://ex ample/").find("invalid character in the host"), std::string::npos);
  EXPECT_NE(ErrorOf("http://ex%41mple/").find("percent-encoded host"), std::string::npos);
  const Url list = Parse("postgres://u@h1:5432,[::1]:5433,h3/db", {.host_list = true});
  ASSERT_EQ(list.hosts.size(), 3u);
  EXPECT_EQ(list.hosts[1].host, "::1");
  EXPECT_EQ(list.hosts[2].port, 0);
  EXPECT_NE(ErrorOf("postgres://h1,h2:0/db", {.host_list = true}).find("invalid port"),
            std::string::npos);
}

// "redis://u:pa/ss@h": the '/' in the password ends the authority there; the error must not quote
// "pa" or "ss" as a host or port.
TEST(Url, AnUnencodedSlashInAPasswordIsNamedWithoutQuotingIt) {
  const std::string error = ErrorOf("redis://u:pa/ss@h:1/0");
  EXPECT_NE(error.find("must be percent-encoded (%2F, %3F, %23)"), std::string::npos) << error;
  EXPECT_EQ(error.find("\"pa"), std::string::npos) << error;
  const std::string redis = RedisError("redis://u:1234/zq@h:1/0");
  EXPECT_NE(redis.find("must be percent-encoded"), std::string::npos) << redis;
  EXPECT_EQ(redis.find("zq"), std::string::npos) << redis;
}

TEST(Url, PercentEncodeRoundTrips) {
  const std::string odd = "a b@c:d/e%f~g_h.i-j\x01\xff";
  EXPECT_EQ(PercentEncode("a b@c"), "a%20b%40c");
  EXPECT_EQ(PercentDecode(PercentEncode(odd)), odd);
  EXPECT_EQ(PercentDecode("%41%6a"), "Aj");
}

TEST(RedisUrlRules, DefaultsTrailingSlashAndDatabase) {
  const auto plain = Redis("redis://r");
  EXPECT_EQ(plain.port, 6379);
  EXPECT_EQ(plain.db, 0);
  EXPECT_EQ(Redis("redis://r/").db, 0);
  EXPECT_EQ(Redis("redis://r:7000/15").db, 15);
  const auto ipv6 = Redis("REDISS://[::1]/2");
  EXPECT_EQ(ipv6.kind, config::RedisEndpoint::Kind::kTls);
  EXPECT_EQ(ipv6.host, "::1");
  EXPECT_EQ(ipv6.port, 6379);
  EXPECT_EQ(ipv6.Describe(), "rediss://[::1]:6379/2");
  EXPECT_EQ(Redis("UNIX:///run/my%20redis.sock?db=3").path, "/run/my redis.sock");
}

TEST(RedisUrlRules, CredentialsDecodedAndNeverPrinted) {
  const auto e = Redis("redis://app%20one:p%40ss%3Aw%2Fd@r:6379/0");
  EXPECT_EQ(e.username, "app one");
  EXPECT_EQ(e.password, "p@ss:w/d");
  EXPECT_EQ(e.Describe(), "redis://app%20one:***@r:6379/0");
  const std::string error = RedisError("redis://app:p%40ss@r:99999/0");
  EXPECT_EQ(error, "invalid port \"99999\" (1 to 65535) in redis://app:***@r:99999/0");
  const std::string escape = RedisError("redis://app:p%4ss@r/0");
  EXPECT_EQ(escape.find("p%4ss"), std::string::npos) << escape;
  EXPECT_NE(escape.find("in redis://app:***@r/0"), std::string::npos) << escape;
  EXPECT_EQ(config::MaskUrlPassword("redis://u:p%40ss@h"), "redis://u:***@h");
}

TEST(RedisUrlRules, RefusesWhatIsNotARedisEndpoint) {
  EXPECT_EQ(RedisError("redis://r/x"), "invalid database \"x\" (an integer from 0) in redis://r/x");
  EXPECT_NE(RedisError("redis://r/-1").find("invalid database"), std::string::npos);
  EXPECT_NE(RedisError("redis://r/0?password=x").find("no ?parameters"), std::string::npos);
  EXPECT_NE(RedisError("redis://r/0?password=x").find("password=***"), std::string::npos);
  EXPECT_EQ(RedisError("redis://:6379/0"), "no host in redis://:6379/0");
  EXPECT_NE(RedisError("unix://host/s.sock").find("absolute socket path"), std::string::npos);
  EXPECT_NE(RedisError("http://r").find("must start with redis://"), std::string::npos);
}

TEST(HttpUrlRules, HandlerAndOtlpUrls) {
  EXPECT_EQ(config::CheckHttpUrl("HTTP://[::1]:8080/x?y=1"), "");
  EXPECT_EQ(config::CheckHttpUrl("http://h:0/"), "invalid port \"0\" (1 to 65535) in http://h:0/");
  EXPECT_EQ(config::CheckHttpUrl("http://u:secret@h/"),
            "credentials are not sent from the URL (put them in the handler's headers or auth) in "
            "http://u:***@h/");
  EXPECT_NE(config::CheckHttpUrl("ftp://h/").find("must be an http:// or https:// URL"),
            std::string::npos);
  EXPECT_EQ(config::CheckOtlpEndpoint("Http://collector:4318/v1/traces"), "");
  EXPECT_NE(config::CheckOtlpEndpoint("HTTPS://collector/").find("plain HTTP"), std::string::npos);
  EXPECT_NE(config::CheckOtlpEndpoint("http://[::1/").find("no ']'"), std::string::npos);
}

TEST(ArchiveUrlRules, SqliteAndPostgres) {
  std::string error;
  auto sqlite = config::ParseArchiveUrl("SQLITE:///var/lib/my%20log.db", &error);
  ASSERT_TRUE(sqlite) << error;
  EXPECT_EQ(sqlite->kind, config::ArchiveUrl::Kind::kSqlite);
  EXPECT_EQ(sqlite->sqlite_path, "/var/lib/my log.db");
  for (const char* bad : {"sqlite://relative.db", "sqlite:///", "sqlite:///a.db?mode=ro"}) {
    EXPECT_NE(config::CheckArchiveUrl(bad).find("sqlite:///absolute/path"), std::string::npos)
        << bad;
  }
  for (const char* good : {"postgres://u:p%40w@h:5432/db", "postgresql://h1,h2:5433/db",
                           "postgres:///db?host=/run/pg", "postgres://[::1]/db"}) {
    EXPECT_EQ(config::CheckArchiveUrl(good), "") << good;
  }
  auto upper = config::ParseArchiveUrl("POSTGRES://u:p@h/db", &error);
  ASSERT_TRUE(upper) << error;
  EXPECT_EQ(upper->postgres_uri, "postgres://u:p@h/db");  // libpq knows the lower-case prefix
  EXPECT_EQ(config::CheckArchiveUrl("postgres://u:pw@h:70000/db"),
            "invalid port \"70000\" (1 to 65535) in postgres://u:***@h:70000/db");
  EXPECT_NE(config::CheckArchiveUrl("postgres://u:p%zz@h/db").find("postgres://u:***@h/db"),
            std::string::npos);
}

TEST(HttpTargetSplit, Ipv6HostHeaderKeepsBrackets) {
  const auto target = delivery::SplitUrl("http://[fe80::1]:8080/x");
  EXPECT_EQ(target.host, "fe80::1");
  EXPECT_EQ(target.port, 8080);
  EXPECT_EQ(target.authority, "[fe80::1]:8080");
  EXPECT_EQ(target.path, "/x");
  EXPECT_EQ(delivery::SplitUrl("http://[::1]/").authority, "[::1]");
  EXPECT_EQ(delivery::SplitUrl("http://[::1]/").port, 80);
}

TEST(HttpTargetSplit, SchemeCaseDefaultsPathAndQuery) {
  const auto tls = delivery::SplitUrl("HTTPS://Example.com");
  EXPECT_TRUE(tls.tls);
  EXPECT_EQ(tls.port, 443);
  EXPECT_EQ(tls.path, "/");
  EXPECT_EQ(tls.origin, "https://Example.com");
  const auto query = delivery::SplitUrl("http://h:/p/?a=1&b=%20c#frag");
  EXPECT_EQ(query.port, 80);
  EXPECT_EQ(query.authority, "h");
  EXPECT_EQ(query.path, "/p/?a=1&b=%20c");
  EXPECT_EQ(delivery::SplitUrl("http://h?x").path, "/?x");
}

// check prints a percent-encoded password masked, and the connection gets it decoded.
TEST(RedisUrlRules, CheckMasksAPercentEncodedPassword) {
  auto config = config::LoadConfigText(
      "version: 1\nredis: { url: \"redis://app:s%40qz%3At@r:6379/0\" }\n"
      "subscriptions: [{ stream: s, group: g, start: new, handler: { url: \"http://h/\" } }]\n",
      "test.yaml", [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->redis.endpoint.password, "s@qz:t");
  const std::string yaml = config::EmitEffectiveYaml(*config);
  EXPECT_NE(yaml.find("redis://app:***@r:6379/0"), std::string::npos) << yaml;
  EXPECT_EQ(yaml.find("qz"), std::string::npos) << yaml;
}

// A unix:// url's user info is its credentials, as redis://'s: it was accepted and then never
// sent (NOAUTH at run time).
TEST(RedisUrlRules, AUnixUrlsUserInfoIsItsCredentials) {
  const auto e = Redis("unix://alice:p%40ss%3Aw%2Frd%25@/run/redis.sock?db=2");
  EXPECT_EQ(e.kind, config::RedisEndpoint::Kind::kUnix);
  EXPECT_EQ(e.path, "/run/redis.sock");
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.username, "alice");
  EXPECT_EQ(e.password, "p@ss:w/rd%");
}

// SPEC 2: check prints every password-like URL parameter as "***", in every url it prints.
TEST(HttpUrlRules, CheckMasksPasswordLikeParametersOfEveryUrl) {
  auto config = config::LoadConfigText(
      "version: 1\nredis: { url: \"redis://r:6379/0\" }\n"
      "tracing: { otlp_endpoint: \"http://c:4318/v1/traces?token=OTLPSECRET\" }\n"
      "subscriptions: [{ stream: s, group: g, start: new, handler: { url: "
      "\"http://h/?api_key=HSECRET&n=1\", health_url: \"http://h/h?password=HEALTHSECRET\" } }]\n",
      "test.yaml", [](const std::string&) { return std::nullopt; });
  ASSERT_TRUE(config.ok()) << config.status().message();
  const std::string yaml = config::EmitEffectiveYaml(*config);
  EXPECT_EQ(yaml.find("SECRET"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("http://h/?api_key=***&n=1"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("http://h/h?password=***"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("http://c:4318/v1/traces?token=***"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace streamcar

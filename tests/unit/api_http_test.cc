// The log API's pure pieces (SPEC section 10): JSON bodies and answers, routes and query strings,
// and the bearer token file (the request parser: tests/unit/http_request_test.cc).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sidecar/http/json_error.h"
#include "sidecar/log/api_json.h"
#include "sidecar/log/api_route.h"
#include "sidecar/log/api_token.h"
#include "tests/support/redis_server.h"

namespace streamcar::log {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

TEST(ApiJsonTest, ObjectMembersBecomeFieldsInOrder) {
  auto fields = FieldsFromJson(
      R"({"s":"a\"b\\c\u00e9\u0000","n":-1.5e3,"t":true,"f":false,"z":null,"a":[1, "x" ,{}],)"
      R"("o":{ "k" : [ ] },"s":"again"})");
  ASSERT_TRUE(fields.ok()) << fields.status().message();
  EXPECT_EQ(*fields, (Fields{{"s", std::string("a\"b\\c\xc3\xa9\0", 8)},
                             {"n", "-1.5e3"},
                             {"t", "true"},
                             {"f", "false"},
                             {"z", "null"},
                             {"a", "[1,\"x\",{}]"},
                             {"o", "{\"k\":[]}"},
                             {"s", "again"}}));
}

TEST(ApiJsonTest, NumbersKeepTheirTextNestedOrNot) {
  auto fields = FieldsFromJson(
      R"({"big":123456789012345678901234567890,"price":12.50,"list":[1.0, 2E+2, {"x": -0}]})");
  ASSERT_TRUE(fields.ok()) << fields.status().message();
  EXPECT_EQ(*fields, (Fields{{"big", "123456789012345678901234567890"},
                             {"price", "12.50"},
                             {"list", "[1.0,2E+2,{\"x\":-0}]"}}));
}

TEST(ApiJsonTest, RefusesWhatIsNotAnObjectOfFields) {
  for (const char* bad : {"", "{", "[]", "\"x\"", "1", "null", "{}", "{\"a\":1} {}", "{\"a\":1,}",
                          "{'a':1}", "{\"a\":01}", "{\"a\":\"\xff\"}", "// c\n{\"a\":1}"}) {
    auto fields = FieldsFromJson(bad);
    EXPECT_FALSE(fields.ok()) << bad;
    if (!fields.ok()) {
      EXPECT_EQ(fields.status().code(), StatusCode::kInvalid) << bad;
    }
  }
}

TEST(ApiJsonTest, RefusesDeepNestingBeforeParsing) {
  std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  auto fields = FieldsFromJson(deep);
  ASSERT_FALSE(fields.ok());
  EXPECT_NE(fields.status().message().find("nested deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_TRUE(FieldsFromJson("{\"a\":\"" + std::string(1000, '[') + "\"}").ok());
  EXPECT_TRUE(FieldsFromJson("{\"a\":" + std::string(60, '[') + std::string(60, ']') + "}").ok());
}

TEST(ApiJsonTest, Answers) {
  EXPECT_EQ(http::ErrorJson("bad \"x\"\n"), R"({"error":"bad \"x\"\n"})");
  const http::Response refused = http::JsonError(403, "origin_not_allowed");
  EXPECT_EQ(refused.status, 403);
  EXPECT_EQ(refused.content_type, "application/json");
  EXPECT_EQ(refused.body, R"({"error":"origin_not_allowed"})");
  EXPECT_EQ(NonMonotonicJson("5-1"), R"({"error":"nonmonotonic","top":"5-1"})");
  EXPECT_EQ(ReceiptJson("5-1", "feed"), R"({"id":"5-1","stream":"feed"})");
  StreamEntry entry;
  entry.id = "7-0";
  entry.fields = {{"a", "1"}, {"bin", std::string("\xff\x00", 2)}};
  EXPECT_EQ(PageJson({entry}, std::nullopt),
            R"({"entries":[{"id":"7-0","fields":{"a":"1","bin":"/wA="},"base64_fields":["bin"]}],)"
            R"("next":null})");
  EXPECT_EQ(PageJson({}, std::string("7-0")), R"({"entries":[],"next":"7-0"})");
}

TEST(ApiRouteTest, StreamOfPath) {
  auto name = [](const std::string& path) -> std::string {
    auto result = StreamOfPath(path);
    if (!result.ok()) return "<invalid>";
    return result->value_or("<none>");
  };
  EXPECT_EQ(name("/v1/streams/feed/entries"), "feed");
  EXPECT_EQ(name("/v1/streams/a%2Fb%3Ac/entries"), "a/b:c");
  EXPECT_EQ(name("/v1/streams/a+b/entries"), "a+b");  // '+' is a space only in a query
  EXPECT_EQ(name("/v1/streams//entries"), "<none>");
  EXPECT_EQ(name("/v1/streams/a/b/entries"), "<none>");
  EXPECT_EQ(name("/v1/streams/feed"), "<none>");
  EXPECT_EQ(name("/v1/streams/feed/entries/"), "<none>");
  EXPECT_EQ(name("/v2/streams/feed/entries"), "<none>");
  EXPECT_EQ(name("/v1/streams/a%2/entries"), "<invalid>");
}

TEST(ApiRouteTest, ParsesQueries) {
  auto query = ParseQuery("since=2025-11-30T15%3A30%3A00%2B01%3A00&count=5&&x&y=a+b");
  ASSERT_TRUE(query.ok());
  EXPECT_EQ(
      *query,
      (Fields{{"since", "2025-11-30T15:30:00+01:00"}, {"count", "5"}, {"x", ""}, {"y", "a b"}}));
  EXPECT_FALSE(ParseQuery("a=%zz").ok());
  EXPECT_FALSE(ParseQuery("a=%").ok());
}

TEST(ApiTokenTest, SecretEqualsComparesWholeValues) {
  EXPECT_TRUE(SecretEquals("abc", "abc"));
  EXPECT_FALSE(SecretEquals("abc", "abd"));
  EXPECT_FALSE(SecretEquals("abc", "ab"));
  EXPECT_FALSE(SecretEquals("ab", "abc"));
  EXPECT_FALSE(SecretEquals("", "a"));
  EXPECT_TRUE(SecretEquals("", ""));
}

TEST(ApiTokenTest, AllowsTheFileContentAndFollowsItsChanges) {
  const std::string dir = testing::MakeTempDir("streamcar-token-");
  const std::string path = dir + "/token";
  std::ofstream(path) << "first-token\n";
  TokenFile token(path);
  EXPECT_TRUE(token.Allows("Bearer first-token"));
  EXPECT_TRUE(token.Allows("bearer first-token"));  // the scheme is case-insensitive
  EXPECT_FALSE(token.Allows("Bearer first-token\n"));
  EXPECT_FALSE(token.Allows("Bearer first"));
  EXPECT_FALSE(token.Allows("Basic first-token"));
  EXPECT_FALSE(token.Allows("first-token"));
  EXPECT_FALSE(token.Allows(""));

  std::ofstream(path) << "second-token-longer\n";  // another size: seen at once
  EXPECT_TRUE(token.Allows("Bearer second-token-longer"));
  EXPECT_FALSE(token.Allows("Bearer first-token"));

  // A Kubernetes Secret update swaps the file: a new inode.
  std::ofstream(dir + "/next") << "third-token-longerr\n";
  std::filesystem::rename(dir + "/next", path);
  EXPECT_TRUE(token.Allows("Bearer third-token-longerr"));

  std::ofstream(path) << "\n";  // empty: every request refused
  EXPECT_FALSE(token.Allows("Bearer "));
  EXPECT_FALSE(token.Allows("Bearer third-token-longerr"));
  std::filesystem::remove(path);  // missing: every request refused
  EXPECT_FALSE(token.Allows("Bearer third-token-longerr"));
  std::ofstream(path) << "back\n";
  EXPECT_TRUE(token.Allows("Bearer back"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace streamcar::log

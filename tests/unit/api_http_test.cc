// The log API's pure pieces (SPEC section 10): the strict request parser, chunked bodies, JSON
// bodies and answers, routes and query strings, and the bearer token file.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sidecar/log/api_json.h"
#include "sidecar/log/api_request.h"
#include "sidecar/log/api_route.h"
#include "sidecar/log/api_token.h"
#include "tests/support/redis_server.h"

namespace streamcar::log {
namespace {

std::optional<HeadProblem> Parse(const std::string& head, ApiRequest* request = nullptr) {
  ApiRequest scratch;
  return ParseRequestHead(head, request != nullptr ? request : &scratch);
}

int StatusOf(const std::string& head) {
  auto problem = Parse(head);
  return problem ? problem->status : 0;
}

TEST(ApiRequestTest, ParsesAWellFormedHead) {
  ApiRequest request;
  ASSERT_FALSE(
      Parse("POST /v1/streams/a%20b/entries?since=1&count=2 HTTP/1.1\r\nHost: x\r\n"
            "Content-Type:application/json \r\nContent-Length: 12\r\n\r\n",
            &request));
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.path, "/v1/streams/a%20b/entries");
  EXPECT_EQ(request.query, "since=1&count=2");
  EXPECT_EQ(request.content_length, 12u);
  EXPECT_FALSE(request.chunked);
  EXPECT_TRUE(request.keep_alive);
  ASSERT_NE(request.Header("content-type"), nullptr);
  EXPECT_EQ(*request.Header("content-type"), "application/json");
}

TEST(ApiRequestTest, ConnectionHeaderAndVersionDecideKeepAlive) {
  ApiRequest request;
  ASSERT_FALSE(Parse("GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n", &request));
  EXPECT_FALSE(request.keep_alive);
  ASSERT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n", &request));
  EXPECT_FALSE(request.keep_alive);
  ASSERT_FALSE(Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &request));
  EXPECT_TRUE(request.keep_alive);
}

TEST(ApiRequestTest, RefusesEveryAmbiguousFraming) {
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
            400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 3\r\n  folded\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 3\r\n\tfolded\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\nContent-Length: 3\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length: 3\nX: y\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
                     "chunked\r\n\r\n"),
            400);
  EXPECT_EQ(StatusOf("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
  for (const char* length : {"+3", "-1", "3,3", "0x3", "", "3 3", "99999999999999999999999"}) {
    EXPECT_EQ(StatusOf(std::string("POST / HTTP/1.1\r\nContent-Length: ") + length + "\r\n\r\n"),
              400)
        << length;
  }
}

TEST(ApiRequestTest, RefusesMalformedRequestLines) {
  EXPECT_EQ(StatusOf("GET http://h/v1 HTTP/1.1\r\n\r\n"), 400);  // absolute form
  EXPECT_EQ(StatusOf("GET  / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/1.1 \r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(StatusOf("GET / FTP/1.0\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf(std::string("GET /\x01 HTTP/1.1\r\n\r\n")), 400);
  EXPECT_EQ(StatusOf(std::string("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 27)), 400);
  // Any control character but a tab in a field value (found by api_fuzzer: BEL was accepted).
  for (const char* value : {"a\ab", "\x1b[31m", "a\x7f"}) {
    EXPECT_EQ(StatusOf(std::string("GET / HTTP/1.1\r\nX: ") + value + "\r\n\r\n"), 400) << value;
  }
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nX: a\tb \xc3\xa9\r\n\r\n"), 0);  // tab, space, obs-text
}

TEST(ApiRequestTest, FindsTheEndOfTheHead) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\n\r\nbody"), 18u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: x\r\n"), std::string::npos);
}

TEST(ApiRequestTest, DecodesChunkedBodies) {
  std::string body;
  std::optional<HeadProblem> problem;
  const std::string whole = "3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  EXPECT_EQ(DecodeChunked(whole, 100, &body, &problem), whole.size() - 4);
  EXPECT_FALSE(problem);
  EXPECT_EQ(body, "abc0123456789");
  // Every proper prefix needs more input.
  for (size_t n = 0; n + 4 < whole.size(); ++n) {
    problem.reset();
    EXPECT_EQ(DecodeChunked(whole.substr(0, n), 100, &body, &problem), 0u) << n;
    EXPECT_FALSE(problem) << n;
  }
  problem.reset();
  DecodeChunked("zz\r\nabc\r\n", 100, &body, &problem);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 400);
  problem.reset();
  DecodeChunked("3\r\nabcX\r\n", 100, &body, &problem);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 400);
  problem.reset();
  DecodeChunked("8\r\n12345678\r\n8\r\n", 10, &body, &problem);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 413);
  problem.reset();
  DecodeChunked("FFFFFFFFFFFFFFFF\r\n", 10, &body, &problem);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 413);
}

// The server feeds the decoder a buffer that grows read by read: with a ChunkedState each call
// decodes only what is new (linear in the body, not quadratic in the number of reads).
TEST(ApiRequestTest, DecodesChunkedBodiesIncrementally) {
  const std::string whole = "3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  std::string in;
  std::string body;
  ChunkedState state;
  size_t used = 0;
  for (size_t n = 0; n < whole.size() && used == 0; ++n) {
    in.push_back(whole[n]);
    std::optional<HeadProblem> problem;
    used = DecodeChunked(in, 100, &body, &problem, &state);
    EXPECT_FALSE(problem) << n;
  }
  EXPECT_EQ(used, whole.size() - 4);
  EXPECT_EQ(body, "abc0123456789");

  // A resumed call starts where the last one stopped: bytes before that are not decoded again
  // (overwritten here, a fresh decode would call them malformed).
  in = "3\r\nabc\r\n4\r\nde";
  body.clear();
  state = ChunkedState{};
  std::optional<HeadProblem> problem;
  EXPECT_EQ(DecodeChunked(in, 100, &body, &problem, &state), 0u);
  EXPECT_EQ(state.at, 8u);  // the start of the second chunk's size line
  in.replace(0, 8, std::string(8, '#'));
  in += "fg\r\n0\r\n\r\n";
  EXPECT_EQ(DecodeChunked(in, 100, &body, &problem, &state), in.size());
  EXPECT_FALSE(problem);
  EXPECT_EQ(body, "abcdefg");

  // max_body counts the chunks of earlier calls.
  in = "8\r\n12345678\r\n";
  body.clear();
  state = ChunkedState{};
  EXPECT_EQ(DecodeChunked(in, 10, &body, &problem, &state), 0u);
  EXPECT_FALSE(problem);
  in += "8\r\n";
  DecodeChunked(in, 10, &body, &problem, &state);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->status, 413);
}

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
  EXPECT_EQ(ErrorJson("bad \"x\"\n"), R"({"error":"bad \"x\"\n"})");
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

// The one request parser of the inbound HTTP server (http/request.h): strict framing of heads and
// chunked bodies, trailers and chunk extensions included, and exactly one Host.

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "sidecar/http/request.h"

namespace streamcar::http {
namespace {

// The head as given: for the Host rule itself.
std::optional<HeadProblem> ParseAsIs(const std::string& head, Request* request = nullptr) {
  Request scratch;
  return ParseRequestHead(head, request != nullptr ? request : &scratch);
}

// The head with "Host: x" after its first CRLF, so that a case tests the rule it is about (and
// not the missing Host).
std::optional<HeadProblem> Parse(const std::string& head, Request* request = nullptr) {
  std::string with_host = head;
  const size_t line_end = with_host.find("\r\n");
  if (line_end != std::string::npos) with_host.insert(line_end + 2, "Host: x\r\n");
  return ParseAsIs(with_host, request);
}

int StatusOf(const std::string& head) {
  auto problem = Parse(head);
  return problem ? problem->status : 0;
}

int StatusAsIs(const std::string& head) {
  auto problem = ParseAsIs(head);
  return problem ? problem->status : 0;
}

TEST(HttpRequestTest, ParsesAWellFormedHead) {
  Request request;
  ASSERT_FALSE(
      ParseAsIs("POST /v1/streams/a%20b/entries?since=1&count=2 HTTP/1.1\r\nHost: x\r\n"
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

TEST(HttpRequestTest, ConnectionHeaderAndVersionDecideKeepAlive) {
  Request request;
  ASSERT_FALSE(Parse("GET / HTTP/1.1\r\nConnection: Keep-Alive, close\r\n\r\n", &request));
  EXPECT_FALSE(request.keep_alive);
  ASSERT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n", &request));
  EXPECT_FALSE(request.keep_alive);
  ASSERT_FALSE(Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &request));
  EXPECT_TRUE(request.keep_alive);
}

TEST(HttpRequestTest, RefusesEveryAmbiguousFraming) {
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

TEST(HttpRequestTest, RefusesMalformedRequestLines) {
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

TEST(HttpRequestTest, FindsTheEndOfTheHead) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\n\r\nbody"), 18u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: x\r\n"), std::string::npos);
}

TEST(HttpRequestTest, DecodesChunkedBodies) {
  std::string body;
  std::optional<HeadProblem> problem;
  const std::string whole = "3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Sum: x\r\n\r\nNEXT";
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
TEST(HttpRequestTest, DecodesChunkedBodiesIncrementally) {
  const std::string whole = "3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Sum: x\r\n\r\nNEXT";
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

TEST(HttpRequestTest, RequiresExactlyOneHostOnHttp11) {
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n"), 400);
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.1\r\nHOST: a\r\n\r\n"), 0);
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0);  // empty is allowed (RFC 9112 3.2)
  // HTTP/1.0 predates Host: none is fine, two are not.
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.0\r\n\r\n"), 0);
  EXPECT_EQ(StatusAsIs("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
}

int ChunkedStatus(const std::string& in) {
  std::string body;
  std::optional<HeadProblem> problem;
  const size_t used = DecodeChunked(in, 1000, &body, &problem);
  if (problem) return problem->status;
  return used > 0 ? 200 : 0;  // 0: wants more input
}

TEST(HttpRequestTest, ChecksChunkExtensions) {
  for (const char* line :
       {"3;a", "3;a=b", "3 ;a", "3; a = b", "3;a=\"q \\\" ;\"", "3;a;b=c;d", "3;a=\"\\\\\""}) {
    EXPECT_EQ(ChunkedStatus(std::string(line) + "\r\nabc\r\n0\r\n\r\n"), 200) << line;
  }
  // A bare LF in an extension hides a request from a front end that ends lines at LF (F6).
  EXPECT_EQ(ChunkedStatus("9;ext\nGET /v1/streams/EXT/entries HTTP/1.1\r\n"), 400);
  for (const char* line : {"3;", "3;=b", "3;a=", "3;a=\"open", "3 ", "3x", "3;a b", "3;a=b c",
                           "3;a\x01", "3;a=\"\x01\"", "3\r", ";a"}) {
    EXPECT_EQ(ChunkedStatus(std::string(line) + "\r\nabc\r\n0\r\n\r\n"), 400) << line;
  }
}

TEST(HttpRequestTest, ChecksTrailerFields) {
  EXPECT_EQ(ChunkedStatus("0\r\nX-Sum: abc\r\nX-Other:\t1\r\n\r\n"), 200);
  // A request hidden behind a bare LF in the trailers (F6).
  EXPECT_EQ(ChunkedStatus("0\r\nX: a\n\nGET /v1/streams/TRAILER/entries HTTP/1.1\r\nHost: x\r\n"
                          "\r\n"),
            400);
  for (const char* trailer :
       {"X: \x01", "no colon", "X : a", " folded: a", "X(: a", "Content-Length: 99",
        "Transfer-Encoding: chunked", "Host: other", "Connection: close", "Trailer: X"}) {
    EXPECT_EQ(ChunkedStatus(std::string("0\r\n") + trailer + "\r\n\r\n"), 400) << trailer;
  }
}

}  // namespace
}  // namespace streamcar::http

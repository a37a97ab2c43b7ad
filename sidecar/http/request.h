#pragma once
// The request side of HTTP/1.1 for every inbound server (the admin port and the log API), strict
// on purpose: a server may sit behind a proxy, and any framing the two could read differently is
// a request-smuggling door. So a head is refused (400, and the connection closed) when it has both
// Content-Length and Transfer-Encoding, two Content-Length fields, a Transfer-Encoding other than
// "chunked", an obsolete line folding, a bare LF line ending, whitespace before a colon, a field
// name that is not an RFC 9110 token, a control character other than a tab in a field value, or
// (HTTP/1.1, RFC 9112 3.2) no Host field or more than one. A chunked body is refused when a chunk
// extension is not token[=token|quoted-string] or a trailer field is malformed, carries a control
// character or is one that frames or routes the request (Content-Length, Transfer-Encoding, Host,
// ...): a front end that reads these differently would see another request in them. Pure code:
// no sockets, so every rule is unit-tested (and fuzzed: tests/fuzz/api_fuzzer.cc).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace streamcar::http {

struct Request {
  std::string method;
  std::string path;   // the target up to '?', still percent-encoded
  std::string query;  // after '?', "" when none
  // Field names lower-cased, values with surrounding blanks removed, in arrival order.
  std::vector<std::pair<std::string, std::string>> headers;
  bool keep_alive = true;
  bool chunked = false;  // Transfer-Encoding: chunked
  std::optional<uint64_t> content_length;
  std::string body;

  // The value of the only field `lower_name`, or nullptr when absent.
  const std::string* Header(std::string_view lower_name) const;
  // True when the head announced a body (chunked, or a Content-Length above 0).
  bool HasBody() const { return chunked || content_length.value_or(0) > 0; }
};

struct HeadProblem {
  int status = 400;
  std::string message;
};

// Where the head (request line and fields, with its blank line) ends in `in`: the index after
// "\r\n\r\n", or npos while incomplete.
size_t FindHeadEnd(std::string_view in);

// Parses `head` (up to and including the blank line) into *request. Returns the problem when the
// head is refused; the connection must then be closed after answering.
std::optional<HeadProblem> ParseRequestHead(std::string_view head, Request* request);

// Where a chunked decode stopped for more input: the next call resumes there instead of
// decoding the body again from its start (which would be quadratic in the number of reads).
struct ChunkedState {
  size_t at = 0;          // the offset in `in` where decoding resumes (the start of a line)
  bool trailers = false;  // the last chunk was read; `at` is in the trailer fields
};

// Decodes a chunked body at the start of `in` (RFC 9112 7.1; chunk extensions checked and
// ignored, trailer fields checked and discarded). Returns the bytes of `in` it consumed once the
// last chunk and trailers are whole, 0 while more input is needed; *problem is set when the
// framing is malformed (400) or the body would exceed `max_body` (413). With `state`, a call
// continues where the previous one on the same `in` (grown at its end only) and the same `body`
// stopped; without, it starts over.
size_t DecodeChunked(std::string_view in, uint64_t max_body, std::string* body,
                     std::optional<HeadProblem>* problem, ChunkedState* state = nullptr);

}  // namespace streamcar::http

#pragma once
// Answers of the inbound HTTP/1.1 server as bytes. Pure code.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace streamcar::http {

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides the framing ones
  bool close = false;  // close the connection after this answer
};

// Status line, headers (Content-Type, Content-Length, Cache-Control: no-store, Connection: close
// when closing) and, unless `head_only` (the answer to HEAD), the body.
std::string SerializeResponse(const Response& response, bool head_only = false);

// The head of an event stream (text/event-stream, no length: the stream ends with the
// connection, so it always says Connection: close).
std::string SerializeStreamHead(const Response& head);

}  // namespace streamcar::http

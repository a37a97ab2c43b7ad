#pragma once
// Answers of the log API (SPEC section 10) as HTTP/1.1 bytes. Pure code.

#include <string>
#include <utility>
#include <vector>

namespace streamcar::log {

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides the framing ones
  bool close = false;  // close the connection after this answer

  // {"error":"<message>"} with `status`.
  static ApiResponse Error(int status, std::string_view message);
};

// Status line, headers (Content-Type, Content-Length, Cache-Control, Connection: close when
// closing) and body.
std::string SerializeResponse(const ApiResponse& response);

}  // namespace streamcar::log

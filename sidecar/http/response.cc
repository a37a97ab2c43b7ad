#include "sidecar/http/response.h"

#include "sidecar/common/http_reason.h"

namespace streamcar::http {
namespace {

std::string StatusAndFields(const Response& response) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " +
                    HttpReasonPhrase(response.status) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  return out;
}

std::string ExtraFields(const Response& response) {
  std::string out = "Cache-Control: no-store\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  return out;
}

}  // namespace

std::string SerializeResponse(const Response& response, bool head_only) {
  std::string out = StatusAndFields(response);
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += ExtraFields(response);
  if (response.close) out += "Connection: close\r\n";
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

std::string SerializeStreamHead(const Response& head) {
  return StatusAndFields(head) + ExtraFields(head) + "Connection: close\r\n\r\n" + head.body;
}

}  // namespace streamcar::http

#include "sidecar/log/api_response.h"

#include "sidecar/common/http_reason.h"
#include "sidecar/log/api_json.h"

namespace streamcar::log {

ApiResponse ApiResponse::Error(int status, std::string_view message) {
  ApiResponse response;
  response.status = status;
  response.body = ErrorJson(message);
  return response;
}

std::string SerializeResponse(const ApiResponse& response) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " +
                    HttpReasonPhrase(response.status) + "\r\n";
  out += "Content-Type: " + response.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  out += "Cache-Control: no-store\r\n";
  for (const auto& [name, value] : response.headers) out += name + ": " + value + "\r\n";
  if (response.close) out += "Connection: close\r\n";
  out += "\r\n";
  out += response.body;
  return out;
}

}  // namespace streamcar::log

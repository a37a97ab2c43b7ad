#include "sidecar/http/response.h"

#include "sidecar/common/http_reason.h"

namespace streamcar::http {
namespace {

// Each answer is built in one string, grown once (an append answer is written per request).
size_t FieldsSize(const Response& response) {
  size_t size = 128 + response.content_type.size();
  for (const auto& [name, value] : response.headers) size += name.size() + value.size() + 4;
  return size;
}

void AppendStatusAndFields(const Response& response, std::string* out) {
  out->append("HTTP/1.1 ").append(std::to_string(response.status)).append(" ");
  out->append(HttpReasonPhrase(response.status)).append("\r\n");
  out->append("Content-Type: ").append(response.content_type).append("\r\n");
}

void AppendExtraFields(const Response& response, std::string* out) {
  out->append("Cache-Control: no-store\r\n");
  for (const auto& [name, value] : response.headers) {
    out->append(name).append(": ").append(value).append("\r\n");
  }
}

}  // namespace

std::string SerializeResponse(const Response& response, bool head_only) {
  std::string out;
  out.reserve(FieldsSize(response) + (head_only ? 0 : response.body.size()));
  AppendStatusAndFields(response, &out);
  out.append("Content-Length: ").append(std::to_string(response.body.size())).append("\r\n");
  AppendExtraFields(response, &out);
  if (response.close) out.append("Connection: close\r\n");
  out.append("\r\n");
  if (!head_only) out.append(response.body);
  return out;
}

std::string SerializeStreamHead(const Response& head) {
  std::string out;
  out.reserve(FieldsSize(head) + head.body.size());
  AppendStatusAndFields(head, &out);
  AppendExtraFields(head, &out);
  out.append("Connection: close\r\n\r\n").append(head.body);
  return out;
}

}  // namespace streamcar::http

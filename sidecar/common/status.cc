#include "sidecar/common/status.h"

namespace streamcar {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kIo:
      return "io";
    case StatusCode::kTimeout:
      return "timeout";
    case StatusCode::kServerError:
      return "server error";
    case StatusCode::kProtocol:
      return "protocol";
    case StatusCode::kInvalid:
      return "invalid";
    case StatusCode::kFatal:
      return "fatal";
    case StatusCode::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string Status::server_prefix() const {
  if (code_ != StatusCode::kServerError && code_ != StatusCode::kFatal) return {};
  auto space = message_.find(' ');
  return message_.substr(0, space);
}

bool Status::IsServerError(std::string_view prefix) const {
  return (code_ == StatusCode::kServerError || code_ == StatusCode::kFatal) &&
         server_prefix() == prefix;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace streamcar

#include "sidecar/common/tls_util.h"

#include <arpa/inet.h>
#include <openssl/err.h>

namespace streamcar {

std::string TakeOpenSslError() {
  const unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
  std::string text;
  if (code != 0) {
    const char* reason = ERR_reason_error_string(code);
    if (reason != nullptr) {
      text = reason;
    } else {
      char buffer[256];
      ERR_error_string_n(code, buffer, sizeof(buffer));
      text = buffer;
    }
  }
  ERR_clear_error();
  return text.empty() ? "unknown TLS error" : text;
}

bool IsIpAddress(const std::string& host) {
  in6_addr v6{};
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

}  // namespace streamcar

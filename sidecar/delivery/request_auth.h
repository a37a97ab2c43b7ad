#pragma once
// handler.auth (SPEC 11): what every request to the handler carries so that the handler knows it
// comes from this sidecar and that its body is what the sidecar sent. Every request means every
// one the handler client makes: deliveries (one entry or a batch, any format, any route) and the
// health check (its body is empty); and format dapr's GET /dapr/subscribe at start
// (app/dapr_subscribe.cc, empty body too).
//
// - bearer_token_file: "Authorization: Bearer <token>", the file followed as it rotates
//   (bearer_token.h).
// - hmac_secret: "Streamcar-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
//   "<t>.<body>")>", over the exact body bytes sent, as webhook providers sign (Stripe's
//   scheme): the handler recomputes it, compares in constant time, and refuses a `t` too far from
//   its clock, so a captured request cannot be replayed later (examples/ verify it so).
//
// Single-threaded (the subscription's loop); the clock is passed in.

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/config/config.h"
#include "sidecar/delivery/bearer_token.h"
#include "sidecar/delivery/http1_codec.h"

namespace streamcar::delivery {

inline constexpr std::string_view kSignatureHeader = "Streamcar-Signature";

class RequestAuth {
 public:
  // nullptr when `auth` asks for nothing; kInvalid when the token file holds no usable token now.
  static StatusOr<std::unique_ptr<RequestAuth>> Create(const config::HandlerAuthConfig& auth,
                                                       SteadyTime now);
  ~RequestAuth();
  RequestAuth(const RequestAuth&) = delete;
  RequestAuth& operator=(const RequestAuth&) = delete;

  // Appends Authorization and/or Streamcar-Signature for a request with `body`, as of `clock`.
  void AddHeaders(std::string_view body, const Clock& clock, http1::HeaderList* headers);

 private:
  RequestAuth() = default;

  std::optional<BearerToken> token_;
  // HMAC-SHA256 keyed with the secret once; each signature works on a copy.
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* keyed_ = nullptr;
};

// "t=<unix_seconds>,v1=<hex HMAC-SHA256(secret, "<unix_seconds>.<body>")>"; for tests and for
// RequestAuth, which keeps the keyed state instead of the secret.
std::string SignatureHeaderValue(std::string_view secret, int64_t unix_seconds,
                                 std::string_view body);

}  // namespace streamcar::delivery

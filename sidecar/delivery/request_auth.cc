#include "sidecar/delivery/request_auth.h"

#include <openssl/core_names.h>
#include <openssl/params.h>

#include <array>
#include <utility>

#include "sidecar/common/log.h"

namespace streamcar::delivery {
namespace {

constexpr size_t kSha256Bytes = 32;

// A new HMAC-SHA256 context keyed with `secret` (nullptr when OpenSSL cannot make one, which
// only a broken installation does).
EVP_MAC_CTX* KeyedContext(EVP_MAC* mac, std::string_view secret) {
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  if (ctx == nullptr) return nullptr;
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_END};
  if (EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                   params) != 1) {
    EVP_MAC_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

// "t=<t>,v1=<hex>" from a copy of the keyed context `keyed`; "" when OpenSSL fails (out of
// memory: nothing else can make an HMAC of a keyed context fail).
std::string Sign(const EVP_MAC_CTX* keyed, int64_t unix_seconds, std::string_view body) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string t = std::to_string(unix_seconds);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(keyed);
  if (ctx == nullptr) return {};
  std::array<unsigned char, kSha256Bytes> out{};
  size_t length = 0;
  const bool signed_ok =
      EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(t.data()), t.size()) == 1 &&
      EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>("."), 1) == 1 &&
      EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(body.data()), body.size()) == 1 &&
      EVP_MAC_final(ctx, out.data(), &length, out.size()) == 1;
  EVP_MAC_CTX_free(ctx);
  if (!signed_ok || length != out.size()) return {};
  std::string value = "t=" + t + ",v1=";
  for (unsigned char byte : out) {
    value += kHex[byte >> 4];
    value += kHex[byte & 0xf];
  }
  return value;
}

}  // namespace

StatusOr<std::unique_ptr<RequestAuth>> RequestAuth::Create(const config::HandlerAuthConfig& auth,
                                                           SteadyTime now) {
  if (auth.bearer_token_file.empty() && auth.hmac_secret.empty()) return {nullptr};
  std::unique_ptr<RequestAuth> made(new RequestAuth());
  if (!auth.bearer_token_file.empty()) {
    auto token = BearerToken::Open(auth.bearer_token_file, now);
    if (!token.ok()) return token.status();
    made->token_.emplace(std::move(*token));
  }
  if (!auth.hmac_secret.empty()) {
    made->mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (made->mac_ != nullptr) made->keyed_ = KeyedContext(made->mac_, auth.hmac_secret);
    if (made->keyed_ == nullptr) {
      return Status(StatusCode::kFatal, "handler.auth.hmac_secret: OpenSSL has no HMAC-SHA256");
    }
  }
  return made;
}

RequestAuth::~RequestAuth() {
  EVP_MAC_CTX_free(keyed_);
  EVP_MAC_free(mac_);
}

void RequestAuth::AddHeaders(std::string_view body, const Clock& clock,
                             http1::HeaderList* headers) {
  if (token_) headers->emplace_back("Authorization", token_->HeaderValue(clock.Now()));
  if (keyed_ != nullptr) {
    // Whole seconds, rounded down, as a Unix timestamp is.
    const int64_t unix_seconds = clock.WallMillis() / 1000;
    std::string signature = Sign(keyed_, unix_seconds, body);
    if (signature.empty()) {
      // Sent unsigned: the handler refuses it, and the entry is retried.
      LogError("handler.auth.hmac_secret: OpenSSL could not sign a request; sent unsigned");
      return;
    }
    headers->emplace_back(std::string(kSignatureHeader), std::move(signature));
  }
}

std::string SignatureHeaderValue(std::string_view secret, int64_t unix_seconds,
                                 std::string_view body) {
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  EVP_MAC_CTX* keyed = mac == nullptr ? nullptr : KeyedContext(mac, secret);
  std::string value = keyed == nullptr ? std::string() : Sign(keyed, unix_seconds, body);
  EVP_MAC_CTX_free(keyed);
  EVP_MAC_free(mac);
  return value;
}

}  // namespace streamcar::delivery

// The low-level SHA1_* calls, deprecated in OpenSSL 3 in favour of EVP, on purpose: EVP (and
// the one-shot SHA1(), built on it) loads and initialises the default provider, which costs
// about 2 MiB of resident memory in a sidecar that otherwise needs no cryptography unless TLS is
// configured (measured with OpenSSL 3.0: +2.2 MiB against +0.2 MiB).
#define OPENSSL_SUPPRESS_DEPRECATED
#include "sidecar/redis/script.h"

#include <openssl/sha.h>

namespace streamcar::redis {

Script::Script(std::string_view body) : body_(body) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA_CTX context;
  SHA1_Init(&context);
  SHA1_Update(&context, body_.data(), body_.size());
  SHA1_Final(digest, &context);
  static constexpr char kHex[] = "0123456789abcdef";
  sha_.reserve(size_t{2} * SHA_DIGEST_LENGTH);
  for (unsigned char byte : digest) {
    sha_ += kHex[byte >> 4];
    sha_ += kHex[byte & 0x0F];
  }
}

Command Script::Call(const std::vector<std::string_view>& keys) const {
  Command command("EVALSHA");
  command.Arg(sha_).Arg(static_cast<int64_t>(keys.size()));
  for (auto key : keys) command.Arg(key);
  return command;
}

Command Script::Load() const { return Command("SCRIPT").Arg("LOAD").Arg(body_); }

bool IsNoScript(const ReplyView& reply) {
  return reply.IsError() && reply.Str().starts_with("NOSCRIPT");
}

}  // namespace streamcar::redis

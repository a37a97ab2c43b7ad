#include "sidecar/redis/script.h"

#include <openssl/sha.h>

namespace streamcar::redis {

Script::Script(std::string_view body) : body_(body) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(body_.data()), body_.size(), digest);
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

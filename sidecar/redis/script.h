#pragma once
// A Lua script sent as EVALSHA. Steps whose second command must run only if the first succeeded
// (a dead letter's XADD then XACK) or that must check the owner of an entry in the same step as
// claiming it are scripts: MULTI/EXEC does not roll back a command that fails during EXEC, and a
// failing redis.call() stops a script before its next command.
//
// A connection loads every script it needs once after it connects (SCRIPT LOAD); a NOSCRIPT
// reply (the server restarted or an operator ran SCRIPT FLUSH) means "load again, then retry".

#include <string>
#include <string_view>
#include <vector>

#include "sidecar/redis/reply.h"

namespace streamcar::redis {

class Script {
 public:
  explicit Script(std::string_view body);

  const std::string& body() const { return body_; }
  const std::string& sha() const { return sha_; }

  // EVALSHA <sha> <number of keys> <keys...>; add the ARGV with Arg().
  Command Call(const std::vector<std::string_view>& keys) const;
  Command Load() const;

 private:
  std::string body_;
  std::string sha_;  // lowercase hex SHA1 of the body, as Redis names scripts
};

// True for the reply Redis gives to EVALSHA of a script it does not have.
bool IsNoScript(const ReplyView& reply);

}  // namespace streamcar::redis

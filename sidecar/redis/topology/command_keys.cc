#include "sidecar/redis/topology/command_keys.h"

#include <cctype>
#include <charconv>
#include <span>

#include "sidecar/keys/key_slot.h"

namespace streamcar::redis {
namespace {

bool EqualsUpper(std::string_view text, std::string_view upper) {
  if (text.size() != upper.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(text[i])) != upper[i]) return false;
  }
  return true;
}

bool IsOneOf(std::string_view name, std::span<const std::string_view> names) {
  for (std::string_view candidate : names) {
    if (EqualsUpper(name, candidate)) return true;
  }
  return false;
}

// Commands whose first key is their first argument (the ones we send, and their near kin).
constexpr std::string_view kKeyFirst[] = {
    "XADD",   "XRANGE",   "XREVRANGE",  "XLEN",      "XTRIM",   "XDEL",    "XACK",    "XACKDEL",
    "XDELEX", "XPENDING", "XAUTOCLAIM", "XCLAIM",    "XSETID",  "TYPE",    "GET",     "SET",
    "SETNX",  "SETEX",    "PSETEX",     "GETDEL",    "GETEX",   "DEL",     "UNLINK",  "EXISTS",
    "EXPIRE", "PEXPIRE",  "EXPIREAT",   "PEXPIREAT", "TTL",     "PTTL",    "PERSIST", "INCR",
    "INCRBY", "DECR",     "DECRBY",     "HSET",      "HGET",    "HGETALL", "HDEL",    "HINCRBY",
    "HMGET",  "ZADD",     "ZREM",       "ZRANGE",    "ZSCORE",  "SADD",    "SREM",    "SMEMBERS",
    "LPUSH",  "RPUSH",    "LRANGE",     "DUMP",      "RESTORE", "STRLEN",  "APPEND",  "MGET",
    "WATCH"};
// Subcommand families whose key is the argument after the subcommand (XINFO STREAM <key>).
constexpr std::string_view kKeyAfterSubcommand[] = {"XINFO", "XGROUP", "MEMORY", "OBJECT"};
// Scripts and functions: <script|sha|function> <numkeys> <key>...
constexpr std::string_view kScriptCalls[] = {"EVAL",       "EVALSHA", "EVAL_RO",
                                             "EVALSHA_RO", "FCALL",   "FCALL_RO"};

}  // namespace

std::vector<std::string> ArgumentsOf(const Command& command) {
  // The encoding is ours (Command::Arg): "*<n>\r\n" then "$<len>\r\n<bytes>\r\n" per argument.
  const std::string encoded = command.Encode();
  std::vector<std::string> args;
  args.reserve(command.arg_count());
  size_t pos = encoded.find("\r\n");
  if (pos == std::string::npos) return args;
  pos += 2;
  while (pos < encoded.size() && encoded[pos] == '$') {
    const size_t line_end = encoded.find("\r\n", pos);
    if (line_end == std::string::npos) break;
    size_t length = 0;
    const auto parsed =
        std::from_chars(encoded.data() + pos + 1, encoded.data() + line_end, length);
    if (parsed.ec != std::errc() || line_end + 2 + length > encoded.size()) break;
    args.emplace_back(encoded, line_end + 2, length);
    pos = line_end + 2 + length + 2;
  }
  return args;
}

std::optional<std::string_view> FirstKeyOf(const std::vector<std::string>& args) {
  if (args.empty()) return std::nullopt;
  const std::string_view name = args[0];
  if (IsOneOf(name, kKeyFirst)) {
    if (args.size() < 2) return std::nullopt;
    return std::string_view(args[1]);
  }
  if (IsOneOf(name, kKeyAfterSubcommand)) {
    // XINFO HELP, XGROUP HELP, MEMORY STATS ... name no key.
    if (args.size() < 3) return std::nullopt;
    return std::string_view(args[2]);
  }
  if (IsOneOf(name, kScriptCalls)) {
    if (args.size() < 4) return std::nullopt;
    int64_t numkeys = 0;
    const std::string& text = args[2];
    const auto parsed = std::from_chars(text.data(), text.data() + text.size(), numkeys);
    if (parsed.ec != std::errc() || numkeys < 1) return std::nullopt;
    return std::string_view(args[3]);
  }
  if (EqualsUpper(name, "XREAD") || EqualsUpper(name, "XREADGROUP")) {
    // [GROUP g c] [COUNT n] [BLOCK ms] [NOACK] STREAMS key... id...: the first key follows the
    // first STREAMS (a group or consumer named "STREAMS" sits at a fixed place before it).
    size_t i = 1;
    if (EqualsUpper(name, "XREADGROUP")) i = 4;  // XREADGROUP GROUP <group> <consumer>
    for (; i + 1 < args.size(); ++i) {
      if (EqualsUpper(args[i], "STREAMS")) return std::string_view(args[i + 1]);
    }
    return std::nullopt;
  }
  // PING, INFO, SCRIPT, CLIENT, COMMAND, CLUSTER, PUBLISH (cluster-wide), ROLE, WAIT, MULTI,
  // EXEC, ASKING and anything unknown.
  return std::nullopt;
}

std::optional<std::string> FirstKeyOf(const Command& command) {
  const auto args = ArgumentsOf(command);
  const auto key = FirstKeyOf(args);
  if (!key) return std::nullopt;
  return std::string(*key);
}

int SlotOf(const Command& command) {
  const auto key = FirstKeyOf(command);
  return key ? keys::KeySlot(*key) : -1;
}

}  // namespace streamcar::redis

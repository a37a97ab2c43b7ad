#pragma once
// Canned Redis replies for unit tests: RESP bytes decoded by hiredis's redisReader, exactly as a
// connection decodes what a server sends.

#include <hiredis.h>

#include <string>
#include <string_view>
#include <vector>

#include "sidecar/redis/reply.h"

namespace streamcar::testing {

// The one reply `resp` holds; a nil view (IsNil) when the bytes are not one whole reply.
inline redis::Reply ReplyOf(std::string_view resp) {
  redis::ReaderPtr reader = redis::NewReader();
  redisReaderFeed(reader.get(), resp.data(), resp.size());
  void* raw = nullptr;
  if (redisReaderGetReply(reader.get(), &raw) != REDIS_OK) raw = nullptr;
  return redis::Reply(redis::ReplyPtr(static_cast<redisReply*>(raw)));
}

// RESP pieces, to write canned replies readably.
inline std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}
inline std::string Int(int64_t n) { return ":" + std::to_string(n) + "\r\n"; }
inline std::string Err(std::string_view text) { return "-" + std::string(text) + "\r\n"; }
inline std::string Nil() { return "$-1\r\n"; }
inline std::string NilArray() { return "*-1\r\n"; }
inline std::string Arr(const std::vector<std::string>& items) {
  std::string out = "*" + std::to_string(items.size()) + "\r\n";
  for (const auto& item : items) out += item;
  return out;
}
// [id, [f, v, ...]]
inline std::string EntryResp(std::string_view id, const std::vector<std::string>& fields) {
  std::vector<std::string> flat;
  for (const auto& f : fields) flat.push_back(Bulk(f));
  return Arr({Bulk(id), Arr(flat)});
}

// The arguments of a command, decoded from its RESP bytes (the command is an array of bulks).
inline std::vector<std::string> ArgsOf(const redis::Command& command) {
  redis::Reply reply = ReplyOf(command.Encode());
  std::vector<std::string> args;
  for (size_t i = 0; i < reply.view().Size(); ++i) args.emplace_back(reply.view()[i].Str());
  return args;
}

}  // namespace streamcar::testing

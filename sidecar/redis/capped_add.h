#pragma once
// The capped XADD as a command, for appends that need no script: the C++ twin of capped_add.lua
// (capped_add_lua.h), which the scripts that append use. Both spell
//   XADD key [MAXLEN ~ max_len] id
// and the caller appends the fields. max_len 0 means no cap.

#include <cstdint>
#include <string_view>

#include "sidecar/redis/reply.h"

namespace streamcar::redis {

inline Command CappedAdd(std::string_view key, int64_t max_len, std::string_view id) {
  Command add("XADD");
  add.Arg(key);
  if (max_len != 0) add.Arg("MAXLEN").Arg("~").Arg(max_len);
  add.Arg(id);
  return add;
}

}  // namespace streamcar::redis

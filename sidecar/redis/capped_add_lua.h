#pragma once
// A Lua function shared by the scripts that append to a stream (the one-step dead letter, the
// log API's append, the fenced dead letter), so that the capped XADD is spelled once:
//   capped_add(key, max_len, id) -> {'XADD', key, ['MAXLEN', '~', max_len,] id}
// max_len is the argument string; '0' means no cap. The caller appends the fields and calls it.
// The text is redis/lua/capped_add.lua; its C++ twin, for appends without a script, is
// capped_add.h.

#include <string_view>

#include "sidecar/redis/lua/capped_add.lua.h"

namespace streamcar::redis {

inline constexpr std::string_view kCappedAddLua = lua::kCappedAdd;

}  // namespace streamcar::redis

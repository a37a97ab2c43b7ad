#pragma once
// A Lua function shared by the scripts that append to a stream (the one-step dead letter, the
// log API's append, the fenced dead letter), so that the capped XADD is spelled once:
//   capped_add(key, max_len, id) -> {'XADD', key, ['MAXLEN', '~', max_len,] id}
// max_len is the argument string; '0' means no cap. The caller appends the fields and calls it.

#include <string_view>

namespace streamcar::redis {

inline constexpr std::string_view kCappedAddLua = R"lua(
local function capped_add(key, max_len, id)
  local add = {'XADD', key}
  if max_len ~= '0' then
    add[#add + 1] = 'MAXLEN'
    add[#add + 1] = '~'
    add[#add + 1] = max_len
  end
  add[#add + 1] = id
  return add
end
)lua";

}  // namespace streamcar::redis

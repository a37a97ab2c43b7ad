
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

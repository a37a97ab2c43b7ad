
-- KEYS: 1 meta, 2 members, 3 sessions, 4 target, 5 owner, 6 tokens, 7 instances, 8 progress,
--       9 free, 10 events (heartbeat.h, keys::CoordinatorKeys, names them).
-- ARGV: 1 memberId, 2 memberEpoch (0 join, -1 leave, -2 static leave), 3 instanceId,
--       4 owned shards "3,5", 5 revoking "3:DRAINING,4:REVOKED", 6 fence conflicts "3:17",
--       7 metadata version seen, 8 shard count, 9 session ms, 10 rebalance ms,
--       11 initial delay ms, 12 minimum assignment interval ms, 13 heartbeat ms,
--       14 protocol version, 15 schema,
--       16 progress "3:<last acked id>:<in flight>:<pending>:<ms since that ack>,...",
--       17 static takeover (immediate | wait), 18 pod, 19 host,
--       20 steps the member's fences refused since its last heartbeat "read:2,ack:1" (absent
--          from members before it: none),
--       21 stall timeout ms (0 or absent: shards are not judged), 22 revoke stalled ("1": yes).
--       A progress item may carry a sixth field: the entries the member knows to wait in the
--       shard (held, or pending and lag read after its last acknowledgement).
-- Reply: {status, member epoch, group epoch, assignment epoch, metadata version, heartbeat ms,
--         session ms, rebalance ms, assigned "3:1742,5:1743", pending "9", detail,
--         members, unowned shards, oldest unowned age ms, target computations,
--         this member's reported shards judged stalled "3,5"}.
local META, MEMBERS, SESSIONS, TARGET, OWNER, TOKENS, INSTANCES, PROGRESS, FREE, EVENTS =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local SCHEMA, PROTOCOL, MAX_SHARDS = 1, 1, 4096  -- kProtocolVersion, kSchemaVersion, keys::kMaxShards
local FLIP_LIMIT, FLIP_WINDOW_MS = 3, 60000

local id, epoch, instance = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local shard_count = tonumber(ARGV[8])
local session_ms, rebalance_ms = tonumber(ARGV[9]), tonumber(ARGV[10])
local initial_delay_ms, min_interval_ms = tonumber(ARGV[11]), tonumber(ARGV[12])
local heartbeat_ms, protocol, schema = tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15])
local static_takeover, pod, host = ARGV[17], ARGV[18], ARGV[19]
local stall_ms, revoke_stalled = tonumber(ARGV[21] or '') or 0, ARGV[22] == '1'

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)

-- Empty fields are kept ("0::1:2" is four fields: an empty last acked id is one); "" is none.
local function split(text, separator)
  local out = {}
  if text == nil or text == '' then return out end
  local from = 1
  while true do
    local at = string.find(text, separator, from, true)
    if not at then
      out[#out + 1] = string.sub(text, from)
      return out
    end
    out[#out + 1] = string.sub(text, from, at - 1)
    from = at + 1
  end
end
local function join(list) return table.concat(list, ',') end
local function set_of(list)
  local set = {}
  for _, value in ipairs(list) do set[value] = true end
  return set
end
local function without(list, drop)
  local out = {}
  for _, value in ipairs(list) do if not drop[value] then out[#out + 1] = value end end
  return out
end
-- A shard index from a request: an integer in [0, shard count), else nil.
local function shard_of(text)
  local shard = tonumber(text)
  if shard == nil or shard ~= math.floor(shard) or shard < 0 or shard >= shard_count then
    return nil
  end
  return shard
end
-- Stored lists were written by this script: no validation.
local function stored_shards(text)
  local out = {}
  for _, part in ipairs(split(text, ',')) do out[#out + 1] = tonumber(part) end
  return out
end

-- HSET of many pairs in chunks: Lua's unpack() stops near 8000 values.
local function hset_pairs(key, pairs_list)
  for first = 1, #pairs_list, 1000 do
    local set = {'HSET', key}
    for i = first, math.min(first + 999, #pairs_list) do set[#set + 1] = pairs_list[i] end
    redis.call(unpack(set))
  end
end

local function event(kind, fields)
  local add = {'XADD', EVENTS, 'MAXLEN', '~', 1000, '*', 'type', kind}
  for i = 1, #fields, 2 do
    add[#add + 1] = fields[i]
    add[#add + 1] = tostring(fields[i + 1])
  end
  redis.call(unpack(add))
end

-- The refused steps are the data plane's (each shard's own slot cannot reach this one): one
-- `fenced_ops` event per report, whatever else this heartbeat says, so that `status` can count
-- them (C2 "fenced ops (10m)"). Only well-formed "op:count" items are kept.
do
  local ops, seen, total = {}, {}, 0
  for _, part in ipairs(split(ARGV[20], ',')) do
    local op, count = string.match(part, '^(%l[%l_]*):(%d+)$')
    count = tonumber(count)
    -- Each op once, at most 8 of them (there are six): a report stays one small event.
    if op ~= nil and #op <= 16 and not seen[op] and #ops < 8 and count ~= nil and count > 0 and
        count < 1e9 then
      seen[op] = true
      ops[#ops + 1] = op .. ':' .. count
      total = total + count
    end
  end
  if total > 0 then event('fenced_ops', {'member', id, 'count', total, 'ops', join(ops)}) end
end

-- Meta: loaded as a table, written back at the end when something changed.
local meta, meta_dirty, state_changed = {}, false, false
do
  local flat = redis.call('HGETALL', META)
  for i = 1, #flat, 2 do meta[flat[i]] = tonumber(flat[i + 1]) or flat[i + 1] end
end

local stalled_shards = {}  -- this member's reported shards judged stalled (B6.1)
local function reply(status, rec, pending, detail)
  if state_changed then
    meta.metadata_version = meta.metadata_version + 1
    meta_dirty = true
  end
  if meta_dirty then
    local set = {'HSET', META}
    for field, value in pairs(meta) do
      set[#set + 1] = field
      set[#set + 1] = value
    end
    redis.call(unpack(set))
  end
  local assigned = {}
  if rec and #rec.a > 0 then
    local tokens = redis.call('HMGET', TOKENS, unpack(rec.a))
    for i, shard in ipairs(rec.a) do assigned[#assigned + 1] = shard .. ':' .. (tokens[i] or 0) end
  end
  local oldest = 0
  for _, since in ipairs(redis.call('HVALS', FREE)) do
    local age = now - tonumber(since)
    if age > oldest then oldest = age end
  end
  return {status, rec and rec.e or 0, meta.group_epoch or 0, meta.assignment_epoch or 0,
          meta.metadata_version or 0, heartbeat_ms, session_ms, rebalance_ms,
          table.concat(assigned, ','), join(pending or {}), detail or '',
          redis.call('HLEN', MEMBERS), redis.call('HLEN', FREE), oldest, meta.targets or 0,
          join(stalled_shards)}
end

-- Step 1: load or create meta. A newer schema or another shard count is refused before any write.
if shard_count == nil or shard_count < 1 or shard_count > MAX_SHARDS or
   shard_count ~= math.floor(shard_count) then
  return {'INVALID_REQUEST', 0, 0, 0, 0, heartbeat_ms or 0, session_ms or 0, rebalance_ms or 0,
          '', '', 'shard count ' .. ARGV[8] .. ' is not in 1..' .. MAX_SHARDS, 0, 0, 0, 0, ''}
end
if meta.schema == nil then
  meta = {schema = SCHEMA, shard_count = shard_count, group_epoch = 1, assignment_epoch = 1,
          fence_seq = 0, metadata_version = 0, assign_not_before = 0, last_assign = 0,
          targets = 0}
  meta_dirty = true
  local free = {}
  for shard = 0, shard_count - 1 do
    free[#free + 1] = shard
    free[#free + 1] = now
  end
  redis.call('DEL', FREE)
  hset_pairs(FREE, free)
elseif meta.schema > SCHEMA then
  return reply('INVALID_REQUEST', nil, nil,
               'the group state has schema ' .. meta.schema .. '; this sidecar understands ' ..
               SCHEMA .. ': upgrade it')
elseif meta.shard_count ~= shard_count then
  return reply('INVALID_REQUEST', nil, nil,
               'the group has ' .. meta.shard_count .. ' shards; this member is configured for ' ..
               shard_count .. ' (resharding is not supported)')
end
if protocol ~= PROTOCOL or schema ~= SCHEMA then
  return reply('INVALID_REQUEST', nil, nil, 'protocol ' .. tostring(protocol) .. ' schema ' ..
               tostring(schema) .. ' is not protocol ' .. PROTOCOL .. ' schema ' .. SCHEMA)
end

-- The request's shard lists, validated: a bad index is an invalid request, never a write.
local owned, revoking, conflicts = {}, {}, {}
for _, part in ipairs(split(ARGV[4], ',')) do
  local shard = shard_of(part)
  if shard == nil then return reply('INVALID_REQUEST', nil, nil, 'owned shard ' .. part) end
  owned[#owned + 1] = shard
end
for _, part in ipairs(split(ARGV[5], ',')) do
  local pair = split(part, ':')
  local shard = shard_of(pair[1])
  if shard == nil or (pair[2] ~= 'DRAINING' and pair[2] ~= 'REVOKED') then
    return reply('INVALID_REQUEST', nil, nil, 'revoking shard ' .. part)
  end
  revoking[shard] = pair[2]
  -- A draining shard is still held, whether or not the member listed it as owned too.
  if pair[2] == 'DRAINING' then owned[#owned + 1] = shard end
end
for _, part in ipairs(split(ARGV[6], ',')) do
  local pair = split(part, ':')
  local shard, installed = shard_of(pair[1]), tonumber(pair[2] or '')
  if shard == nil or installed == nil then
    return reply('INVALID_REQUEST', nil, nil, 'fence conflict ' .. part)
  end
  conflicts[shard] = installed
end
local owned_set = set_of(owned)
owned = {}
for shard in pairs(owned_set) do owned[#owned + 1] = shard end
table.sort(owned)

local function load_member(member)
  local raw = redis.call('HGET', MEMBERS, member)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  rec.a, rec.r, rec.t = stored_shards(rec.a), stored_shards(rec.r), stored_shards(rec.t)
  return rec
end
local function save_member(member, rec)
  local copy = {}
  for field, value in pairs(rec) do copy[field] = value end
  copy.a, copy.r, copy.t = join(rec.a), join(rec.r), join(rec.t)
  redis.call('HSET', MEMBERS, member, cjson.encode(copy))
end
-- Each membership change moves the group epoch. The next target computation names what moved
-- it (C2: "assignment epoch 42 (member c0d1…9a joined)"), or how many changes when several did.
local function bump_group_epoch(member, change)
  meta.group_epoch = meta.group_epoch + 1
  meta.changes = (meta.changes or 0) + 1
  meta.change_member, meta.change = member, change
  meta_dirty = true
end

-- A shard's grant to `member` ends: the shard is free for its target owner (I2: only here).
local function release(shard, member)
  if redis.call('HGET', OWNER, shard) == member then
    redis.call('HDEL', OWNER, shard)
    redis.call('HDEL', TOKENS, shard)
    redis.call('HSETNX', FREE, shard, now)
    state_changed = true
  end
end
local function release_all(member, rec)
  for _, shard in ipairs(rec.a) do release(shard, member) end
  for _, shard in ipairs(rec.r) do release(shard, member) end
  rec.a, rec.r, rec.rdl = {}, {}, 0
end
local function remove_member(member, rec, kind, reason)
  release_all(member, rec)
  redis.call('HDEL', MEMBERS, member)
  redis.call('ZREM', SESSIONS, member)
  if rec.i ~= '' and redis.call('HGET', INSTANCES, rec.i) == member then
    redis.call('HDEL', INSTANCES, rec.i)
  end
  state_changed = true
  event(kind, {'member', member, 'reason', reason})
end

-- Step 2: expire every member whose session (or rebalance deadline) has passed, lazily.
for _, member in ipairs(redis.call('ZRANGEBYSCORE', SESSIONS, '-inf', now)) do
  local rec = load_member(member)
  if rec then
    local reason = 'session_expired'
    if rec.rdl > 0 and rec.rdl <= now then reason = 'rebalance_timeout' end
    remove_member(member, rec, 'fenced', reason)
    bump_group_epoch(member, reason == 'session_expired' and 'expired' or 'timed out')
  else
    redis.call('ZREM', SESSIONS, member)
  end
end

-- Step 3: validate the request (KIP-848's rules and the stale-ownership rule).
local rec = load_member(id)
if epoch == -1 then
  if rec then
    remove_member(id, rec, 'leave', 'leave')
    bump_group_epoch(id, 'left')
  end
  return reply('OK', nil, nil, '')
elseif epoch == -2 then
  if instance == '' then
    return reply('INVALID_REQUEST', nil, nil, 'a static leave (epoch -2) needs an instance id')
  end
  if rec then
    -- The target stays reserved for the instance until the session runs out (KIP-345).
    release_all(id, rec)
    rec.b = 1
    save_member(id, rec)
    event('leave', {'member', id, 'reason', 'static_leave', 'instance', instance})
  end
  return reply('OK', nil, nil, '')
elseif epoch == 0 then
  if #owned > 0 then
    return reply('INVALID_REQUEST', nil, nil, 'a join (epoch 0) must report no owned shards')
  end
  local inherited, flips = nil, {}
  local function recent_flips(record)
    for _, at in ipairs(split(record.fl or '', ',')) do
      if now - tonumber(at) < FLIP_WINDOW_MS then flips[#flips + 1] = at end
    end
  end
  -- The instance's flip history travels with whoever holds it, across rejoins too.
  if rec then recent_flips(rec) end
  local holder_id = instance ~= '' and redis.call('HGET', INSTANCES, instance)
  if holder_id and holder_id ~= id then
    local holder = load_member(holder_id)
    if holder then
      flips = {}
      recent_flips(holder)
      if holder.b ~= 1 then
        -- A live process holds the instance id.
        if static_takeover == 'wait' then
          return reply('UNRELEASED_INSTANCE_ID', nil, nil,
                       'instance ' .. instance .. ' is held by live member ' .. holder_id)
        end
        if #flips >= FLIP_LIMIT then
          return reply('UNRELEASED_INSTANCE_ID', nil, nil,
                       'instance ' .. instance .. ' changed hands ' .. #flips ..
                       ' times within 60 s: two live processes share it')
        end
        flips[#flips + 1] = now
      end
      -- Safe: the old process's tokens die on the next install of its shards.
      inherited = holder
      remove_member(holder_id, holder, 'fenced',
                    holder.b == 1 and 'static_rejoin' or 'static_takeover')
    end
  end
  if rec then
    -- A known member rejoins (KAFKA-19233): its shards are freed, its target kept, and the
    -- reconcile below grants them again with new tokens.
    release_all(id, rec)
    rec.e, rec.p, rec.s, rec.b = 0, 0, 'STABLE', 0
    event('join', {'member', id, 'reason', 'rejoin'})
  else
    local first = redis.call('HLEN', MEMBERS) == 0 and not inherited
    rec = {e = 0, p = 0, s = 'STABLE', i = instance, a = {}, r = {}, t = {}, rdl = 0, b = 0,
           joined = now, fl = ''}
    if inherited then
      -- Static membership: the target moves with the instance id, without a rebalance.
      rec.t = inherited.t
      local moves = {}
      for _, shard in ipairs(rec.t) do
        moves[#moves + 1] = shard
        moves[#moves + 1] = id
      end
      hset_pairs(TARGET, moves)
    else
      bump_group_epoch(id, 'joined')
      if first then meta.assign_not_before = now + initial_delay_ms end
    end
    event('join', {'member', id, 'instance', instance})
  end
  rec.fl = table.concat(flips, ',')
  if instance ~= '' then redis.call('HSET', INSTANCES, instance, id) end
  save_member(id, rec)  -- a member of the group from now on, for the target below too
  state_changed = true
elseif epoch > 0 then
  if not rec or rec.b == 1 then
    return reply('UNKNOWN_MEMBER_ID', nil, nil, 'no member ' .. id .. ' in the group')
  end
  local held = set_of(rec.a)
  for _, shard in ipairs(rec.r) do held[shard] = true end
  local owned_held = true
  for _, shard in ipairs(owned) do if not held[shard] then owned_held = false end end
  if epoch > rec.e then
    return reply('FENCED_MEMBER_EPOCH', nil, nil,
                 'epoch ' .. epoch .. ' is ahead of the member epoch ' .. rec.e)
  end
  if epoch < rec.e and not (epoch == rec.p and owned_held) then
    return reply('FENCED_MEMBER_EPOCH', nil, nil,
                 'epoch ' .. epoch .. ' is behind the member epoch ' .. rec.e)
  end
  if not owned_held then
    remove_member(id, rec, 'fenced', 'stale_ownership')
    bump_group_epoch(id, 'fenced')
    return reply('FENCED_MEMBER_EPOCH', nil, nil,
                 'the member reports a shard it does not own (stale ownership)')
  end
else
  return reply('INVALID_REQUEST', nil, nil, 'member epoch ' .. ARGV[2])
end

-- Step 4: repair. A fence conflict means a shard's installed token is ahead of this grant: the
-- counter moves past it and the grant, never installed, is dropped. A metadata version ahead of
-- the store means the store rolled back.
local status, detail = 'OK', ''
for shard, installed in pairs(conflicts) do
  if installed > meta.fence_seq then
    meta.fence_seq = installed
    meta_dirty = true
  end
  if redis.call('HGET', OWNER, shard) == id then
    release(shard, id)
    rec.a = without(rec.a, {[shard] = true})
  end
  event('conflict', {'member', id, 'shard', shard, 'installed', installed})
  status, detail = 'SYNC_METADATA', 'fence conflict on shard ' .. shard
end
local seen_version = tonumber(ARGV[7]) or 0
if seen_version > meta.metadata_version then
  meta.metadata_version = seen_version
  state_changed = true
  event('rollback', {'member', id, 'seen', seen_version})
  status, detail = 'SYNC_METADATA', 'the member has seen metadata version ' .. seen_version
end

-- Step 5: revocations the member finished (reported REVOKED, or no longer owned).
if #rec.r > 0 then
  local done = {}
  for _, shard in ipairs(rec.r) do
    if not owned_set[shard] or revoking[shard] == 'REVOKED' then
      release(shard, id)
      done[shard] = true
      event('revoked', {'member', id, 'shard', shard})
    end
  end
  rec.r = without(rec.r, done)
  if #rec.r == 0 then rec.rdl = 0 end
end

-- Step 5b: progress and stalled shards (B2 `progress`, B6.1), before the target and reconcile
-- so that a stalled shard's revocation is part of this heartbeat's answer.
local function hrw(shard, key)
  return tonumber(string.sub(redis.sha1hex(key .. ':' .. shard), 1, 8), 16)
end
-- A stalled shard (B6.1) is revoked as for a departed member: freed at once, so its target
-- member's next heartbeat grants it with a larger fence and Redis refuses the stalled owner if
-- it wakes. It goes to another live member with the fewest target shards (HRW breaks ties); with
-- none, it stays and is only reported. It is pending revocation for its owner until it reports it
-- drained, so that reporting it meanwhile is not stale ownership, but without a rebalance
-- deadline: the shard is already free, and a member is never removed for a stall.
local function revoke_stalled_shard(shard)
  local best, best_rec, best_score = nil, nil, -1
  for _, member in ipairs(redis.call('HKEYS', MEMBERS)) do
    local other = member ~= id and load_member(member)
    if other and other.b ~= 1 then
      local score = hrw(shard, other.i ~= '' and other.i or member)
      if best == nil or #other.t < #best_rec.t or (#other.t == #best_rec.t and score > best_score)
      then
        best, best_rec, best_score = member, other, score
      end
    end
  end
  if best == nil then return end
  best_rec.t[#best_rec.t + 1] = shard
  table.sort(best_rec.t)
  save_member(best, best_rec)
  redis.call('HSET', TARGET, shard, best)
  rec.t = without(rec.t, {[shard] = true})
  rec.a = without(rec.a, {[shard] = true})
  rec.r[#rec.r + 1] = shard
  table.sort(rec.r)
  release(shard, id)
  event('revoke', {'member', id, 'shard', shard, 'reason', 'stalled', 'to', best})
end

-- Each reported shard's row: member|last acked id|in flight|pending|reported ms|acked ms|
-- waiting|busy since|stalled since. The acknowledgement's time comes as "ms ago" and becomes a
-- time on Redis's clock (members' clocks are never compared). `busy since` is when entries began
-- to wait with no progress: reset by a new last acked id, an acknowledgement after it, a new
-- owner, or a report of nothing waiting. A shard busy for the stall timeout is stalled.
do
  local reported, items = {}, {}
  for _, part in ipairs(split(ARGV[16], ',')) do
    local fields = split(part, ':')
    local shard = shard_of(fields[1])
    if shard ~= nil and #fields >= 4 and #fields <= 6 then
      -- Digits only (tonumber would take 1.5, 1e13 or 0x10); an acknowledgement at most a day ago.
      local ago, acked, waiting = nil, '', 0
      if fields[5] ~= nil and string.match(fields[5], '^%d+$') then ago = tonumber(fields[5]) end
      if ago ~= nil and ago <= 86400000 then acked = now - ago end
      if fields[6] ~= nil and string.match(fields[6], '^%d+$') then
        waiting = tonumber(fields[6])
      end
      reported[#reported + 1] = shard
      items[#items + 1] = {fields[2], fields[3], fields[4], acked, waiting}
    end
  end
  local set, revoke = {}, {}
  if #reported > 0 then
    -- One read of each hash and one write for all of them: a member's own shards only.
    local owners = redis.call('HMGET', OWNER, unpack(reported))
    local previous = redis.call('HMGET', PROGRESS, unpack(reported))
    for i, shard in ipairs(reported) do
      if owners[i] == id then
        local last, flight, pend, acked, waiting = unpack(items[i])
        local busy, stalled_at = '', ''
        if waiting > 0 then
          local prev = split(previous[i] or '', '|')
          local prev_busy = tonumber(prev[8] or '')
          busy = prev_busy
          if prev[1] ~= id or prev_busy == nil or prev[2] ~= last or
             (acked ~= '' and acked > prev_busy) then
            busy = now
          end
          if stall_ms > 0 and now - busy >= stall_ms then
            stalled_at = tonumber(prev[9] or '') or now
            if stalled_at == now then
              event('stalled', {'member', id, 'shard', shard, 'waiting', waiting,
                                'for_ms', now - busy})
            end
            stalled_shards[#stalled_shards + 1] = shard
            revoke[#revoke + 1] = shard
          end
        end
        set[#set + 1] = shard
        set[#set + 1] = table.concat({id, last, flight, pend, now, acked, waiting, busy,
                                      stalled_at}, '|')
      end
    end
    hset_pairs(PROGRESS, set)
  end
  -- Only from an OK: a member told to resynchronise keeps what it runs until it has.
  if revoke_stalled and status == 'OK' then
    local held = set_of(rec.a)
    for _, shard in ipairs(revoke) do
      if held[shard] then revoke_stalled_shard(shard) end
    end
  end
end

-- Step 6: the target (B4.2), at most once per minimum interval, after the initial delay.
local function compute_target()
  local ids = redis.call('HKEYS', MEMBERS)
  table.sort(ids)
  local recs, count = {}, {}
  for _, member in ipairs(ids) do
    recs[member] = member == id and rec or load_member(member)
    count[member] = #recs[member].t
  end
  local function key_of(member)
    if recs[member].i ~= '' then return recs[member].i end
    return member
  end
  local quota, taken, targets = {}, {}, {}
  local members = #ids
  if members > 0 then
    local base, extra = math.floor(shard_count / members), shard_count % members
    local by_previous = {}
    for i, member in ipairs(ids) do by_previous[i] = member end
    table.sort(by_previous, function(x, y)
      if count[x] ~= count[y] then return count[x] > count[y] end
      return x < y
    end)
    for i, member in ipairs(by_previous) do quota[member] = base + (i <= extra and 1 or 0) end
    -- Stickiness: each member keeps up to its quota of its previous shards, highest HRW first.
    for _, member in ipairs(ids) do
      local key, previous = key_of(member), {}
      for _, shard in ipairs(recs[member].t) do
        if shard < shard_count and not taken[shard] then
          previous[#previous + 1] = {shard, hrw(shard, key)}
        end
      end
      table.sort(previous, function(x, y)
        if x[2] ~= y[2] then return x[2] > y[2] end
        return x[1] < y[1]
      end)
      targets[member] = {}
      for i = 1, math.min(quota[member], #previous) do
        targets[member][i] = previous[i][1]
        taken[previous[i][1]] = true
      end
    end
    -- Balance: every other shard, in index order, to the under-quota member with the highest HRW.
    for shard = 0, shard_count - 1 do
      if not taken[shard] then
        local best, best_score = nil, -1
        for _, member in ipairs(ids) do
          if #targets[member] < quota[member] then
            local score = hrw(shard, key_of(member))
            if score > best_score then best, best_score = member, score end
          end
        end
        targets[best][#targets[best] + 1] = shard
      end
    end
  end
  redis.call('DEL', TARGET)
  local set = {}
  for _, member in ipairs(ids) do
    table.sort(targets[member])
    recs[member].t = targets[member]
    for _, shard in ipairs(targets[member]) do
      set[#set + 1] = shard
      set[#set + 1] = member
    end
    if member ~= id then save_member(member, recs[member]) end
  end
  hset_pairs(TARGET, set)
  meta.assignment_epoch, meta.last_assign = meta.group_epoch, now
  meta.targets = (meta.targets or 0) + 1
  meta_dirty, state_changed = true, true
  local fields = {'assignment_epoch', meta.assignment_epoch, 'members', members, 'by', id,
                  'changes', meta.changes or 0}
  if meta.changes == 1 then
    for _, value in ipairs({'member', meta.change_member, 'change', meta.change}) do
      fields[#fields + 1] = value
    end
  end
  meta.changes = 0
  event('target', fields)
end
if meta.group_epoch > meta.assignment_epoch and now >= meta.assign_not_before and
   now - meta.last_assign >= min_interval_ms then
  compute_target()
end

-- Step 7: reconcile this member toward the target (CurrentAssignmentBuilder), unless it must
-- first resynchronise.
local pending = {}
if status == 'OK' then
  local target_set = set_of(rec.t)
  -- A shard still draining that the target gives back stays with this member, on its token;
  -- not one already freed (a stalled shard's revocation, B6.1): that one is granted afresh.
  local back = {}
  for _, shard in ipairs(rec.r) do
    if target_set[shard] and redis.call('HGET', OWNER, shard) == id then
      back[shard] = true
      rec.a[#rec.a + 1] = shard
      event('kept', {'member', id, 'shard', shard})
    end
  end
  if next(back) then
    rec.r = without(rec.r, back)
    table.sort(rec.a)
    if #rec.r == 0 then rec.rdl = 0 end
    state_changed = true
  end
  local keep, revoke = {}, {}
  for _, shard in ipairs(rec.a) do
    if target_set[shard] then
      keep[#keep + 1] = shard
    elseif owned_set[shard] then
      revoke[#revoke + 1] = shard
    else
      release(shard, id)  -- granted, never taken up: nothing to drain
    end
  end
  rec.a = keep
  if #revoke > 0 then
    -- The deadline counts from the first revocation still pending: later ones do not push it
    -- back (B9: the rebalance timeout is the outer bound of a broken drain).
    -- (A stalled shard's revocation sets none: that shard was freed at once, B6.1.)
    if rec.rdl == 0 then rec.rdl = now + rebalance_ms end
    for _, shard in ipairs(revoke) do
      rec.r[#rec.r + 1] = shard
      event('revoke', {'member', id, 'shard', shard})
    end
    table.sort(rec.r)
    state_changed = true
  end
  if #rec.r > 0 then
    rec.s, status = 'UNREVOKED', 'REVOKE_PENDING'
    detail = 'revoke shards ' .. join(rec.r)
  else
    local wanted = without(rec.t, set_of(rec.a))
    if #wanted > 0 then
      local owners = redis.call('HMGET', OWNER, unpack(wanted))
      for i, shard in ipairs(wanted) do
        if owners[i] then
          pending[#pending + 1] = shard
        else
          meta.fence_seq = meta.fence_seq + 1
          redis.call('HSET', OWNER, shard, id)
          redis.call('HSET', TOKENS, shard, meta.fence_seq)
          redis.call('HDEL', FREE, shard)
          rec.a[#rec.a + 1] = shard
          meta_dirty, state_changed = true, true
          event('grant', {'member', id, 'shard', shard, 'fence', meta.fence_seq})
        end
      end
      table.sort(rec.a)
    end
    rec.s = #pending > 0 and 'UNRELEASED' or 'STABLE'
    if rec.e ~= meta.assignment_epoch then
      rec.p, rec.e = rec.e, meta.assignment_epoch
      state_changed = true
    end
  end
end

-- Step 8: renew the session, write back, reply.
local deadline = now + session_ms
if rec.rdl > 0 and rec.rdl < deadline then deadline = rec.rdl end
redis.call('ZADD', SESSIONS, deadline, id)
rec.hb, rec.sess, rec.reb, rec.pod, rec.host = now, session_ms, rebalance_ms, pod, host
save_member(id, rec)
return reply(status, rec, pending, detail)

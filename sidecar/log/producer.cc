#include "sidecar/log/producer.h"

#include <algorithm>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/keys/stream_keys.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/capped_add_lua.h"
#include "sidecar/redis/script.h"

namespace streamcar::log {
namespace {

// Lua's unpack() fails past about 8,000 values (LUAI_MAXCSTACK), and the XADD is built with it:
// an entry with more fields than this is refused before it reaches Redis.
constexpr size_t kMaxFields = 3000;

// The append as one atomic step in the stream's slot (SPEC 10): the idempotency check, the XADD
// and the record of its id, so two concurrent appends with the same key cannot both append, and
// a failed XADD (WRONGTYPE, an id not above the top) records no key. The PUBLISH of a `notify`
// stream runs after the XADD in the same step: only an appended entry is announced.
// KEYS[1] stream, KEYS[2] idempotency key (absent: none).
// ARGV[1] id ('*' or '<ms>-<seq>'), ARGV[2] MAXLEN ~ ('0': none), ARGV[3] idempotency TTL in ms,
// ARGV[4] notify channel ('': none), ARGV[5..] field, value, ...
// Returns {'appended', id} | {'duplicate', first id} | {'nonmonotonic', top id}, or the XADD's
// error reply.
const redis::Script kAppendScript(std::string(redis::kCappedAddLua) + R"lua(
if KEYS[2] then
  local seen = redis.call('GET', KEYS[2])
  if seen then return {'duplicate', seen} end
end
local add = capped_add(KEYS[1], ARGV[2], ARGV[1])
for i = 5, #ARGV do add[#add + 1] = ARGV[i] end
local id = redis.pcall(unpack(add))
if type(id) == 'table' and id.err then
  if ARGV[1] ~= '*' and (string.find(id.err, 'equal or smaller', 1, true) or
                         string.find(id.err, 'greater than 0-0', 1, true)) then
    -- The top XADD compares with is the last id the stream ever had, even when that entry
    -- was deleted since: XINFO STREAM's last-generated-id, not the last entry.
    local top = '0-0'
    local info = redis.pcall('XINFO', 'STREAM', KEYS[1])
    if type(info) == 'table' and not info.err then
      for i = 1, #info, 2 do
        if info[i] == 'last-generated-id' then top = info[i + 1] end
      end
    end
    return {'nonmonotonic', top}
  end
  return id
end
if KEYS[2] then redis.call('SET', KEYS[2], id, 'PX', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], '{"id":"' .. id .. '"}') end
return {'appended', id}
)lua");

}  // namespace

Producer::Producer(config::LogStream stream, Millis idempotency_ttl)
    : stream_(std::move(stream)), idempotency_ttl_(std::max(idempotency_ttl, Millis(1))) {}

StatusOr<AppendResult> Producer::Append(redis::Session& session,
                                        const AppendRequest& request) const {
  if (request.fields.empty()) {
    return Status(StatusCode::kInvalid, "an entry needs at least one field");
  }
  if (request.fields.size() > kMaxFields) {
    return Status(StatusCode::kInvalid, "an entry has at most " + std::to_string(kMaxFields) +
                                            " fields (got " +
                                            std::to_string(request.fields.size()) + ")");
  }
  if (!request.entry_id.empty() && !ParseId(request.entry_id)) {
    return Status(StatusCode::kInvalid,
                  "an entry id is <ms>-<seq> in decimal, like 1764513000000-0 (got \"" +
                      PrintableOneLine(request.entry_id) + "\")");
  }
  // A sharded stream (SPEC 9) is appended to in the shard of the entry's key; the idempotency
  // key then lives in that shard's slot.
  std::string target = stream_.name;
  if (stream_.shards > 0) {
    if (request.shard_key.empty()) {
      return Status(
          StatusCode::kInvalid,
          "stream \"" + stream_.name + "\" is sharded into " + std::to_string(stream_.shards) +
              " shards: the entry's key (Streamcar-Key, produce --key) picks the shard; it is "
              "required");
    }
    target =
        keys::ShardKey(stream_.shard_key_pattern, keys::ShardOf(request.shard_key, stream_.shards));
  }
  std::vector<std::string> keys = {target};
  if (!request.idempotency_key.empty()) {
    keys.push_back(keys::IdempotencyKey(target, request.idempotency_key));
  }
  std::vector<std::string_view> key_views(keys.begin(), keys.end());
  redis::Command call = kAppendScript.Call(key_views);
  call.Arg(request.entry_id.empty() ? std::string_view("*") : std::string_view(request.entry_id));
  // An archived stream is trimmed only by its folder, below the watermark (SPEC 10): a MAXLEN
  // here would drop entries that were never folded.
  call.Arg(stream_.max_len > 0 && !stream_.archive ? stream_.max_len : int64_t{0});
  call.Arg(static_cast<int64_t>(idempotency_ttl_.count()));
  call.Arg(stream_.notify ? keys::NotifyChannel(stream_.name) : std::string());
  for (const auto& [field, value] : request.fields) call.Arg(field).Arg(value);

  if (!session.connected()) {
    Millis retry_in{0};
    if (Status status = session.ConnectOnce(&retry_in); !status.ok()) return status;
  }
  auto reply = session.Run(call);
  if (!reply.ok() && reply.status().IsServerError("NOSCRIPT")) {
    // A restarted server or SCRIPT FLUSH: load it, then run it again (nothing ran the first time).
    auto loaded = session.Run(kAppendScript.Load());
    if (!loaded.ok()) return loaded.status();
    reply = session.Run(call);
  }
  if (!reply.ok()) return reply.status();
  const auto view = reply->view();
  if (!view.IsArray() || view.Size() != 2 || !view[1].IsString()) {
    return Status(StatusCode::kProtocol, "unexpected reply to the append script");
  }
  AppendResult result;
  const auto kind = view[0].Str();
  if (kind == "appended") {
    result.kind = AppendResult::Kind::kAppended;
  } else if (kind == "duplicate") {
    result.kind = AppendResult::Kind::kDuplicate;
  } else if (kind == "nonmonotonic") {
    result.kind = AppendResult::Kind::kNonMonotonic;
  } else {
    return Status(StatusCode::kProtocol, "unexpected reply to the append script");
  }
  result.id = std::string(view[1].Str());
  return result;
}

}  // namespace streamcar::log

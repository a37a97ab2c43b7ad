#include "sidecar/log/producer.h"

#include <algorithm>

#include "sidecar/keys/sharding_keys.h"
#include "sidecar/keys/stream_keys.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/capped_add.h"
#include "sidecar/redis/capped_add_lua.h"
#include "sidecar/redis/script.h"
#include "sidecar/redis/topology/route_attempt.h"

namespace streamcar::log {
namespace {

// Lua's unpack() fails past about 8,000 values (LUAI_MAXCSTACK), and the XADD is built with it:
// an entry with more fields than this is refused before it reaches Redis.
constexpr size_t kMaxFields = 3000;

// The appends as one atomic step in the stream's slot (SPEC 10): for each entry in order, the
// idempotency check, the id's range check, the XADD and the record of its id, so two concurrent
// appends with the same key cannot both append, and a failed XADD (WRONGTYPE, an id not above
// the top) records no key. The PUBLISH of a `notify` stream runs after each XADD in the same
// step: only an appended entry is announced.
// An explicit id more than the skew ahead of Redis's TIME is refused here, on the server's clock
// and atomically with the XADD (our clock may differ from the one that mints '*' ids). Its ms
// part may be up to 20 digits: as a Lua number it is exact below 2^53, and anything above is far
// beyond any clock plus skew, so the comparison is right either way.
// KEYS[1] stream, KEYS[2..] the idempotency keys of the entries that have one.
// ARGV[1] MAXLEN ~ ('0': none), ARGV[2] idempotency TTL in ms, ARGV[3] notify channel ('':
// none), ARGV[4] the skew in ms, then per entry: id ('*' or '<ms>-<seq>'), the index in KEYS of
// its idempotency key ('0': none), its field count n, then n field, value pairs.
// Returns per entry two values: 'appended', id | 'duplicate', first id | 'nonmonotonic', top id |
// 'out_of_range', ''; or the first XADD error reply (ending the batch).
const redis::Script kAppendScript(std::string(redis::kCappedAddLua) + R"lua(
local now_ms
local function too_far(id)
  if id == '*' then return false end
  if not now_ms then
    local t = redis.call('TIME')
    now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return tonumber(string.match(id, '^(%d+)-')) > now_ms + tonumber(ARGV[4])
end
local function top_of(stream)
  -- The top XADD compares with is the last id the stream ever had, even when that entry was
  -- deleted since: XINFO STREAM's last-generated-id, not the last entry.
  local top = '0-0'
  local info = redis.pcall('XINFO', 'STREAM', stream)
  if type(info) == 'table' and not info.err then
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then top = info[i + 1] end
    end
  end
  return top
end
local out = {}
local a = 5
while a <= #ARGV do
  local id, key, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local first = a + 3
  a = first + 2 * n
  local seen = key > 0 and redis.call('GET', KEYS[key])
  if seen then
    out[#out + 1] = 'duplicate'; out[#out + 1] = seen
  elseif too_far(id) then
    out[#out + 1] = 'out_of_range'; out[#out + 1] = ''
  else
    local add = capped_add(KEYS[1], ARGV[1], id)
    for i = first, a - 1 do add[#add + 1] = ARGV[i] end
    local added = redis.pcall(unpack(add))
    if type(added) == 'table' and added.err then
      if id ~= '*' and (string.find(added.err, 'equal or smaller', 1, true) or
                        string.find(added.err, 'greater than 0-0', 1, true)) then
        out[#out + 1] = 'nonmonotonic'; out[#out + 1] = top_of(KEYS[1])
      else
        return added
      end
    else
      if key > 0 then redis.call('SET', KEYS[key], added, 'PX', ARGV[2]) end
      if ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], '{"id":"' .. added .. '"}') end
      out[#out + 1] = 'appended'; out[#out + 1] = added
    end
  end
end
return out
)lua");

std::optional<AppendResult::Kind> KindOf(std::string_view kind) {
  if (kind == "appended") return AppendResult::Kind::kAppended;
  if (kind == "duplicate") return AppendResult::Kind::kDuplicate;
  if (kind == "nonmonotonic") return AppendResult::Kind::kNonMonotonic;
  if (kind == "out_of_range") return AppendResult::Kind::kOutOfRange;
  return std::nullopt;
}

// Runs the append script on `session`, connecting first if needed, and loading it once if Redis
// lost it (a restarted server or SCRIPT FLUSH: nothing ran the first time).
StatusOr<redis::Reply> RunAppendScript(redis::Session& session, const redis::Command& call) {
  if (!session.connected()) {
    Millis retry_in{0};
    if (Status status = session.ConnectOnce(&retry_in); !status.ok()) return status;
  }
  auto reply = session.Run(call);
  if (!reply.ok() && reply.status().IsServerError("NOSCRIPT")) {
    auto loaded = session.Run(kAppendScript.Load());
    if (!loaded.ok()) return loaded.status();
    reply = session.Run(call);
  }
  return reply;
}

// True when Redis Cluster turned a transaction away as it queued (MOVED, ASK, TRYAGAIN ...):
// EXEC discarded it, nothing ran.
bool TransactionRedirected(const Producer::Prepared& prepared,
                           std::span<const redis::Reply> replies) {
  if (replies.size() != prepared.sent + 2 || !replies.back().IsError()) return false;
  return std::ranges::any_of(replies.subspan(1, prepared.sent), &Producer::Redirected);
}

// The script's two values per sent entry, merged in order with the results decided before it.
Status ReadResults(const redis::ReplyView& view, size_t sent,
                   std::vector<std::optional<AppendResult>>* decided,
                   std::vector<AppendResult>* results) {
  auto unexpected = [] {
    return Status(StatusCode::kProtocol, "unexpected reply to the append script");
  };
  if (!view.IsArray() || view.Size() != 2 * sent) return unexpected();
  size_t at = 0;
  for (auto& one : *decided) {
    if (one) {
      results->push_back(std::move(*one));
      continue;
    }
    const auto kind = view[at].IsString() ? KindOf(view[at].Str()) : std::nullopt;
    if (!kind || !view[at + 1].IsString()) return unexpected();
    results->push_back(AppendResult{*kind, std::string(view[at + 1].Str())});
    at += 2;
  }
  return Status::Ok();
}

}  // namespace

Producer::Producer(config::LogStream stream, Millis idempotency_ttl, Millis max_future_skew)
    : stream_(std::move(stream)),
      idempotency_ttl_(std::max(idempotency_ttl, Millis(1))),
      max_future_skew_(std::max(max_future_skew, Millis(0))) {}

Status Producer::Validate(const AppendRequest& request) const {
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
  return Status::Ok();
}

StatusOr<std::string> Producer::Target(const AppendRequest& request) const {
  // A sharded stream (SPEC 9) is appended to in the shard of the entry's key; the idempotency
  // key then lives in that shard's slot.
  if (stream_.shards == 0) return stream_.name;
  if (request.shard_key.empty()) {
    return Status(
        StatusCode::kInvalid,
        "stream \"" + stream_.name + "\" is sharded into " + std::to_string(stream_.shards) +
            " shards: the entry's key (Streamcar-Key, produce --key) picks the shard; it is "
            "required");
  }
  return keys::ShardKey(stream_.shard_key_pattern,
                        keys::ShardOf(request.shard_key, stream_.shards));
}

StatusOr<AppendResult> Producer::Append(redis::Session& session,
                                        const AppendRequest& request) const {
  auto results = AppendAll(session, std::span<const AppendRequest>(&request, 1));
  if (!results.ok()) return results.status();
  return std::move(results->front());
}

const redis::Script& Producer::Script() { return kAppendScript; }

StatusOr<Producer::Prepared> Producer::Prepare(std::span<const AppendRequest> requests,
                                               Grouping grouping) const {
  Prepared prepared;
  if (requests.empty()) return prepared;
  if (requests.size() > kMaxBatch) {
    return Status(StatusCode::kInvalid, "at most " + std::to_string(kMaxBatch) +
                                            " entries in one append (got " +
                                            std::to_string(requests.size()) + ")");
  }
  auto target = Target(requests.front());
  if (!target.ok()) return target.status();
  for (const auto& request : requests) {
    if (Status valid = Validate(request); !valid.ok()) return valid;
    // One call appends in one slot: entries of a sharded stream whose keys pick other shards go
    // in other calls.
    if (request.shard_key != requests.front().shard_key) {
      auto other = Target(request);
      if (!other.ok() || *other != *target) {
        return Status(StatusCode::kInvalid, "the entries of one append go to one shard");
      }
    }
  }

  // The maximum id leaves no id after it: every later append would fail. Refused here, where no
  // clock is needed; the skew check runs in the script.
  prepared.decided.resize(requests.size());
  std::vector<std::string> keys = {*target};
  std::vector<int64_t> key_index(requests.size(), 0);
  for (size_t i = 0; i < requests.size(); ++i) {
    const AppendRequest& request = requests[i];
    if (!request.entry_id.empty() && *ParseId(request.entry_id) == kMaxId) {
      prepared.decided[i] = AppendResult{AppendResult::Kind::kOutOfRange, ""};
    } else if (!request.idempotency_key.empty()) {
      keys.push_back(keys::IdempotencyKey(*target, request.idempotency_key));
      key_index[i] = static_cast<int64_t>(keys.size());
    }
  }
  // An archived stream is trimmed only by its folder, below the watermark (SPEC 10): a MAXLEN
  // here would drop entries that were never folded.
  const int64_t max_len = stream_.max_len > 0 && !stream_.archive ? stream_.max_len : 0;
  const bool plain = grouping != Grouping::kScript && !stream_.notify && keys.size() == 1 &&
                     std::ranges::all_of(requests, [](const AppendRequest& request) {
                       return request.entry_id.empty();
                     });
  if (plain) {
    prepared.form = grouping == Grouping::kBatch ? Form::kTransaction : Form::kPlain;
    if (prepared.form == Form::kTransaction) prepared.commands.emplace_back("MULTI");
    for (const AppendRequest& request : requests) {
      redis::Command add = redis::CappedAdd(*target, max_len, "*");
      for (const auto& [field, value] : request.fields) add.Arg(field).Arg(value);
      prepared.commands.push_back(std::move(add));
    }
    if (prepared.form == Form::kTransaction) prepared.commands.emplace_back("EXEC");
    prepared.sent = requests.size();
    return prepared;
  }
  std::vector<std::string_view> key_views(keys.begin(), keys.end());
  redis::Command call = kAppendScript.Call(key_views);
  call.Arg(max_len);
  call.Arg(static_cast<int64_t>(idempotency_ttl_.count()));
  call.Arg(stream_.notify ? keys::NotifyChannel(stream_.name) : std::string());
  call.Arg(static_cast<int64_t>(max_future_skew_.count()));
  for (size_t i = 0; i < requests.size(); ++i) {
    if (prepared.decided[i]) continue;
    const AppendRequest& request = requests[i];
    call.Arg(request.entry_id.empty() ? std::string_view("*") : std::string_view(request.entry_id));
    call.Arg(key_index[i]);
    call.Arg(static_cast<int64_t>(request.fields.size()));
    for (const auto& [field, value] : request.fields) call.Arg(field).Arg(value);
    ++prepared.sent;
  }
  if (prepared.sent > 0) prepared.commands.push_back(std::move(call));
  return prepared;
}

bool Producer::Redirected(const redis::Reply& reply) {
  return reply.IsError() && redis::RouteAttempt::Reroutes(reply.view());
}

StatusOr<AppendResult> Producer::PlainResult(const redis::ReplyView& reply) {
  if (reply.IsError()) return redis::ErrorOf(reply);
  if (!reply.IsString()) return Status(StatusCode::kProtocol, "unexpected reply to XADD");
  return AppendResult{AppendResult::Kind::kAppended, std::string(reply.Str())};
}

StatusOr<std::vector<AppendResult>> Producer::FinishTransaction(
    const Prepared& prepared, std::span<const redis::Reply> replies) {
  if (replies.size() != prepared.sent + 2) {
    return Status(StatusCode::kProtocol, "unexpected replies to the append transaction");
  }
  // An XADD refused as it queued (OOM, a slot that moved: MOVED, ASK, CLUSTERDOWN) discards the
  // transaction: EXEC answers EXECABORT and nothing ran. Its refusal says why.
  const redis::ReplyView exec = replies.back().view();
  if (exec.IsNil()) {
    // No answer at all: the routed session could not reach the slot's node to send it.
    return Status(StatusCode::kIo, "Redis did not answer the batch");
  }
  if (exec.IsError()) {
    for (const redis::Reply& queued : replies.subspan(1, prepared.sent)) {
      if (!queued.IsError()) continue;
      if (Redirected(queued)) {
        return Status(StatusCode::kIo,
                      "Redis turned the batch away: " + std::string(queued.view().Str()));
      }
      return redis::ErrorOf(queued.view());
    }
    return redis::ErrorOf(exec);
  }
  if (!exec.IsArray() || exec.Size() != prepared.sent) {
    return Status(StatusCode::kProtocol, "unexpected reply to EXEC");
  }
  std::vector<AppendResult> results;
  results.reserve(prepared.sent);
  for (size_t i = 0; i < exec.Size(); ++i) {
    auto result = PlainResult(exec[i]);  // an error (WRONGTYPE) ends the batch, as in the script
    if (!result.ok()) return result.status();
    results.push_back(std::move(*result));
  }
  return results;
}

StatusOr<std::vector<AppendResult>> Producer::Finish(Prepared prepared, const redis::Reply& reply) {
  if (reply.IsError()) return redis::ErrorOf(reply.view());
  if (prepared.form != Form::kScript) {
    return Status(StatusCode::kProtocol, "plain XADDs are read by PlainResult");
  }
  std::vector<AppendResult> results;
  results.reserve(prepared.decided.size());
  if (Status read = ReadResults(reply.view(), prepared.sent, &prepared.decided, &results);
      !read.ok()) {
    return read;
  }
  return results;
}

StatusOr<std::vector<AppendResult>> Producer::AppendAll(
    redis::Session& session, std::span<const AppendRequest> requests) const {
  auto prepared = Prepare(requests);
  if (!prepared.ok()) return prepared.status();
  if (prepared->commands.empty()) {
    std::vector<AppendResult> results;
    for (auto& one : prepared->decided) results.push_back(std::move(*one));
    return results;
  }
  if (prepared->form == Form::kTransaction) {
    auto replies = session.RunPipeline(prepared->commands);
    if (!replies.ok()) return replies.status();
    if (!TransactionRedirected(*prepared, *replies)) {
      return FinishTransaction(*prepared, *replies);
    }
    // Redis Cluster turned the transaction away as it queued (a slot that moved or migrates):
    // nothing ran. The routed session follows a single command's MOVED or ASK, not a
    // transaction's, so the batch goes once more as the script call, which it follows (and so
    // learns the slot's new master for the batches after it).
    prepared = Prepare(requests, Grouping::kScript);
    if (!prepared.ok()) return prepared.status();
  }
  auto reply = RunAppendScript(session, prepared->commands.front());
  if (!reply.ok()) return reply.status();
  return Finish(std::move(*prepared), *reply);
}

}  // namespace streamcar::log

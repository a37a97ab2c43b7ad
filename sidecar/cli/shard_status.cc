#include "sidecar/cli/shard_status.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/status_json.h"
#include "sidecar/common/text.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/sharding/heartbeat.h"

namespace streamcar::cli {
namespace {

constexpr int kRecentEvents = 8;
constexpr int64_t kFencedOpsWindowMs = int64_t{10} * 60 * 1000;  // C2's "fenced ops (10m)"

int64_t ToInt(std::string_view text) {
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The coordinator keeps shard lists as "3,5" (sharding/lua/heartbeat.lua).
std::vector<int> ShardList(std::string_view text) {
  std::vector<int> shards;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    if (comma > start) shards.push_back(static_cast<int>(ToInt(text.substr(start, comma - start))));
    start = comma + 1;
  }
  return shards;
}

// HGETALL as a map; empty when the key is missing or unreadable (then *error says why, when
// asked for).
std::map<std::string, std::string> HashOf(redis::Session& redis, const std::string& key,
                                          std::string* error = nullptr) {
  std::map<std::string, std::string> out;
  auto reply = redis.Run(redis::Command("HGETALL").Arg(key));
  if (!reply.ok() && error != nullptr) *error = key + ": " + reply.status().message();
  if (!reply.ok() || !reply->view().IsArray()) return out;
  const auto view = reply->view();
  for (size_t i = 0; i + 1 < view.Size(); i += 2) {
    out.emplace(std::string(view[i].Str()), std::string(view[i + 1].Str()));
  }
  return out;
}

std::string Get(const std::map<std::string, std::string>& hash, const std::string& field) {
  auto it = hash.find(field);
  return it == hash.end() ? "" : it->second;
}

std::string StringField(const rapidjson::Value& record, const char* field) {
  auto it = record.FindMember(field);
  if (it == record.MemberEnd()) return "";
  if (it->value.IsString()) return it->value.GetString();
  if (it->value.IsNumber()) return std::to_string(it->value.GetInt64());
  return "";
}

int64_t IntField(const rapidjson::Value& record, const char* field) {
  auto it = record.FindMember(field);
  if (it == record.MemberEnd()) return 0;
  if (it->value.IsNumber()) return static_cast<int64_t>(it->value.GetDouble());
  if (it->value.IsString()) return ToInt(it->value.GetString());
  return 0;
}

std::string Shorten(const std::string& member_id) {
  return member_id.size() <= 10
             ? member_id
             : member_id.substr(0, 4) + "..." + member_id.substr(member_id.size() - 2);
}

std::string Shards(const std::vector<int>& shards) {
  std::string out;
  for (int shard : shards) out += (out.empty() ? "" : ",") + std::to_string(shard);
  return out.empty() ? "-" : out;
}

}  // namespace

bool ShardedStatus::Stable() const {
  for (const auto& member : members) {
    if (member.epoch != assignment_epoch || !member.revoking.empty() || member.state != "STABLE") {
      return false;
    }
  }
  return group_epoch == assignment_epoch;
}

namespace {

// The coordinator's members (SHARDING.md B2 records), as of `now_ms` in Redis TIME.
void ReadMembers(redis::Session& redis, const keys::CoordinatorKeys& keys, int64_t now_ms,
                 ShardedStatus& status) {
  std::map<std::string, int64_t> deadlines;
  if (auto sessions = redis.Run(redis::Command("ZRANGE")
                                    .Arg(keys.sessions)
                                    .Arg(int64_t{0})
                                    .Arg(int64_t{-1})
                                    .Arg("WITHSCORES"));
      sessions.ok() && sessions->view().IsArray()) {
    const auto view = sessions->view();
    for (size_t i = 0; i + 1 < view.Size(); i += 2) {
      deadlines[std::string(view[i].Str())] = ToInt(view[i + 1].Str());
    }
  }
  for (const auto& [id, json] : HashOf(redis, keys.members)) {
    rapidjson::Document record;
    record.Parse(json.c_str());
    if (!record.IsObject()) continue;
    if (IntField(record, "b") == 1) continue;  // a static member that left: not in the group
    ShardStatusMember member;
    member.id = id;
    member.instance = StringField(record, "i");
    member.epoch = IntField(record, "e");
    member.state = StringField(record, "s");
    member.assigned = ShardList(StringField(record, "a"));
    member.revoking = ShardList(StringField(record, "r"));
    member.rebalance_limit_ms = IntField(record, "reb");
    if (const int64_t deadline = IntField(record, "rdl");
        deadline > 0 && !member.revoking.empty()) {
      member.revoking_for_ms = now_ms - (deadline - member.rebalance_limit_ms);
    }
    member.session_left_ms = deadlines.contains(id) ? deadlines[id] - now_ms : 0;
    member.last_heartbeat_ago_ms = now_ms - IntField(record, "hb");
    member.pod = StringField(record, "pod");
    member.host = StringField(record, "host");
    status.members.push_back(std::move(member));
  }
}

// What Redis says of one shard besides the coordinator: its fence, its group and dead letters.
void ReadShardKeys(redis::Session& redis, const config::Subscription& sub,
                   ShardStatusShard& shard) {
  const auto fence = HashOf(redis, keys::FenceKey(shard.key, sub.group));
  shard.fence = ToInt(Get(fence, "token"));
  shard.fence_member = Get(fence, "member");
  if (auto groups = redis.Run(redis::GroupsOf(shard.key)); groups.ok()) {
    if (auto group = redis::ParseGroupInfo(groups->view(), sub.group); group.ok() && group->found) {
      shard.group_exists = true;
      shard.pending = group->pending;
      shard.lag = redis::LagOf(*group, std::nullopt).value;
    }
  }
  if (auto dlq = redis.Run(redis::Command("XLEN").Arg(keys::ShardDeadLetterKey(shard.key)));
      dlq.ok()) {
    shard.dead_letters = dlq->view().Integer();
  }
}

// Each shard: the coordinator's grant, target and the owner's progress, then its own keys. Also
// each member's target shards still held by others, and the shards nobody owns.
void ReadShards(redis::Session& redis, const config::Subscription& sub,
                const keys::CoordinatorKeys& keys, int64_t now_ms, ShardedStatus& status) {
  const auto owners = HashOf(redis, keys.owner);
  const auto targets = HashOf(redis, keys.target);
  const auto tokens = HashOf(redis, keys.tokens);
  const auto free = HashOf(redis, keys.free);
  const auto progress = HashOf(redis, keys.progress);
  for (auto& member : status.members) {
    for (const auto& [shard, target] : targets) {
      if (target == member.id && Get(owners, shard) != member.id) {
        member.waiting.push_back(static_cast<int>(ToInt(shard)));
      }
    }
    std::ranges::sort(member.waiting);
  }
  std::map<std::string, bool> revoking;  // "shard" -> its owner is revoking it
  for (const auto& member : status.members) {
    for (int shard : member.revoking) revoking[std::to_string(shard)] = true;
  }
  for (const auto& [shard, since] : free) {
    ++status.unowned;
    status.unowned_oldest_ms = std::max(status.unowned_oldest_ms, now_ms - ToInt(since));
  }
  for (int index = 0; index < status.shard_count; ++index) {
    const std::string field = std::to_string(index);
    ShardStatusShard shard;
    shard.index = index;
    shard.key = keys::ShardKey(sub.ShardKeyPattern(), index);
    shard.owner = Get(owners, field);
    shard.target = Get(targets, field);
    shard.grant_token = ToInt(Get(tokens, field));
    shard.state = shard.owner.empty() ? "unowned" : revoking[field] ? "revoking" : "active";
    // Written by the owner's heartbeats; a row of an earlier owner is not this one's progress.
    if (const auto row = sharding::ParseProgressRow(Get(progress, field));
        row && row->member == shard.owner) {
      shard.last_acked_id = row->last_acked_id;
      shard.reported_ago_ms = now_ms - row->reported_ms;
      if (row->acked_ms) shard.acked_ago_ms = now_ms - *row->acked_ms;
      // B6.1: entries wait and its owner has acknowledged nothing for sharding.stall_timeout.
      if (row->stalled_ms && shard.state == "active") shard.state = "stalled";
    }
    ReadShardKeys(redis, sub, shard);
    status.shards.push_back(std::move(shard));
  }
}

// Churn: the grants and revokes of the last hour (the stream keeps about 1,000 events), and the
// steps the members' fences refused in the last 10 minutes.
void ReadChurn(redis::Session& redis, const keys::CoordinatorKeys& keys, int64_t now_ms,
               ShardedStatus& status) {
  auto hour = redis.Run(redis::Command("XREVRANGE")
                            .Arg(keys.events)
                            .Arg("+")
                            .Arg(std::to_string(now_ms - int64_t{3600} * 1000))
                            .Arg("COUNT")
                            .Arg(int64_t{1000}));
  if (!hour.ok() || !hour->view().IsArray()) return;
  for (size_t i = 0; i < hour->view().Size(); ++i) {
    const bool last_10m = ToInt(hour->view()[i][0].Str()) >= now_ms - kFencedOpsWindowMs;
    const auto fields = hour->view()[i][1];
    std::string_view type;
    int64_t count = 0;
    for (size_t f = 0; f + 1 < fields.Size(); f += 2) {
      if (fields[f].Str() == "type") type = fields[f + 1].Str();
      if (fields[f].Str() == "count") count = ToInt(fields[f + 1].Str());
    }
    if (type == "grant" || type == "revoke") ++status.rebalances_last_hour;
    // The members' reports of steps their fences refused (sharding/lua/heartbeat.lua).
    if (type == "fenced_ops" && last_10m) status.fenced_ops_last_10m += count;
  }
}

// The last kRecentEvents events, newest first.
void ReadRecentEvents(redis::Session& redis, const keys::CoordinatorKeys& keys,
                      ShardedStatus& status) {
  auto events = redis.Run(redis::Command("XREVRANGE")
                              .Arg(keys.events)
                              .Arg("+")
                              .Arg("-")
                              .Arg("COUNT")
                              .Arg(int64_t{kRecentEvents}));
  if (!events.ok() || !events->view().IsArray()) return;
  const auto view = events->view();
  for (size_t i = 0; i < view.Size(); ++i) {
    ShardStatusEvent event;
    event.time_ms = ToInt(view[i][0].Str());  // the id's milliseconds
    const auto fields = view[i][1];
    for (size_t f = 0; f + 1 < fields.Size(); f += 2) {
      if (fields[f].Str() == "type") {
        event.type = fields[f + 1].Str();
        continue;
      }
      std::string value(fields[f + 1].Str());
      event.values[std::string(fields[f].Str())] = value;
      if (fields[f].Str() == "member") value = Shorten(value);
      event.fields +=
          (event.fields.empty() ? "" : " ") + std::string(fields[f].Str()) + " " + value;
    }
    status.events.push_back(std::move(event));
  }
}

}  // namespace

ShardedStatus InspectSharded(redis::Session& redis, const config::Subscription& sub) {
  ShardedStatus status;
  status.name = sub.name;
  status.stream = sub.stream;
  status.group = sub.group;
  status.shard_count = sub.sharding.shards;
  const keys::CoordinatorKeys keys = keys::CoordinatorKeysFor(sub.stream, sub.group);
  // The coordinator's clock is Redis TIME (its deadlines are in it; in a cluster, any master's:
  // their clocks agree to well within the second this view shows).
  auto time = redis.Run(redis::Command("TIME"));
  if (!time.ok()) {
    status.error = time.status().message();
    return status;
  }
  const int64_t now_ms = ToInt(time->view()[0].Str()) * 1000 + ToInt(time->view()[1].Str()) / 1000;

  const auto meta = HashOf(redis, keys.meta, &status.error);
  if (!status.error.empty()) return status;
  status.coordinator_exists = !meta.empty();
  status.group_epoch = ToInt(Get(meta, "group_epoch"));
  status.assignment_epoch = ToInt(Get(meta, "assignment_epoch"));
  ReadMembers(redis, keys, now_ms, status);
  ReadShards(redis, sub, keys, now_ms, status);
  ReadChurn(redis, keys, now_ms, status);
  ReadRecentEvents(redis, keys, status);
  return status;
}

namespace {

// One event as C2 shows it: "grant  shard 4 -> c0d1...9a  fence 1742".
std::string Describe(const ShardStatusEvent& event) {
  auto value = [&](const char* field) {
    auto it = event.values.find(field);
    if (it == event.values.end()) return std::string("?");
    return std::string(field) == "member" ? Shorten(it->second) : it->second;
  };
  if (event.type == "grant") {
    return "shard " + value("shard") + " -> " + value("member") + "  fence " + value("fence");
  }
  if (event.type == "revoke") {
    // B6.1: a stalled shard is revoked straight to another member.
    if (event.values.contains("to")) {
      return "shard " + value("shard") + " from " + value("member") + " (" + value("reason") +
             ") -> " + Shorten(event.values.at("to"));
    }
    return "shard " + value("shard") + " from " + value("member");
  }
  if (event.type == "stalled") {
    return "shard " + value("shard") + " of " + value("member") + ": " + value("waiting") +
           " waiting, no progress for " + value("for_ms") + " ms";
  }
  if (event.type == "revoked") return "shard " + value("shard") + " by " + value("member");
  if (event.type == "kept") return "shard " + value("shard") + " kept by " + value("member");
  if (event.type == "join" || event.type == "leave" || event.type == "fenced") {
    std::string text = "member " + value("member");
    if (auto it = event.values.find("instance"); it != event.values.end() && !it->second.empty()) {
      text += " (instance " + it->second + ")";
    }
    if (auto it = event.values.find("reason"); it != event.values.end()) text += ": " + it->second;
    return text;
  }
  if (event.type == "target") {
    // What moved the group epoch since the last target (C2): one member's change, a count of
    // changes, or (an event of an older coordinator script) the members it was computed for.
    std::string cause;
    if (event.values.contains("change")) {
      cause = "member " + value("member") + " " + value("change");
    } else if (event.values.contains("changes") && event.values.at("changes") != "0") {
      cause = value("changes") + " membership changes";
    } else {
      cause = value("members") + " members";
    }
    return "assignment epoch " + value("assignment_epoch") + " (" + cause + ")";
  }
  return event.fields;
}

// C2's durations: "0.8s", "13.2s", "60s" (whole seconds up to a minute without a decimal),
// then "4m12s" and "2h3m".
std::string SecondsOf(int64_t ms) {
  ms = std::max<int64_t>(ms, 0);
  if (ms <= 60000 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  if (ms < 60000) {
    char text[16];
    std::snprintf(text, sizeof(text), "%.1fs", static_cast<double>(ms) / 1000.0);
    return text;
  }
  if (ms < 3600000) return std::to_string(ms / 60000) + "m" + std::to_string(ms / 1000 % 60) + "s";
  return std::to_string(ms / 3600000) + "h" + std::to_string(ms / 60000 % 60) + "m";
}

std::string ClockOf(int64_t time_ms) {
  const auto seconds = static_cast<time_t>(time_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[16];
  std::strftime(text, sizeof(text), "%H:%M:%S", &utc);
  return text;
}

}  // namespace

void WriteShardedTable(const ShardedStatus& s, int64_t now_ms) {
  std::cout << s.name << "  sharded " << s.shard_count << " shards";
  if (!s.error.empty()) {
    std::cout << "\n  error:    " << s.error << "\n\n";
    return;
  }
  if (!s.coordinator_exists) {
    std::cout
        << "\n  coordinator: no member has joined yet (the first `streamcar run` creates it)\n\n";
    return;
  }
  std::cout << "  group epoch " << s.group_epoch << "  assignment epoch " << s.assignment_epoch
            << "  " << (s.Stable() ? "STABLE" : "RECONCILING") << "  members " << s.members.size()
            << "\n  members\n";
  std::printf("    %-12s %-16s %-6s %-11s %-8s %-10s %-10s %s\n", "MEMBER", "INSTANCE", "EPOCH",
              "STATE", "SHARDS", "PENDING", "SESSION", "LAST HB");
  for (const auto& m : s.members) {
    // SHARDS: held, and (-k) of them being revoked; PENDING: its target shards still held by
    // others, and which.
    std::string shards = std::to_string(m.assigned.size());
    if (!m.revoking.empty()) shards += " (-" + std::to_string(m.revoking.size()) + ")";
    std::string waiting = std::to_string(m.waiting.size());
    if (!m.waiting.empty()) waiting += " (" + Shards(m.waiting) + ")";
    std::string note;
    if (!m.revoking.empty()) {
      note = "   revoking " + Shards(m.revoking) + " for " + SecondsOf(m.revoking_for_ms) +
             " (limit " + SecondsOf(m.rebalance_limit_ms) + ")";
    }
    std::printf("    %-12s %-16s %-6lld %-11s %-8s %-10s %-10s %s ago%s\n", Shorten(m.id).c_str(),
                m.instance.empty() ? "-" : m.instance.c_str(), static_cast<long long>(m.epoch),
                m.state.c_str(), shards.c_str(), waiting.c_str(),
                ("in " + SecondsOf(m.session_left_ms)).c_str(),
                SecondsOf(m.last_heartbeat_ago_ms).c_str(), note.c_str());
  }
  std::cout << "  shards\n";
  std::printf("    %-5s %-24s %-12s %-8s %-9s %-12s %-8s %-8s %-10s %s\n", "SHARD", "KEY", "OWNER",
              "FENCE", "STATE", "TARGET", "LAG", "PENDING", "LAST ACK", "DEAD LETTERS");
  for (const auto& shard : s.shards) {
    const std::string lag = shard.lag ? std::to_string(*shard.lag) : "?";
    const std::string last_ack = shard.acked_ago_ms ? SecondsOf(*shard.acked_ago_ms) + " ago" : "-";
    std::printf("    %-5d %-24s %-12s %-8lld %-9s %-12s %-8s %-8lld %-10s %lld\n", shard.index,
                shard.key.c_str(), shard.owner.empty() ? "-" : Shorten(shard.owner).c_str(),
                static_cast<long long>(shard.fence), shard.state.c_str(),
                shard.target.empty() ? "-" : Shorten(shard.target).c_str(), lag.c_str(),
                static_cast<long long>(shard.pending), last_ack.c_str(),
                static_cast<long long>(shard.dead_letters));
  }
  std::fflush(stdout);
  std::cout << "  unowned: ";
  if (s.unowned == 0) {
    std::cout << "none";
  } else {
    std::cout << s.unowned << " (the longest for " << SecondsOf(s.unowned_oldest_ms) << ")";
  }
  std::cout << "      fenced ops (10m): " << s.fenced_ops_last_10m
            << "      rebalances (1h): " << s.rebalances_last_hour << "\n  recent events\n";
  for (const auto& event : s.events) {
    std::printf("    %s  %-10s %s\n", ClockOf(event.time_ms).c_str(), event.type.c_str(),
                Describe(event).c_str());
  }
  std::fflush(stdout);
  std::cout << "\n";
  (void)now_ms;
}

void WriteStatusHead(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w, const std::string& name,
                     const std::string& stream, const std::string& group,
                     const std::string& error) {
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"name", &name},
                                   {"stream", &stream},
                                   {"group", &group}}) {
    w.Key(key);
    w.String(value->data(), static_cast<rapidjson::SizeType>(value->size()));
  }
  w.Key("error");
  if (error.empty()) {
    w.Null();
  } else {
    w.String(error.data(), static_cast<rapidjson::SizeType>(error.size()));
  }
}

namespace {

const JsonFields<ShardStatusMember>& MemberFields() {
  using M = ShardStatusMember;
  static const JsonFields<M> fields = {
      {"id", StringOf(&M::id)},
      {"instance", StringOf(&M::instance)},
      {"epoch", IntOf(&M::epoch)},
      {"state", StringOf(&M::state)},
      {"assigned", IntsOf(&M::assigned)},
      {"revoking", IntsOf(&M::revoking)},
      {"waiting", IntsOf(&M::waiting)},
      {"revoking_for_ms", IntOf(&M::revoking_for_ms)},
      {"rebalance_limit_ms", IntOf(&M::rebalance_limit_ms)},
      {"session_left_ms", IntOf(&M::session_left_ms)},
      {"last_heartbeat_ago_ms", IntOf(&M::last_heartbeat_ago_ms)},
      {"pod", StringOf(&M::pod)},
      {"host", StringOf(&M::host)},
  };
  return fields;
}

const JsonFields<ShardStatusShard>& ShardFields() {
  using S = ShardStatusShard;
  static const JsonFields<S> fields = {
      {"shard", IntOf(&S::index)},
      {"key", StringOf(&S::key)},
      {"owner", StringOf(&S::owner)},
      {"target", StringOf(&S::target)},
      {"grant_token", IntOf(&S::grant_token)},
      {"fence", IntOf(&S::fence)},
      {"fence_member", StringOf(&S::fence_member)},
      {"state", StringOf(&S::state)},
      {"group_exists", BoolOf(&S::group_exists)},
      {"pending", IntOf(&S::pending)},
      {"lag", IntOrNullOf(&S::lag)},
      {"dead_letters", IntOf(&S::dead_letters)},
      {"last_acked_id", StringOf(&S::last_acked_id)},
      {"acked_ago_ms", IntOrNullOf(&S::acked_ago_ms)},
      {"reported_ago_ms", IntOrNullOf(&S::reported_ago_ms)},
  };
  return fields;
}

const JsonFields<ShardStatusEvent>& EventFields() {
  using E = ShardStatusEvent;
  static const JsonFields<E> fields = {
      {"time_ms", IntOf(&E::time_ms)},
      {"type", StringOf(&E::type)},
      {"fields", StringOf(&E::fields)},
      // As the table's "recent events" line says it.
      {"text", [](JsonWriter& w, const E& event) { WriteString(w, Describe(event)); }},
  };
  return fields;
}

// The "sharded" object of a sharded subscription.
const JsonFields<ShardedStatus>& ShardedFields() {
  using S = ShardedStatus;
  static const JsonFields<S> fields = {
      {"shards", IntOf(&S::shard_count)},
      {"coordinator_exists", BoolOf(&S::coordinator_exists)},
      {"group_epoch", IntOf(&S::group_epoch)},
      {"assignment_epoch", IntOf(&S::assignment_epoch)},
      {"stable", [](JsonWriter& w, const S& s) { w.Bool(s.Stable()); }},
      {"members", [](JsonWriter& w, const S& s) { WriteArray(w, s.members, MemberFields()); }},
      {"shard_list", [](JsonWriter& w, const S& s) { WriteArray(w, s.shards, ShardFields()); }},
      {"unowned", IntOf(&S::unowned)},
      {"unowned_oldest_ms", IntOf(&S::unowned_oldest_ms)},
      {"fenced_ops_last_10m", IntOf(&S::fenced_ops_last_10m)},
      {"rebalances_last_hour", IntOf(&S::rebalances_last_hour)},
      {"events", [](JsonWriter& w, const S& s) { WriteArray(w, s.events, EventFields()); }},
  };
  return fields;
}

}  // namespace

void WriteShardedJson(JsonWriter& w, const ShardedStatus& s) {
  w.StartObject();
  WriteStatusHead(w, s.name, s.stream, s.group, s.error);
  w.Key("sharded");
  WriteObject(w, s, ShardedFields());
  w.EndObject();
}

}  // namespace streamcar::cli

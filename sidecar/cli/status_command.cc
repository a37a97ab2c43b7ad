// `streamcar status`: what Redis says about each subscription, whether or not a sidecar runs.

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/cli/shard_status.h"
#include "sidecar/cli/status_json.h"
#include "sidecar/common/clock.h"
#include "sidecar/common/text.h"
#include "sidecar/redis/group_info.h"

namespace streamcar::cli {
namespace {

struct ConsumerStatus {
  std::string name;
  int64_t pending = 0;
  int64_t idle_ms = 0;
};

struct SubscriptionStatus {
  std::string name, stream, group, dlq_stream;
  std::string error;  // set when the stream key is unusable (e.g. WRONGTYPE)
  bool stream_exists = false;
  int64_t length = 0;
  std::string first_id, last_id;
  bool group_exists = false;
  int64_t pending = 0;
  std::string oldest_pending_id;
  int64_t oldest_pending_idle_ms = 0;
  std::optional<int64_t> lag;
  bool lag_exact = true;  // false: Redis reported no lag; the value is our estimate
  std::string last_delivered_id;
  std::vector<ConsumerStatus> consumers;
  int64_t dlq_length = 0;
};

// A flat [key, value, key, value...] reply's value for `key`.
redis::ReplyView Field(const redis::ReplyView& map, std::string_view key) {
  for (size_t i = 0; i + 1 < map.Size(); i += 2) {
    if (map[i].Str() == key) return map[i + 1];
  }
  return redis::ReplyView(nullptr);
}

int64_t IdAgeMs(const std::string& id, int64_t now_ms) {
  auto parsed = ParseEntryId(id);
  return parsed ? now_ms - static_cast<int64_t>(parsed->ms) : 0;
}

SubscriptionStatus Inspect(redis::Session& redis, const config::Subscription& sub) {
  SubscriptionStatus status;
  status.name = sub.name;
  status.stream = sub.stream;
  status.group = sub.group;
  status.dlq_stream = sub.dead_letter.stream;
  auto stream = redis.Run(redis::Command("XINFO").Arg("STREAM").Arg(sub.stream));
  if (!stream.ok()) {
    if (stream.status().message().find("no such key") == std::string::npos) {
      status.error = stream.status().message();
    }
    return status;
  }
  status.stream_exists = true;
  const auto info = stream->view();
  status.length = Field(info, "length").Integer();
  if (auto first = Field(info, "first-entry"); first.IsArray()) status.first_id = first[0].Str();
  if (auto last = Field(info, "last-entry"); last.IsArray()) status.last_id = last[0].Str();

  auto dlq = redis.Run(redis::Command("XLEN").Arg(sub.dead_letter.stream));
  if (dlq.ok()) status.dlq_length = dlq->view().Integer();

  auto groups = redis.Run(redis::GroupsOf(sub.stream));
  if (!groups.ok()) return status;
  auto group = redis::ParseGroupInfo(groups->view(), sub.group);
  if (!group.ok() || !group->found) return status;
  status.group_exists = true;
  status.pending = group->pending;
  status.last_delivered_id = group->last_delivered_id;
  std::optional<int64_t> counted;
  if (redis::NeedsLagCount(*group)) {
    // Redis cannot tell (entries were deleted in the unread range, or an old server): count
    // what lies after the group's last delivered id, up to a cap.
    auto after =
        redis.Run(redis::LagCount(sub.stream, group->last_delivered_id, redis::kStatusLagCountCap));
    if (after.ok()) {
      if (auto n = redis::ParseLagCount(after->view()); n.ok()) counted = *n;
    }
  }
  const redis::Lag lag = redis::LagOf(*group, counted);
  status.lag = lag.value;
  status.lag_exact = lag.exact;
  auto oldest = redis.Run(
      redis::Command("XPENDING").Arg(sub.stream).Arg(sub.group).Arg("-").Arg("+").Arg(int64_t{1}));
  if (oldest.ok() && oldest->view().Size() > 0) {
    status.oldest_pending_id = oldest->view()[0][0].Str();
    status.oldest_pending_idle_ms = oldest->view()[0][2].Integer();
  }
  auto consumers =
      redis.Run(redis::Command("XINFO").Arg("CONSUMERS").Arg(sub.stream).Arg(sub.group));
  if (consumers.ok()) {
    for (size_t i = 0; i < consumers->view().Size(); ++i) {
      auto c = consumers->view()[i];
      status.consumers.push_back({std::string(Field(c, "name").Str()),
                                  Field(c, "pending").Integer(), Field(c, "idle").Integer()});
    }
  }
  return status;
}

// A plain subscription's object of `status --json`'s "subscriptions" array: the ages are as of
// `now_ms`, the document's time.
JsonFields<SubscriptionStatus> SubscriptionFields(int64_t now_ms) {
  using S = SubscriptionStatus;
  const auto id_or_null = [](std::string S::*member) {
    return [member](JsonWriter& w, const S& s) { WriteStringOrNull(w, s.*member); };
  };
  const auto age_or_null = [now_ms](std::string S::*member) {
    return [member, now_ms](JsonWriter& w, const S& s) {
      const std::string& id = s.*member;
      WriteIntOrNull(w, id.empty() ? std::nullopt : std::optional(IdAgeMs(id, now_ms)));
    };
  };
  static const JsonFields<ConsumerStatus> consumer_fields = {
      {"name", StringOf(&ConsumerStatus::name)},
      {"pending", IntOf(&ConsumerStatus::pending)},
      {"idle_ms", IntOf(&ConsumerStatus::idle_ms)},
  };
  return {
      {"stream_exists", BoolOf(&S::stream_exists)},
      {"length", IntOf(&S::length)},
      {"first_id", id_or_null(&S::first_id)},
      {"first_age_ms", age_or_null(&S::first_id)},
      {"last_id", id_or_null(&S::last_id)},
      {"last_age_ms", age_or_null(&S::last_id)},
      {"group_exists", BoolOf(&S::group_exists)},
      {"pending", IntOf(&S::pending)},
      {"oldest_pending_id", id_or_null(&S::oldest_pending_id)},
      {"oldest_pending_age_ms", age_or_null(&S::oldest_pending_id)},
      {"oldest_pending_idle_ms",
       [](JsonWriter& w, const S& s) {
         WriteIntOrNull(w, s.oldest_pending_id.empty() ? std::nullopt
                                                       : std::optional(s.oldest_pending_idle_ms));
       }},
      {"lag", IntOrNullOf(&S::lag)},
      {"lag_exact", BoolOf(&S::lag_exact)},
      {"last_delivered_id", id_or_null(&S::last_delivered_id)},
      {"consumers", [](JsonWriter& w, const S& s) { WriteArray(w, s.consumers, consumer_fields); }},
      {"dead_letter",
       [](JsonWriter& w, const S& s) {
         w.StartObject();
         w.Key("stream");
         WriteString(w, s.dlq_stream);
         w.Key("length");
         w.Int64(s.dlq_length);
         w.EndObject();
       }},
  };
}

void WriteJson(const CliRedis& redis, const std::vector<SubscriptionStatus>& all,
               const std::vector<ShardedStatus>& sharded, int64_t now_ms) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("time_ms");
  w.Int64(now_ms);
  // Added with SPEC 8: which deployment answered (the keys before it are unchanged).
  w.Key("redis");
  w.StartObject();
  w.Key("mode");
  w.String(redis::ResolvedModeName(redis.mode));
  w.Key("masters");
  w.Int(redis.masters);
  w.EndObject();
  w.Key("subscriptions");
  w.StartArray();
  const JsonFields<SubscriptionStatus> fields = SubscriptionFields(now_ms);
  for (const auto& s : all) {
    w.StartObject();
    WriteStatusHead(w, s.name, s.stream, s.group, s.error);
    WriteFields(w, s, fields);
    w.EndObject();
  }
  for (const auto& s : sharded) WriteShardedJson(w, s);
  w.EndArray();
  w.EndObject();
  std::cout << buffer.GetString() << "\n";
}

void WriteTable(const CliRedis& redis, const std::vector<SubscriptionStatus>& all, int64_t now_ms) {
  // Cluster and Sentinel add one header line; a standalone status reads as it always did.
  if (redis.mode != redis::ResolvedMode::kStandalone) {
    std::cout << "redis: " << redis::ResolvedModeName(redis.mode) << ", " << redis.masters
              << (redis.masters == 1 ? " master" : " masters") << "\n\n";
  }
  for (const auto& s : all) {
    std::cout << s.name << "  (stream " << s.stream << ", group " << s.group << ")\n";
    if (!s.error.empty()) {
      std::cout << "  error:    " << s.error << "\n\n";
      continue;
    }
    if (!s.stream_exists) {
      std::cout << "  stream:   does not exist yet\n\n";
      continue;
    }
    std::cout << "  stream:   " << s.length << " entries";
    if (!s.first_id.empty()) {
      std::cout << ", first " << s.first_id << " (" << AgeOf(IdAgeMs(s.first_id, now_ms))
                << " old), last " << s.last_id << " (" << AgeOf(IdAgeMs(s.last_id, now_ms))
                << " old)";
    }
    std::cout << "\n";
    if (!s.group_exists) {
      std::cout << "  group:    does not exist yet (created by the first `streamcar run`)\n";
    } else {
      std::cout << "  pending:  " << s.pending;
      if (!s.oldest_pending_id.empty()) {
        std::cout << ", oldest " << s.oldest_pending_id << " ("
                  << AgeOf(IdAgeMs(s.oldest_pending_id, now_ms)) << " old, idle "
                  << AgeOf(s.oldest_pending_idle_ms) << ")";
      }
      std::cout << "\n  lag:      ";
      if (s.lag) {
        std::cout << *s.lag;
        if (!s.lag_exact) std::cout << " (estimated: Redis reports no lag for this group)";
      } else {
        std::cout << "unknown";
      }
      std::cout << "\n  consumers:";
      if (s.consumers.empty()) std::cout << " none";
      std::cout << "\n";
      for (const auto& c : s.consumers) {
        std::printf("    %-32s pending %-8lld idle %s\n", c.name.c_str(),
                    static_cast<long long>(c.pending), AgeOf(c.idle_ms).c_str());
        std::fflush(stdout);
      }
    }
    std::cout << "  dead letters: " << s.dlq_length << " in " << s.dlq_stream << "\n\n";
  }
}

}  // namespace

int StatusCommand(const Arguments& args) {
  int exit_code = 0;
  auto config = LoadOrReport(args, &exit_code);
  if (!config) return exit_code;
  auto redis = RedisOrReport(&*config, &exit_code);
  if (!redis) return exit_code;
  std::vector<SubscriptionStatus> all;
  std::vector<ShardedStatus> sharded;  // SHARDING.md C2: after the plain ones
  const uint64_t lost_before = redis->session->lost_connections();
  for (const auto& sub : config->subscriptions) {
    if (sub.sharding.enabled()) {
      sharded.push_back(InspectSharded(*redis->session, sub));
    } else {
      all.push_back(Inspect(*redis->session, sub));
    }
  }
  if (redis->session->lost_connections() != lost_before) {
    std::cerr << "streamcar: lost the connection to Redis while reading status\n";
    return 1;
  }
  const int64_t now_ms = SystemClock::Instance().WallMillis();
  if (args.json) {
    WriteJson(*redis, all, sharded, now_ms);
  } else {
    WriteTable(*redis, all, now_ms);
    for (const auto& s : sharded) WriteShardedTable(s, now_ms);
  }
  return 0;
}

}  // namespace streamcar::cli

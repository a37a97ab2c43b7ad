#include "sidecar/common/log.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sidecar/common/text.h"

namespace streamcar {
namespace {

// One key of the rate limiter: what it was, for the summary line a sweep may write.
struct RepeatState {
  LogLevel level = LogLevel::kWarn;
  std::string msg;
  std::string subscription;
  std::string id;
  SteadyTime last_written{};
  int64_t held_back = 0;
};

constexpr auto kRepeatWindow = std::chrono::seconds(1);

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mutex;  // guards the sink, the clock, the repeat table and the write itself
std::function<void(std::string_view)> g_sink;
const Clock* g_clock = nullptr;  // nullptr: SystemClock
std::unordered_map<std::string, RepeatState> g_repeats;
SteadyTime g_last_sweep{};

}  // namespace

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

StatusOr<LogLevel> ParseLogLevel(std::string_view text) {
  for (const LogLevel level :
       {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (text == LogLevelName(level)) return level;
  }
  return Status(StatusCode::kInvalid,
                "unknown level \"" + std::string(text) + "\" (use debug, info, warn or error)");
}

void SetLogLevel(LogLevel level) { g_level = level; }

Status SetLogLevelFromEnv() {
  const char* value = std::getenv("STREAMCAR_LOG_LEVEL");
  if (value == nullptr || *value == '\0') return Status::Ok();
  auto level = ParseLogLevel(value);
  if (!level.ok()) {
    return {StatusCode::kInvalid, "STREAMCAR_LOG_LEVEL: " + level.status().message()};
  }
  SetLogLevel(*level);
  return Status::Ok();
}

void SetLogSinkForTest(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(g_mutex);
  g_sink = std::move(sink);
  g_repeats.clear();
  g_last_sweep = {};
}

void SetLogClockForTest(const Clock* clock) {
  std::lock_guard lock(g_mutex);
  g_clock = clock;
  g_repeats.clear();
  g_last_sweep = {};
}

size_t LogRepeatKeysForTest() {
  std::lock_guard lock(g_mutex);
  return g_repeats.size();
}

namespace {

using Fields = std::initializer_list<LogField>;

// Writes one line; the caller holds g_mutex.
void WriteLine(int64_t wall_ms, LogLevel level, std::string_view msg, Fields fields,
               int64_t repeated) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("ts");
  const std::string ts = Rfc3339Millis(wall_ms);
  writer.String(ts.data(), static_cast<rapidjson::SizeType>(ts.size()));
  writer.Key("level");
  writer.String(LogLevelName(level));
  writer.Key("msg");
  writer.String(msg.data(), static_cast<rapidjson::SizeType>(msg.size()));
  for (const auto& field : fields) {
    writer.Key(field.key.data(), static_cast<rapidjson::SizeType>(field.key.size()));
    std::visit(
        [&](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::string_view>) {
            writer.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
          } else if constexpr (std::is_same_v<T, int64_t>) {
            writer.Int64(value);
          } else if constexpr (std::is_same_v<T, double>) {
            writer.Double(value);
          } else {
            writer.Bool(value);
          }
        },
        field.value);
  }
  if (repeated > 0) {
    writer.Key("repeated");
    writer.Int64(repeated);
  }
  writer.EndObject();
  std::string_view line(buffer.GetString(), buffer.GetSize());
  if (g_sink) {
    g_sink(line);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

// Drops every key whose window has ended, first reporting what it held back (the error stopped
// repeating, so its count would otherwise never be written); `skip` is the key being logged now,
// which reports its own count. The caller holds g_mutex.
void Sweep(SteadyTime now, int64_t wall_ms, const std::string& skip) {
  g_last_sweep = now;
  for (auto it = g_repeats.begin(); it != g_repeats.end();) {
    const RepeatState& state = it->second;
    if (now - state.last_written < kRepeatWindow || it->first == skip) {
      ++it;
      continue;
    }
    if (state.held_back > 0) {
      std::vector<LogField> fields;
      if (!state.subscription.empty()) fields.emplace_back("subscription", state.subscription);
      if (!state.id.empty()) fields.emplace_back("id", state.id);
      // initializer_list cannot be built from a vector: at most two fields, spelled out.
      if (fields.size() == 2) {
        WriteLine(wall_ms, state.level, state.msg, {fields[0], fields[1]}, state.held_back);
      } else if (fields.size() == 1) {
        WriteLine(wall_ms, state.level, state.msg, {fields[0]}, state.held_back);
      } else {
        WriteLine(wall_ms, state.level, state.msg, {}, state.held_back);
      }
    }
    it = g_repeats.erase(it);
  }
}

}  // namespace

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (level < g_level.load(std::memory_order_relaxed)) return;

  std::lock_guard lock(g_mutex);
  const Clock& clock = g_clock != nullptr ? *g_clock : SystemClock::Instance();
  const SteadyTime now = clock.Now();
  const int64_t wall_ms = clock.WallMillis();
  const bool limited = level >= LogLevel::kWarn;

  // The rate limiter's key: msg, subscription and id (events about different entries are all
  // written).
  std::string key;
  std::string_view subscription;
  std::string_view id;
  if (limited) {
    key = msg;
    for (const auto& field : fields) {
      if (field.key != "subscription" && field.key != "id") continue;
      const auto* text = std::get_if<std::string_view>(&field.value);
      if (text == nullptr) continue;
      (field.key == "id" ? id : subscription) = *text;
      key += '\x1f';
      key += field.key;
      key += '=';
      key += *text;
    }
  }
  if (!g_repeats.empty() && now - g_last_sweep >= kRepeatWindow) Sweep(now, wall_ms, key);

  int64_t repeated = 0;
  if (limited) {
    auto it = g_repeats.find(key);
    if (it != g_repeats.end()) {
      RepeatState& state = it->second;
      if (now - state.last_written < kRepeatWindow) {
        ++state.held_back;
        return;
      }
      repeated = state.held_back;
      state.held_back = 0;
      state.last_written = now;
    } else if (g_repeats.size() < kMaxRepeatKeys) {
      RepeatState state;
      state.level = level;
      state.msg = std::string(msg);
      state.subscription = std::string(subscription);
      state.id = std::string(id);
      state.last_written = now;
      g_repeats.emplace(std::move(key), std::move(state));
    }
    // Else: more distinct keys within one second than the table holds (the sweep empties it
    // within a second); the line is written untracked rather than dropped.
  }
  WriteLine(wall_ms, level, msg, fields, repeated);
}

}  // namespace streamcar

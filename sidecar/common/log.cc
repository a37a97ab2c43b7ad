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

#include "sidecar/common/text.h"

namespace streamcar {
namespace {

struct RepeatState {
  std::chrono::steady_clock::time_point last_written{};
  int64_t held_back = 0;
};

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mutex;  // guards the sink, the repeat table and the write itself
std::function<void(std::string_view)> g_sink;
std::unordered_map<std::string, RepeatState> g_repeats;

const char* LevelName(LogLevel level) {
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

}  // namespace

void SetLogLevel(LogLevel level) { g_level = level; }

void SetLogLevelFromEnv() {
  const char* value = std::getenv("STREAMCAR_LOG_LEVEL");
  if (value == nullptr) return;
  std::string_view level(value);
  if (level == "debug") SetLogLevel(LogLevel::kDebug);
  if (level == "info") SetLogLevel(LogLevel::kInfo);
  if (level == "warn") SetLogLevel(LogLevel::kWarn);
  if (level == "error") SetLogLevel(LogLevel::kError);
}

void SetLogSinkForTest(std::function<void(std::string_view)> sink) {
  std::lock_guard lock(g_mutex);
  g_sink = std::move(sink);
  g_repeats.clear();
}

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (level < g_level.load(std::memory_order_relaxed)) return;
  const auto now = std::chrono::steady_clock::now();
  const int64_t wall_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();

  std::lock_guard lock(g_mutex);
  int64_t repeated = 0;
  if (level >= LogLevel::kWarn) {
    std::string key(msg);
    for (const auto& field : fields) {
      if (field.key == "subscription" || field.key == "id") {
        key += '\x1f';
        key += std::get<std::string_view>(field.value);
      }
    }
    auto& state = g_repeats[key];
    if (state.last_written.time_since_epoch().count() != 0 &&
        now - state.last_written < std::chrono::seconds(1)) {
      ++state.held_back;
      return;
    }
    repeated = state.held_back;
    state.held_back = 0;
    state.last_written = now;
  }

  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("ts");
  const std::string ts = Rfc3339Millis(wall_ms);
  writer.String(ts.data(), static_cast<rapidjson::SizeType>(ts.size()));
  writer.Key("level");
  writer.String(LevelName(level));
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

}  // namespace streamcar

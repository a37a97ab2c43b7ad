#pragma once
// JSON-lines logs on stderr (SPEC section 6): one object per line with ts, level, msg and context
// keys. A repeating warning or error is written at most once per second per (msg, subscription,
// id), with "repeated" counting what was held back: events about different entries are all
// written, a failure that repeats for the same cause is not. Callers never pass secrets: the log
// has no filter. Thread-safe.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

namespace streamcar {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

struct LogField {
  using Value = std::variant<std::string_view, int64_t, double, bool>;
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  LogField(std::string_view k, int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, int v) : key(k), value(int64_t{v}) {}
  LogField(std::string_view k, uint64_t v) : key(k), value(static_cast<int64_t>(v)) {}
  LogField(std::string_view k, double v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
  std::string_view key;
  Value value;
};

void Log(LogLevel level, std::string_view msg, std::initializer_list<LogField> fields = {});

inline void LogInfo(std::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kInfo, msg, fields);
}
inline void LogWarn(std::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kWarn, msg, fields);
}
inline void LogError(std::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kError, msg, fields);
}
inline void LogDebug(std::string_view msg, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kDebug, msg, fields);
}

void SetLogLevel(LogLevel level);
// From $STREAMCAR_LOG_LEVEL (debug|info|warn|error); unknown values keep "info".
void SetLogLevelFromEnv();
// Tests capture lines here instead of stderr; pass nullptr to restore stderr.
void SetLogSinkForTest(std::function<void(std::string_view)> sink);

}  // namespace streamcar

#pragma once
// JSON-lines logs on stderr (SPEC section 6): one object per line with ts, level, msg and context
// keys. A repeating warning or error is written at most once per second per (msg, subscription,
// id), with "repeated" counting what was held back: events about different entries are all
// written, a failure that repeats for the same cause is not. Callers never pass secrets: the log
// has no filter. Thread-safe.
//
// The table behind the limit stays small whatever the traffic: a sweep at most once a second
// (run by the next line logged, at any level) drops every key not written in the last second,
// first writing a line with its "repeated" count when something was held back (so a count is
// never lost because the error stopped repeating), and the table never holds more than
// kMaxRepeatKeys keys: past that, a warning or error with a new key is written untracked.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"

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
// The one spelling of the levels, for $STREAMCAR_LOG_LEVEL and the configuration's `log.level`:
// "debug", "info", "warn" or "error". Any other text is kInvalid with
// `unknown level "<text>" (use debug, info, warn or error)`, for the caller to prefix with the
// variable or key it came from: a misspelt level must not silently log at another one.
StatusOr<LogLevel> ParseLogLevel(std::string_view text);
const char* LogLevelName(LogLevel level);
// From $STREAMCAR_LOG_LEVEL; unset or empty keeps "info". An unknown value is an error naming
// the variable (the caller exits 2, as for a configuration error). A configuration file's
// `log.level`, when present, is applied after it and wins (config/config.h, LogConfig).
Status SetLogLevelFromEnv();
// Tests capture lines here instead of stderr; pass nullptr to restore stderr. Clears the
// repeat table.
void SetLogSinkForTest(std::function<void(std::string_view)> sink);
// Tests move time by hand; nullptr restores the system clock. Clears the repeat table.
void SetLogClockForTest(const Clock* clock);
// How many keys the repeat table holds now (tests check it stays bounded).
size_t LogRepeatKeysForTest();

// The most (msg, subscription, id) keys the rate limiter remembers at once.
inline constexpr size_t kMaxRepeatKeys = 4096;

}  // namespace streamcar

#pragma once
// `streamcar status --json` is written from tables: one row per JSON key, in the order the
// document has them, with the writer of its value. The document's shape is then read off the
// table, one key a line, and a new key is one more row.

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace streamcar::cli {

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

// One key of an object and how its value is written from a T.
template <typename T>
struct JsonField {
  const char* key;
  std::function<void(JsonWriter&, const T&)> write;
};

template <typename T>
using JsonFields = std::vector<JsonField<T>>;

inline void WriteString(JsonWriter& w, const std::string& text) {
  w.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// "" is written as null (an id or an error that is not there).
inline void WriteStringOrNull(JsonWriter& w, const std::string& text) {
  if (text.empty()) {
    w.Null();
  } else {
    WriteString(w, text);
  }
}

inline void WriteIntOrNull(JsonWriter& w, const std::optional<int64_t>& value) {
  if (value) {
    w.Int64(*value);
  } else {
    w.Null();
  }
}

template <typename T>
void WriteFields(JsonWriter& w, const T& value, const JsonFields<T>& fields) {
  for (const auto& field : fields) {
    w.Key(field.key);
    field.write(w, value);
  }
}

template <typename T>
void WriteObject(JsonWriter& w, const T& value, const JsonFields<T>& fields) {
  w.StartObject();
  WriteFields(w, value, fields);
  w.EndObject();
}

template <typename T>
void WriteArray(JsonWriter& w, const std::vector<T>& values, const JsonFields<T>& fields) {
  w.StartArray();
  for (const auto& value : values) WriteObject(w, value, fields);
  w.EndArray();
}

// Writers of a member of T, for the tables' rows.
template <typename T>
auto StringOf(std::string T::*member) {
  return [member](JsonWriter& w, const T& value) { WriteString(w, value.*member); };
}

template <typename T, typename Int>
auto IntOf(Int T::*member) {
  return [member](JsonWriter& w, const T& value) { w.Int64(static_cast<int64_t>(value.*member)); };
}

template <typename T>
auto BoolOf(bool T::*member) {
  return [member](JsonWriter& w, const T& value) { w.Bool(value.*member); };
}

template <typename T>
auto IntOrNullOf(std::optional<int64_t> T::*member) {
  return [member](JsonWriter& w, const T& value) { WriteIntOrNull(w, value.*member); };
}

template <typename T>
auto IntsOf(std::vector<int> T::*member) {
  return [member](JsonWriter& w, const T& value) {
    w.StartArray();
    for (int each : value.*member) w.Int(each);
    w.EndArray();
  };
}

}  // namespace streamcar::cli

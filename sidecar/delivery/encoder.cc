#include "sidecar/delivery/encoder.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "sidecar/common/text.h"
#include "sidecar/delivery/base64.h"

namespace streamcar::delivery {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& writer, std::string_view text) {
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// Fields the payload object could not carry as plain JSON strings.
struct Base64Lists {
  std::vector<std::string> fields;  // fields whose values are base64
  std::vector<std::string> names;   // names that are themselves base64 (not UTF-8)
};

// Writes the payload object {"field":"value",...}.
//
// A field whose values are not all valid UTF-8 has every value base64-encoded and its name listed
// once in base64_fields, so a handler decodes all values of a field the same way. Names that occur
// more than once map to an array of their values in entry order. A name that is itself not UTF-8
// is written base64-encoded and listed in base64_names (an extension: SPEC does not cover binary
// names, and dropping them would lose data).
void WritePayloadObject(JsonWriter& writer, const StreamEntry& entry, Base64Lists* lists) {
  const auto& fields = entry.fields;
  const size_t n = fields.size();
  // Entries are small: the quadratic duplicate scan beats building a map for each of them.
  std::vector<bool> done(n, false);
  std::string encoded;
  writer.StartObject();
  for (size_t i = 0; i < n; ++i) {
    if (done[i]) continue;
    const std::string& name = fields[i].first;
    size_t occurrences = 0;
    bool binary = false;
    for (size_t k = i; k < n; ++k) {
      if (fields[k].first != name) continue;
      ++occurrences;
      binary = binary || !IsValidUtf8(fields[k].second);
    }
    std::string_view written_name = name;
    if (!IsValidUtf8(name)) {
      lists->names.push_back(Base64Encode(name));
      written_name = lists->names.back();
    }
    WriteString(writer, written_name);
    if (binary) lists->fields.emplace_back(written_name);
    auto write_value = [&](const std::string& value) {
      if (!binary) return WriteString(writer, value);
      encoded.clear();
      Base64EncodeTo(value, &encoded);
      WriteString(writer, encoded);
    };
    if (occurrences == 1) {
      write_value(fields[i].second);
      done[i] = true;
      continue;
    }
    writer.StartArray();
    for (size_t k = i; k < n; ++k) {
      if (fields[k].first != name) continue;
      write_value(fields[k].second);
      done[k] = true;
    }
    writer.EndArray();
  }
  writer.EndObject();
}

void WriteList(JsonWriter& writer, const char* key, const std::vector<std::string>& items) {
  if (items.empty()) return;
  writer.Key(key);
  writer.StartArray();
  for (const auto& item : items) WriteString(writer, item);
  writer.EndArray();
}

void WriteEnvelope(JsonWriter& writer, const std::string* stream, const std::string* group,
                   const StreamEntry& entry) {
  writer.StartObject();
  writer.Key("id");
  WriteString(writer, entry.id);
  if (stream != nullptr) {
    writer.Key("stream");
    WriteString(writer, *stream);
    writer.Key("group");
    WriteString(writer, *group);
  }
  writer.Key("attempts");
  writer.Int(entry.attempts);
  writer.Key("payload");
  Base64Lists lists;
  WritePayloadObject(writer, entry, &lists);
  WriteList(writer, "base64_fields", lists.fields);
  WriteList(writer, "base64_names", lists.names);
  writer.EndObject();
}

// The payload object alone (cloudevents without raw_field). It has no room for base64_fields, so
// that list travels in the Streamcar-Base64-Fields header (comma-separated).
std::string PayloadObject(const StreamEntry& entry, std::string* base64_header) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  Base64Lists lists;
  WritePayloadObject(writer, entry, &lists);
  for (const auto& field : lists.fields) {
    if (!base64_header->empty()) *base64_header += ',';
    *base64_header += field;
  }
  return std::string(buffer.GetString(), buffer.GetSize());
}

void AddCommonHeaders(const EncodeContext& context, const StreamEntry& entry,
                      HttpRequest* request) {
  auto& headers = request->headers;
  headers.reserve(8 + context.handler->headers.size());
  headers.emplace_back("Streamcar-Stream", context.stream);
  headers.emplace_back("Streamcar-Group", context.group);
  headers.emplace_back("Streamcar-Id", entry.id);
  headers.emplace_back("Streamcar-Attempts", std::to_string(entry.attempts));
  headers.emplace_back("Idempotency-Key", context.stream + "/" + entry.id);
  for (const char* trace_field : {"traceparent", "tracestate"}) {
    if (const auto* value = entry.Find(trace_field);
        value != nullptr && value->find_first_of("\r\n") == std::string::npos) {
      headers.emplace_back(trace_field, *value);
    }
  }
  for (const auto& [name, value] : context.handler->headers) headers.emplace_back(name, value);
}

}  // namespace

std::string EncodeJsonEnvelope(const std::string& stream, const std::string& group,
                               const StreamEntry& entry) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  WriteEnvelope(writer, &stream, &group, entry);
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool EncodeEntry(const EncodeContext& context, const StreamEntry& entry, HttpRequest* request,
                 std::string* why) {
  const auto& handler = *context.handler;
  request->headers.clear();
  AddCommonHeaders(context, entry, request);
  switch (handler.format) {
    case config::Format::kJson:
      request->content_type = "application/json";
      request->body = EncodeJsonEnvelope(context.stream, context.group, entry);
      return true;
    case config::Format::kRaw: {
      const std::string* body = entry.Find(handler.raw_field);
      if (body == nullptr) {
        *why = "entry has no field \"" + handler.raw_field + "\" (handler.raw_field, format raw)";
        return false;
      }
      const std::string* type = entry.Find("content_type");
      request->content_type = type != nullptr ? *type : "application/octet-stream";
      request->body = *body;
      return true;
    }
    case config::Format::kCloudEvents: {
      auto& headers = request->headers;
      headers.emplace_back("ce-specversion", "1.0");
      headers.emplace_back("ce-id", entry.id);
      headers.emplace_back("ce-source", "/streams/" + context.stream);
      const std::string* type = entry.Find("type");
      headers.emplace_back("ce-type", type != nullptr ? *type : "streamcar.entry");
      const auto id = ParseEntryId(entry.id);
      headers.emplace_back("ce-time", Rfc3339Millis(id ? static_cast<int64_t>(id->ms) : 0));
      if (const std::string* body = entry.Find(handler.raw_field); body != nullptr) {
        const std::string* content_type = entry.Find("content_type");
        request->content_type =
            content_type != nullptr ? *content_type : "application/octet-stream";
        request->body = *body;
      } else {
        std::string base64_list;
        request->content_type = "application/json";
        request->body = PayloadObject(entry, &base64_list);
        if (!base64_list.empty()) headers.emplace_back("Streamcar-Base64-Fields", base64_list);
      }
      return true;
    }
  }
  return false;
}

void EncodeBatch(const EncodeContext& context, const std::vector<const StreamEntry*>& entries,
                 HttpRequest* request) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("stream");
  WriteString(writer, context.stream);
  writer.Key("group");
  WriteString(writer, context.group);
  writer.Key("entries");
  writer.StartArray();
  for (const auto* entry : entries) WriteEnvelope(writer, nullptr, nullptr, *entry);
  writer.EndArray();
  writer.EndObject();
  request->content_type = "application/json";
  request->body.assign(buffer.GetString(), buffer.GetSize());
  request->headers.clear();
  request->headers.emplace_back("Streamcar-Stream", context.stream);
  request->headers.emplace_back("Streamcar-Group", context.group);
  request->headers.emplace_back("Streamcar-Batch-Size", std::to_string(entries.size()));
  for (const auto& [name, value] : context.handler->headers)
    request->headers.emplace_back(name, value);
}

}  // namespace streamcar::delivery

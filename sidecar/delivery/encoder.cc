#include "sidecar/delivery/encoder.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "sidecar/common/text.h"
#include "sidecar/delivery/base64.h"
#include "sidecar/delivery/cloudevent_json.h"
#include "sidecar/delivery/entry_body.h"
#include "sidecar/delivery/entry_trace.h"
#include "sidecar/delivery/header_values.h"
#include "sidecar/delivery/published_event.h"

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
  // Entries are small: the quadratic duplicate scans (a name written already, its later
  // occurrences) beat building a map, or even a list of marks, for each of them.
  std::string encoded;
  writer.StartObject();
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = fields[i].first;
    bool written = false;
    for (size_t k = 0; k < i && !written; ++k) written = fields[k].first == name;
    if (written) continue;  // with the first field of its name
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
      continue;
    }
    writer.StartArray();
    for (size_t k = i; k < n; ++k) {
      if (fields[k].first != name) continue;
      write_value(fields[k].second);
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

void WriteShard(JsonWriter& writer, const ShardStamp& shard) {
  writer.Key("shard");
  writer.Int(shard.shard);
  writer.Key("fence");
  writer.Int64(shard.fence);
}

void WriteEnvelope(JsonWriter& writer, const std::string* stream, const std::string* group,
                   const StreamEntry& entry, const ShardStamp* shard = nullptr) {
  writer.StartObject();
  writer.Key("id");
  WriteString(writer, entry.id);
  if (stream != nullptr) {
    writer.Key("stream");
    WriteString(writer, *stream);
    writer.Key("group");
    WriteString(writer, *group);
  }
  if (shard != nullptr) WriteShard(writer, *shard);
  writer.Key("attempts");
  writer.Int(entry.attempts);
  writer.Key("payload");
  Base64Lists lists;
  WritePayloadObject(writer, entry, &lists);
  WriteList(writer, "base64_fields", lists.fields);
  WriteList(writer, "base64_names", lists.names);
  writer.EndObject();
}

// The request leaves the encoder only when no header could break framing (SPEC 3.1): a
// guarantee that holds whatever the code above or the configuration let through.
bool CheckFraming(const HttpRequest& request, std::string* why) {
  std::string error = FramingError(request.content_type, request.headers);
  if (error.empty()) return true;
  *why = "refused to send the request: " + error;
  return false;
}

void AddShardHeaders(const EncodeContext& context, HttpRequest* request) {
  if (!context.shard) return;
  request->headers.emplace_back("Streamcar-Shard", std::to_string(context.shard->shard));
  request->headers.emplace_back("Streamcar-Fence", std::to_string(context.shard->fence));
}

void AddCommonHeaders(const EncodeContext& context, const StreamEntry& entry,
                      const std::optional<TraceContext>& trace, HttpRequest* request) {
  auto& headers = request->headers;
  headers.reserve(8 + context.handler->headers.size());
  headers.emplace_back("Streamcar-Stream", context.stream);
  headers.emplace_back("Streamcar-Group", context.group);
  headers.emplace_back("Streamcar-Id", entry.id);
  headers.emplace_back("Streamcar-Attempts", std::to_string(entry.attempts));
  AddShardHeaders(context, request);
  headers.emplace_back("Idempotency-Key", context.stream + "/" + entry.id);
  // W3C Trace Context (entry_trace.h): an invalid traceparent is left out (and with it
  // tracestate, which means nothing without one); the entry is still delivered.
  if (trace) {
    headers.emplace_back("traceparent", trace->traceparent);
    if (!trace->tracestate.empty()) headers.emplace_back("tracestate", trace->tracestate);
  }
  for (const auto& [name, value] : context.handler->headers) headers.emplace_back(name, value);
}

void AddBatchHeaders(const EncodeContext& context, size_t size, HttpRequest* request) {
  request->headers.emplace_back("Streamcar-Stream", context.stream);
  request->headers.emplace_back("Streamcar-Group", context.group);
  request->headers.emplace_back("Streamcar-Batch-Size", std::to_string(size));
  AddShardHeaders(context, request);
  for (const auto& [name, value] : context.handler->headers)
    request->headers.emplace_back(name, value);
}

}  // namespace

std::string PayloadObject(const StreamEntry& entry, std::string* base64_header) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  Base64Lists lists;
  WritePayloadObject(writer, entry, &lists);
  for (const auto& field : lists.fields) {
    if (!base64_header->empty()) *base64_header += ',';
    for (char c : CloudEventsHeaderValue(field)) {
      if (c == ',') {
        *base64_header += "%2C";
      } else {
        *base64_header += c;
      }
    }
  }
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool BodyContentType(const StreamEntry& entry, std::string* content_type, std::string* why) {
  const std::string* value = entry.Find("content_type");
  if (value == nullptr) {
    *content_type = "application/octet-stream";
    return true;
  }
  if (std::string error = MediaTypeError(*value); !error.empty()) {
    *why =
        "field \"content_type\" is not a valid media type (RFC 9110 type/subtype[; name=value]): " +
        error;
    return false;
  }
  *content_type = TrimOws(*value);
  return true;
}

std::string EncodeLogEntry(const StreamEntry& entry) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("id");
  WriteString(writer, entry.id);
  writer.Key("fields");
  Base64Lists lists;
  WritePayloadObject(writer, entry, &lists);
  WriteList(writer, "base64_fields", lists.fields);
  WriteList(writer, "base64_names", lists.names);
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string EncodeJsonEnvelope(const std::string& stream, const std::string& group,
                               const StreamEntry& entry, const ShardStamp* shard) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  WriteEnvelope(writer, &stream, &group, entry, shard);
  return std::string(buffer.GetString(), buffer.GetSize());
}

bool EncodeEntry(const EncodeContext& context, const StreamEntry& entry, HttpRequest* request,
                 std::string* why) {
  const auto& handler = *context.handler;
  request->headers.clear();
  // Format dapr reads a Dapr publisher's event in the entry once, for its trace and its body.
  const std::optional<PublishedEvent> published = FindPublishedEvent(handler, entry);
  const std::optional<TraceContext> trace = EntryTrace(entry, published ? &*published : nullptr);
  AddCommonHeaders(context, entry, trace, request);
  switch (handler.format) {
    case config::Format::kJson:
      request->content_type = "application/json";
      request->body = EncodeJsonEnvelope(context.stream, context.group, entry,
                                         context.shard ? &*context.shard : nullptr);
      return CheckFraming(*request, why);
    case config::Format::kRaw: {
      const std::string* body = entry.Find(handler.raw_field);
      if (body == nullptr) {
        *why = "entry has no field \"" + handler.raw_field + "\" (handler.raw_field, format raw)";
        return false;
      }
      if (!BodyContentType(entry, &request->content_type, why)) return false;
      request->body = *body;
      return CheckFraming(*request, why);
    }
    case config::Format::kCloudEvents: {
      auto& headers = request->headers;
      // Every attribute goes through the HTTP binding's percent-encoding, even those built here
      // (a no-op for them), so no attribute can reach a header unencoded.
      headers.emplace_back("ce-specversion", CloudEventsHeaderValue("1.0"));
      headers.emplace_back("ce-id", CloudEventsHeaderValue(entry.id));
      headers.emplace_back("ce-source", CloudEventsSource(context.stream));
      // An empty type is no CloudEvents type (the attribute must be non-empty): it is treated as
      // absent. A repeated field uses its first value.
      const std::string* type = entry.Find("type");
      headers.emplace_back("ce-type", CloudEventsHeaderValue(type != nullptr && !type->empty()
                                                                 ? *type
                                                                 : std::string("streamcar.entry")));
      const auto id = ParseEntryId(entry.id);
      headers.emplace_back(
          "ce-time", CloudEventsHeaderValue(Rfc3339Millis(id ? static_cast<int64_t>(id->ms) : 0)));
      if (const std::string* body = entry.Find(handler.raw_field); body != nullptr) {
        if (!BodyContentType(entry, &request->content_type, why)) return false;
        request->body = *body;
      } else {
        std::string base64_list;
        request->content_type = "application/json";
        request->body = PayloadObject(entry, &base64_list);
        if (!base64_list.empty()) headers.emplace_back("Streamcar-Base64-Fields", base64_list);
      }
      return CheckFraming(*request, why);
    }
    case config::Format::kCloudEventsStructured:
    case config::Format::kDapr: {
      std::string base64_list;
      request->content_type = "application/cloudevents+json";
      const DaprParts dapr{published ? &*published : nullptr, trace ? &*trace : nullptr};
      if (!EncodeCloudEvent(context, entry,
                            handler.format == config::Format::kDapr ? &dapr : nullptr,
                            &request->body, &base64_list, why)) {
        return false;
      }
      if (!base64_list.empty()) {
        request->headers.emplace_back("Streamcar-Base64-Fields", base64_list);
      }
      return CheckFraming(*request, why);
    }
  }
  return false;
}

namespace {

// A batch of cloudevents-structured events: the CloudEvents JSON batch format, an array of
// events. An entry the format cannot express (its content_type) fails the batch like a header
// that would break framing: its entries are dead-lettered as invalid, naming the entry.
bool EncodeEventBatch(const EncodeContext& context, const std::vector<const StreamEntry*>& entries,
                      HttpRequest* request, std::string* why) {
  request->content_type = "application/cloudevents-batch+json";
  request->body = "[";
  std::string event;
  std::string base64_list;
  for (const auto* entry : entries) {
    event.clear();
    base64_list.clear();
    if (!EncodeCloudEvent(context, *entry, nullptr, &event, &base64_list, why)) {
      *why = "entry " + entry->id + ": " + *why;
      return false;
    }
    // A batch has no per-entry headers: an entry whose payload needed base64 says so in an
    // extension attribute of its own event instead of Streamcar-Base64-Fields.
    if (!base64_list.empty()) {
      event.pop_back();  // the closing brace of the object
      event += ",\"streamcarbase64fields\":";
      rapidjson::StringBuffer quoted;
      JsonWriter writer(quoted);
      WriteString(writer, base64_list);
      event.append(quoted.GetString(), quoted.GetSize());
      event += '}';
    }
    if (request->body.size() > 1) request->body += ',';
    request->body += event;
  }
  request->body += ']';
  return true;
}

}  // namespace

bool EncodeBatch(const EncodeContext& context, const std::vector<const StreamEntry*>& entries,
                 HttpRequest* request, std::string* why) {
  request->headers.clear();
  if (context.handler->format == config::Format::kCloudEventsStructured) {
    if (!EncodeEventBatch(context, entries, request, why)) return false;
    AddBatchHeaders(context, entries.size(), request);
    return CheckFraming(*request, why);
  }
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("stream");
  WriteString(writer, context.stream);
  writer.Key("group");
  WriteString(writer, context.group);
  if (context.shard) WriteShard(writer, *context.shard);
  writer.Key("entries");
  writer.StartArray();
  for (const auto* entry : entries) WriteEnvelope(writer, nullptr, nullptr, *entry);
  writer.EndArray();
  writer.EndObject();
  request->content_type = "application/json";
  request->body.assign(buffer.GetString(), buffer.GetSize());
  AddBatchHeaders(context, entries.size(), request);
  return CheckFraming(*request, why);
}

}  // namespace streamcar::delivery

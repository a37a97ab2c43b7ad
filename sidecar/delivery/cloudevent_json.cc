#include "sidecar/delivery/cloudevent_json.h"

#include <string_view>

#include "sidecar/common/text.h"
#include "sidecar/delivery/base64.h"
#include "sidecar/delivery/entry_body.h"
#include "sidecar/delivery/exact_json.h"
#include "sidecar/delivery/header_values.h"

namespace streamcar::delivery {
namespace {

void WriteString(JsonWriter& writer, std::string_view text) {
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

void WriteMember(JsonWriter& writer, const char* key, std::string_view value) {
  writer.Key(key);
  WriteString(writer, value);
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

// "type/subtype" of a media type (already validated), lowercase, without parameters.
std::string Essence(std::string_view media_type) {
  const size_t semicolon = media_type.find(';');
  return Lower(TrimOws(media_type.substr(0, semicolon)));
}

// application/json, text/json and any structured-syntax "+json" subtype (RFC 6839).
bool IsJsonMediaType(std::string_view essence) {
  return essence == "application/json" || essence == "text/json" ||
         (essence.size() > 5 && essence.substr(essence.size() - 5) == "+json");
}

// The bytes as one JSON value, re-written by our own writer (so nothing of the entry reaches the
// body unchecked). Empty when they are not JSON (or not UTF-8).
std::string AsJsonValue(const std::string& bytes) {
  rapidjson::StringBuffer buffer;
  ExactWriter writer(buffer);
  if (!ParseWith(bytes, writer) || !writer.IsComplete()) return "";
  return std::string(buffer.GetString(), buffer.GetSize());
}

// datacontenttype and data / data_base64 of an entry that has the raw field.
bool WriteRawData(JsonWriter& writer, const StreamEntry& entry, const std::string& bytes,
                  std::string* why) {
  if (entry.Find("content_type") == nullptr) {
    // Nothing says what the bytes are. Text that is not JSON is a string, as the CloudEvents
    // JSON format carries text (and as plain text a Dapr publisher sends arrives); JSON text is
    // not taken for JSON on a guess, and bytes that are not UTF-8 cannot be a string: both go
    // base64, the exact bytes with no claim about them.
    if (IsValidUtf8(bytes) && AsJsonValue(bytes).empty()) {
      WriteMember(writer, "datacontenttype", "text/plain");
      WriteMember(writer, "data", bytes);
    } else {
      WriteMember(writer, "datacontenttype", "application/octet-stream");
      WriteMember(writer, "data_base64", Base64Encode(bytes));
    }
    return true;
  }
  std::string content_type;
  if (!BodyContentType(entry, &content_type, why)) return false;
  WriteMember(writer, "datacontenttype", content_type);
  const std::string essence = Essence(content_type);
  if (IsJsonMediaType(essence)) {
    if (std::string json = AsJsonValue(bytes); !json.empty()) {
      writer.Key("data");
      writer.RawValue(json.data(), json.size(), rapidjson::kObjectType);
      return true;
    }
  } else if (essence != "application/octet-stream" && IsValidUtf8(bytes)) {
    WriteMember(writer, "data", bytes);
    return true;
  }
  WriteMember(writer, "data_base64", Base64Encode(bytes));
  return true;
}

// The stream the app subscribed to: the subscription's, also when this is one of its shards.
const std::string& DaprTopic(const EncodeContext& context) {
  const std::string& topic = context.handler->dapr_topic;
  return topic.empty() ? context.stream : topic;
}

void WriteDaprAttributes(JsonWriter& writer, const EncodeContext& context, const DaprParts& dapr) {
  WriteMember(writer, "topic", DaprTopic(context));
  WriteMember(writer, "pubsubname", context.group);
  if (dapr.trace == nullptr) return;
  WriteMember(writer, "traceparent", dapr.trace->traceparent);
  WriteMember(writer, "traceid", dapr.trace->traceparent);  // Dapr's older name for it
  if (!dapr.trace->tracestate.empty()) WriteMember(writer, "tracestate", dapr.trace->tracestate);
}

// The attributes every event asserts, whatever the entry holds: entry data is untrusted input,
// so id, source, specversion and time are always streamcar's (the binary mode's, SPEC 3.1).
void WriteOwnAttributes(JsonWriter& writer, const EncodeContext& context, const StreamEntry& entry,
                        std::string_view type) {
  WriteMember(writer, "specversion", "1.0");
  WriteMember(writer, "id", entry.id);
  WriteMember(writer, "source", CloudEventsSource(context.stream));
  WriteMember(writer, "type", type);
  const auto id = ParseEntryId(entry.id);
  WriteMember(writer, "time", Rfc3339Millis(id ? static_cast<int64_t>(id->ms) : 0));
}

// An entry a Dapr publisher wrote (published_event.h) as the same event as any other entry:
// streamcar's attributes, then the published event's type (when it has one), the attributes
// describing its data, its extensions and its data, each re-written by our writer.
void WritePublishedEvent(JsonWriter& writer, const EncodeContext& context, const StreamEntry& entry,
                         const DaprParts& dapr) {
  const PublishedEvent& published = *dapr.published;
  writer.StartObject();
  WriteOwnAttributes(writer, context, entry,
                     published.type.empty() ? "streamcar.entry" : published.type);
  WriteDaprAttributes(writer, context, dapr);
  for (const auto& [key, json] : published.members) {
    writer.Key(key.data(), static_cast<rapidjson::SizeType>(key.size()));
    writer.RawValue(json.data(), json.size(), rapidjson::kObjectType);
  }
  writer.EndObject();
}

}  // namespace

bool EncodeCloudEvent(const EncodeContext& context, const StreamEntry& entry, const DaprParts* dapr,
                      std::string* event, std::string* base64_header, std::string* why) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  if (dapr != nullptr && dapr->published != nullptr) {
    WritePublishedEvent(writer, context, entry, *dapr);
    event->assign(buffer.GetString(), buffer.GetSize());
    return true;
  }
  writer.StartObject();
  // As in binary mode: an empty type is no CloudEvents type, and a repeated field uses its first
  // value. A type that is not UTF-8 cannot be a JSON string: it is percent-encoded as the binary
  // mode's header would carry it.
  const std::string* type = entry.Find("type");
  std::string type_value = type != nullptr && !type->empty() ? *type : "streamcar.entry";
  if (!IsValidUtf8(type_value)) type_value = CloudEventsHeaderValue(type_value);
  WriteOwnAttributes(writer, context, entry, type_value);
  if (dapr != nullptr) WriteDaprAttributes(writer, context, *dapr);
  if (const std::string* bytes = entry.Find(context.handler->raw_field); bytes != nullptr) {
    if (!WriteRawData(writer, entry, *bytes, why)) return false;
  } else {
    WriteMember(writer, "datacontenttype", "application/json");
    const std::string payload = PayloadObject(entry, base64_header);
    writer.Key("data");
    writer.RawValue(payload.data(), payload.size(), rapidjson::kObjectType);
  }
  writer.EndObject();
  event->assign(buffer.GetString(), buffer.GetSize());
  return true;
}

}  // namespace streamcar::delivery

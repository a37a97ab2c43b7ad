#include "sidecar/delivery/cloudevent_json.h"

#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>

#include "sidecar/common/text.h"
#include "sidecar/delivery/base64.h"
#include "sidecar/delivery/entry_body.h"
#include "sidecar/delivery/header_values.h"

namespace streamcar::delivery {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

// A writer fed by the reader (kParseNumbersAsStringsFlag) that writes each number as it was
// spelled: rapidjson's own Writer::RawNumber would quote it, turning 0 into "0".
class ExactWriter : public JsonWriter {
 public:
  using JsonWriter::JsonWriter;
  bool RawNumber(const char* text, rapidjson::SizeType length, bool /*copy*/) {
    return RawValue(text, length, rapidjson::kNumberType);
  }
};

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

// Entry bytes as JSON: UTF-8 checked, numbers kept as they were spelled, and read by the
// iterative parser: entry data nested a million levels deep must not recurse on the stack.
constexpr unsigned kStrictJson = rapidjson::kParseValidateEncodingFlag |
                                 rapidjson::kParseNumbersAsStringsFlag |
                                 rapidjson::kParseIterativeFlag;

template <typename Handler>
bool ParseWith(const std::string& bytes, Handler& handler) {
  rapidjson::Reader reader;
  rapidjson::MemoryStream stream(bytes.data(), bytes.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
  return !reader.Parse<kStrictJson>(input, handler).IsError();
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

// Dapr's attributes streamcar sets on every dapr event, whatever a published event said.
bool IsDaprAttribute(std::string_view key) {
  return key == "topic" || key == "pubsubname" || key == "traceparent" || key == "traceid" ||
         key == "tracestate";
}

// Streams a JSON document through to `next` (a writer, or nothing), tracking the depth, and
// dropping the members of the top-level object that `skip` names, values included. Before the
// top-level object closes, `at_end` writes what replaces them. Without recursion: the reader is
// iterative and this keeps counters only.
template <typename Next>
class TopLevelFilter {
 public:
  TopLevelFilter(Next* next, bool (*skip)(std::string_view), std::function<void()> at_end)
      : next_(next), skip_(skip), at_end_(std::move(at_end)) {}

  bool top_is_object() const { return top_is_object_; }
  bool saw_specversion() const { return saw_specversion_; }

  bool Null() {
    return Scalar([&] { return next_->Null(); });
  }
  bool Bool(bool b) {
    return Scalar([&] { return next_->Bool(b); });
  }
  bool Int(int i) {
    return Scalar([&] { return next_->Int(i); });
  }
  bool Uint(unsigned u) {
    return Scalar([&] { return next_->Uint(u); });
  }
  bool Int64(int64_t i) {
    return Scalar([&] { return next_->Int64(i); });
  }
  bool Uint64(uint64_t u) {
    return Scalar([&] { return next_->Uint64(u); });
  }
  bool Double(double d) {
    return Scalar([&] { return next_->Double(d); });
  }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool copy) {
    return Scalar([&] { return next_->RawNumber(text, length, copy); });
  }
  bool String(const char* text, rapidjson::SizeType length, bool copy) {
    if (depth_ == 1 && pending_specversion_) saw_specversion_ = true;
    pending_specversion_ = false;
    return Scalar([&] { return next_->String(text, length, copy); });
  }
  bool Key(const char* text, rapidjson::SizeType length, bool copy) {
    pending_specversion_ = false;
    if (skipping_ > 0) return true;
    if (depth_ == 1) {
      const std::string_view key(text, length);
      if (skip_(key)) {
        skip_value_ = true;
        return true;
      }
      pending_specversion_ = key == "specversion";
    }
    return next_->Key(text, length, copy);
  }
  bool StartObject() {
    if (depth_ == 0) top_is_object_ = true;
    return Open([&] { return next_->StartObject(); });
  }
  bool EndObject(rapidjson::SizeType count) {
    if (skipping_ == 0 && depth_ == 1) at_end_();
    return Close([&] { return next_->EndObject(count); });
  }
  bool StartArray() {
    return Open([&] { return next_->StartArray(); });
  }
  bool EndArray(rapidjson::SizeType count) {
    return Close([&] { return next_->EndArray(count); });
  }

 private:
  template <typename Write>
  bool Scalar(Write write) {
    pending_specversion_ = false;
    if (skip_value_) {  // a skipped member's value that is a scalar
      skip_value_ = false;
      return true;
    }
    return skipping_ > 0 || write();
  }
  template <typename Write>
  bool Open(Write write) {
    pending_specversion_ = false;
    ++depth_;
    if (skip_value_) {
      skip_value_ = false;
      skipping_ = 1;
      return true;
    }
    if (skipping_ > 0) {
      ++skipping_;
      return true;
    }
    return write();
  }
  template <typename Write>
  bool Close(Write write) {
    --depth_;
    if (skipping_ > 0) {
      --skipping_;
      return true;
    }
    return write();
  }

  Next* next_;
  bool (*skip_)(std::string_view);
  std::function<void()> at_end_;
  int depth_ = 0;
  int skipping_ = 0;         // >0: inside a skipped member's object or array, this many levels
  bool skip_value_ = false;  // the next value belongs to a skipped member
  bool top_is_object_ = false;
  bool pending_specversion_ = false;
  bool saw_specversion_ = false;
};

// Writes nothing: the first pass of PublishedCloudEvent only looks.
struct Discard : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, Discard> {};

bool NoMember(std::string_view /*key*/) { return false; }

void WriteDaprAttributes(JsonWriter& writer, const EncodeContext& context,
                         const StreamEntry& entry);

// An entry written by Dapr's publish API holds the whole CloudEvent it published in its `data`
// field (XADD <topic> * data <event>), with no content_type. Dapr's runtime hands that event to
// the subscriber as it is, with its own topic, pubsubname and trace attributes: so does format
// dapr, so that a subscriber moved to streamcar still reads what a Dapr publisher sends. True
// (and *event written) when the bytes are a JSON object with a "specversion" string.
bool PublishedCloudEvent(const EncodeContext& context, const StreamEntry& entry,
                         const std::string& bytes, std::string* event) {
  const std::string* content_type = entry.Find("content_type");
  if (content_type != nullptr && Essence(*content_type) != "application/cloudevents+json") {
    return false;
  }
  Discard discard;
  TopLevelFilter<Discard> look(&discard, &NoMember, [] {});
  if (!ParseWith(bytes, look) || !look.top_is_object() || !look.saw_specversion()) return false;
  rapidjson::StringBuffer buffer;
  ExactWriter writer(buffer);
  TopLevelFilter<ExactWriter> rewrite(&writer, &IsDaprAttribute,
                                      [&] { WriteDaprAttributes(writer, context, entry); });
  if (!ParseWith(bytes, rewrite) || !writer.IsComplete()) return false;
  event->assign(buffer.GetString(), buffer.GetSize());
  return true;
}

void WriteDaprAttributes(JsonWriter& writer, const EncodeContext& context,
                         const StreamEntry& entry) {
  WriteMember(writer, "topic", context.stream);
  WriteMember(writer, "pubsubname", context.group);
  const std::string* traceparent = entry.Find("traceparent");
  if (traceparent == nullptr || !IsValidTraceparent(*traceparent)) return;
  WriteMember(writer, "traceparent", *traceparent);
  WriteMember(writer, "traceid", *traceparent);
  if (const std::string* tracestate = entry.Find("tracestate");
      tracestate != nullptr && IsValidTracestate(*tracestate)) {
    WriteMember(writer, "tracestate", *tracestate);
  }
}

}  // namespace

bool EncodeCloudEvent(const EncodeContext& context, const StreamEntry& entry, bool dapr,
                      std::string* event, std::string* base64_header, std::string* why) {
  if (dapr) {
    if (const std::string* bytes = entry.Find(context.handler->raw_field);
        bytes != nullptr && PublishedCloudEvent(context, entry, *bytes, event)) {
      return true;
    }
  }
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  WriteMember(writer, "specversion", "1.0");
  WriteMember(writer, "id", entry.id);
  WriteMember(writer, "source", CloudEventsSource(context.stream));
  // As in binary mode: an empty type is no CloudEvents type, and a repeated field uses its first
  // value. A type that is not UTF-8 cannot be a JSON string: it is percent-encoded as the binary
  // mode's header would carry it.
  const std::string* type = entry.Find("type");
  std::string type_value = type != nullptr && !type->empty() ? *type : "streamcar.entry";
  if (!IsValidUtf8(type_value)) type_value = CloudEventsHeaderValue(type_value);
  WriteMember(writer, "type", type_value);
  const auto id = ParseEntryId(entry.id);
  WriteMember(writer, "time", Rfc3339Millis(id ? static_cast<int64_t>(id->ms) : 0));
  if (dapr) WriteDaprAttributes(writer, context, entry);
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

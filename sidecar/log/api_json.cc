#include "sidecar/log/api_json.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "sidecar/delivery/encoder.h"

namespace streamcar::log {
namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void WriteString(JsonWriter& writer, std::string_view text) {
  writer.String(text.data(), static_cast<rapidjson::SizeType>(text.size()));
}

// Nesting deeper than this is refused before parsing: the parser and the writer that turns a
// nested value back into text recurse once per level, and a body is untrusted input.
constexpr int kMaxDepth = 64;

bool NestsTooDeep(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

StatusOr<std::vector<std::pair<std::string, std::string>>> FieldsFromJson(std::string_view body) {
  if (NestsTooDeep(body)) {
    return Status(StatusCode::kInvalid,
                  "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  rapidjson::Document document;
  // Strict RFC 8259: UTF-8 validated, no comments, no trailing commas, nothing after the value.
  document.Parse<rapidjson::kParseValidateEncodingFlag | rapidjson::kParseIterativeFlag>(
      body.data(), body.size());
  if (document.HasParseError()) {
    return Status(StatusCode::kInvalid, std::string("malformed JSON at byte ") +
                                            std::to_string(document.GetErrorOffset()) + ": " +
                                            rapidjson::GetParseError_En(document.GetParseError()));
  }
  if (!document.IsObject()) {
    return Status(StatusCode::kInvalid, "a JSON body must be an object of fields");
  }
  if (document.MemberCount() == 0) {
    return Status(StatusCode::kInvalid, "an entry needs at least one field");
  }
  std::vector<std::pair<std::string, std::string>> fields;
  fields.reserve(document.MemberCount());
  for (const auto& member : document.GetObject()) {
    std::string name(member.name.GetString(), member.name.GetStringLength());
    if (member.value.IsString()) {
      fields.emplace_back(std::move(name),
                          std::string(member.value.GetString(), member.value.GetStringLength()));
      continue;
    }
    rapidjson::StringBuffer buffer;
    JsonWriter writer(buffer);
    member.value.Accept(writer);
    fields.emplace_back(std::move(name), std::string(buffer.GetString(), buffer.GetSize()));
  }
  return fields;
}

std::string ErrorJson(std::string_view message) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("error");
  WriteString(writer, message);
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string NonMonotonicJson(std::string_view top) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("error");
  writer.String("nonmonotonic");
  writer.Key("top");
  WriteString(writer, top);
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string ReceiptJson(std::string_view id, std::string_view stream) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("id");
  WriteString(writer, id);
  writer.Key("stream");
  WriteString(writer, stream);
  writer.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string PageJson(const std::vector<StreamEntry>& entries,
                     const std::optional<std::string>& next) {
  std::string out = "{\"entries\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    out += delivery::EncodeLogEntry(entries[i]);
  }
  out += "],\"next\":";
  if (next) {
    rapidjson::StringBuffer buffer;
    JsonWriter writer(buffer);
    WriteString(writer, *next);
    out.append(buffer.GetString(), buffer.GetSize());
  } else {
    out += "null";
  }
  out += '}';
  return out;
}

}  // namespace streamcar::log

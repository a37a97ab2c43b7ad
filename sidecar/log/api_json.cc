#include "sidecar/log/api_json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <memory>

#include "sidecar/common/text.h"
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

namespace {

// Builds the entries' fields while parsing (SAX): a member's string value is kept as it is; any
// other value is written back as compact JSON. Numbers arrive as their source text
// (kParseNumbersAsStringsFlag) and are written verbatim, so 12.50 stays 12.50 and a 30-digit
// integer keeps every digit. The body is one entry (an object) or, for a batch, an array of them.
class FieldsHandler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, FieldsHandler> {
 public:
  FieldsHandler(std::vector<EntryFields>* entries, bool batch)
      : entries_(entries), batch_(batch), entry_depth_(batch ? 2 : 1) {}

  bool wrong_shape() const { return wrong_shape_; }

  bool Null() {
    return Scalar("null", [&] { return writer_->Null(); });
  }
  bool Bool(bool b) {
    return Scalar(b ? "true" : "false", [&] { return writer_->Bool(b); });
  }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool) {
    return Scalar(std::string(text, length),
                  [&] { return writer_->RawValue(text, length, rapidjson::kNumberType); });
  }
  bool String(const char* text, rapidjson::SizeType length, bool) {
    return Scalar(std::string(text, length), [&] { return writer_->String(text, length); });
  }
  bool Key(const char* text, rapidjson::SizeType length, bool) {
    if (depth_ == entry_depth_) {
      key_.assign(text, length);
      return true;
    }
    return writer_->Key(text, length);
  }
  bool StartObject() {
    if (depth_ < entry_depth_ - 1) return WrongShape();
    if (depth_ == entry_depth_ - 1) {
      entries_->emplace_back();
      depth_ = entry_depth_;
      return true;
    }
    Open();
    return writer_->StartObject();
  }
  bool EndObject(rapidjson::SizeType) {
    if (depth_ == entry_depth_) {
      --depth_;
      return true;
    }
    return Close(writer_->EndObject());
  }
  bool StartArray() {
    if (batch_ && depth_ == 0) {
      depth_ = 1;
      return true;
    }
    if (depth_ < entry_depth_) return WrongShape();
    Open();
    return writer_->StartArray();
  }
  bool EndArray(rapidjson::SizeType) {
    if (batch_ && depth_ == 1) {
      depth_ = 0;
      return true;
    }
    return Close(writer_->EndArray());
  }

 private:
  bool WrongShape() {
    wrong_shape_ = true;
    return false;
  }
  template <typename Nested>
  bool Scalar(std::string text, Nested nested) {
    if (depth_ < entry_depth_) return WrongShape();
    if (depth_ == entry_depth_) {
      entries_->back().emplace_back(std::move(key_), std::move(text));
      return true;
    }
    return nested();
  }
  // A member's value that is an array or object: written into a buffer of its own.
  void Open() {
    if (depth_ == entry_depth_) {
      buffer_.Clear();
      writer_ = std::make_unique<JsonWriter>(buffer_);
    }
    ++depth_;
  }
  bool Close(bool written) {
    if (--depth_ == entry_depth_) {
      entries_->back().emplace_back(std::move(key_),
                                    std::string(buffer_.GetString(), buffer_.GetSize()));
    }
    return written;
  }

  std::vector<EntryFields>* entries_;
  bool batch_;
  int entry_depth_;  // the depth inside an entry's object: 1, or 2 inside a batch's array
  int depth_ = 0;    // 0: before the root; entry_depth_: inside an entry; more: inside a value
  std::string key_;
  rapidjson::StringBuffer buffer_;
  std::unique_ptr<JsonWriter> writer_;
  bool wrong_shape_ = false;
};

StatusOr<std::vector<EntryFields>> ParseEntries(std::string_view body, bool batch) {
  if (NestsTooDeep(body)) {
    return Status(StatusCode::kInvalid,
                  "JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  std::vector<EntryFields> entries;
  FieldsHandler handler(&entries, batch);
  rapidjson::Reader reader;
  rapidjson::MemoryStream stream(body.data(), body.size());
  // Strict RFC 8259: UTF-8 validated, no comments, no trailing commas, nothing after the value.
  // A body that is valid UTF-8 as a whole (checked eight bytes at a time) is parsed without
  // rapidjson's check of each string byte; any other is parsed with it, which names the byte.
  constexpr unsigned kFlags =
      rapidjson::kParseIterativeFlag | rapidjson::kParseNumbersAsStringsFlag;
  auto result = IsValidUtf8(body)
                    ? reader.Parse<kFlags>(stream, handler)
                    : reader.Parse<kFlags | rapidjson::kParseValidateEncodingFlag>(stream, handler);
  if (handler.wrong_shape()) {
    return Status(StatusCode::kInvalid, batch ? "a JSON array body must hold objects of fields"
                                              : "a JSON body must be an object of fields");
  }
  if (result.IsError()) {
    return Status(StatusCode::kInvalid, "malformed JSON at byte " +
                                            std::to_string(result.Offset()) + ": " +
                                            rapidjson::GetParseError_En(result.Code()));
  }
  return entries;
}

}  // namespace

StatusOr<EntryFields> FieldsFromJson(std::string_view body) {
  auto entries = ParseEntries(body, /*batch=*/false);
  if (!entries.ok()) return entries.status();
  if (entries->size() != 1 || entries->front().empty()) {
    return Status(StatusCode::kInvalid, "an entry needs at least one field");
  }
  return std::move(entries->front());
}

bool IsJsonArray(std::string_view body) {
  const auto first = body.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && body[first] == '[';
}

StatusOr<std::vector<EntryFields>> EntriesFromJson(std::string_view body) {
  auto entries = ParseEntries(body, /*batch=*/true);
  if (!entries.ok()) return entries.status();
  if (entries->empty()) return Status(StatusCode::kInvalid, "a batch needs at least one entry");
  for (size_t i = 0; i < entries->size(); ++i) {
    if ((*entries)[i].empty()) {
      return Status(StatusCode::kInvalid,
                    "entry " + std::to_string(i) + " of the batch needs at least one field");
    }
  }
  return entries;
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

std::string BatchReceiptsJson(const std::vector<std::string>& ids, std::string_view stream) {
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  writer.StartObject();
  writer.Key("stream");
  WriteString(writer, stream);
  writer.Key("ids");
  writer.StartArray();
  for (const auto& id : ids) WriteString(writer, id);
  writer.EndArray();
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

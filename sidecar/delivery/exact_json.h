#pragma once
// Entry bytes read as JSON and written again by streamcar's own writer, so that nothing of an
// entry reaches a body unchecked (cloudevent_json.cc, published_event.cc). Internal to
// sc_delivery.

#include <rapidjson/encodedstream.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <string>

namespace streamcar::delivery {

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

// Entry bytes as JSON: UTF-8 checked, numbers kept as they were spelled, and read by the
// iterative parser: entry data nested a million levels deep must not recurse on the stack.
inline constexpr unsigned kStrictJson = rapidjson::kParseValidateEncodingFlag |
                                        rapidjson::kParseNumbersAsStringsFlag |
                                        rapidjson::kParseIterativeFlag;

// Feeds `bytes` to `handler` (a rapidjson SAX handler); false when they are not one JSON value
// or the handler stopped.
template <typename Handler>
bool ParseWith(const std::string& bytes, Handler& handler) {
  rapidjson::Reader reader;
  rapidjson::MemoryStream stream(bytes.data(), bytes.size());
  rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream> input(stream);
  return !reader.Parse<kStrictJson>(input, handler).IsError();
}

}  // namespace streamcar::delivery

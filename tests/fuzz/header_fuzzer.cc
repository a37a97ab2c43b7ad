// libFuzzer: random entries (and stream names) in every format and in batch mode; whatever the
// bytes, no header name or value of the request, Content-Type included, may contain CR, LF or
// NUL (SPEC 3.1: entry data never becomes HTTP framing). The product has its own final check;
// this one is written independently, byte by byte.

#include <fuzzer/FuzzedDataProvider.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sidecar/config/config.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/delivery/header_values.h"

namespace {

using streamcar::StreamEntry;
using streamcar::delivery::HttpRequest;

bool HasFramingByte(std::string_view text) {
  for (char c : text) {
    if (c == '\r' || c == '\n' || c == '\0') return true;
  }
  return false;
}

void CheckRequest(const HttpRequest& request) {
  if (HasFramingByte(request.content_type)) __builtin_trap();
  for (const auto& [name, value] : request.headers) {
    if (HasFramingByte(name) || HasFramingByte(value)) __builtin_trap();
  }
}

// Field names the encoder reads headers from, and a few it does not.
constexpr const char* kNames[] = {"type", "content_type", "traceparent", "tracestate",
                                  "data", "id",           "source",      "specversion"};

StreamEntry RandomEntry(FuzzedDataProvider& input, int n) {
  StreamEntry entry;
  entry.id = "1700000000000-" + std::to_string(n);
  entry.attempts = input.ConsumeIntegralInRange<int>(1, 100);
  const int fields = input.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < fields; ++i) {
    std::string name = input.ConsumeBool()
                           ? std::string(kNames[input.ConsumeIntegralInRange<size_t>(0, 7)])
                           : input.ConsumeRandomLengthString(32);
    entry.fields.emplace_back(std::move(name), input.ConsumeRandomLengthString(512));
  }
  return entry;
}

// One JSON document, read without recursion.
bool IsJson(const std::string& body) {
  rapidjson::BaseReaderHandler<> ignore;
  rapidjson::Reader reader;
  rapidjson::MemoryStream stream(body.data(), body.size());
  return !reader.Parse<rapidjson::kParseIterativeFlag>(stream, ignore).IsError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  streamcar::config::HandlerConfig handler;
  // The stream name comes from configuration, which rejects nothing here on purpose: the
  // encoder's own check must hold even for a name no configuration would allow.
  const std::string stream = input.ConsumeBool() ? "orders" : input.ConsumeRandomLengthString(64);
  streamcar::delivery::EncodeContext context{stream, "billing", &handler};
  std::vector<StreamEntry> entries;
  const int count = input.ConsumeIntegralInRange<int>(1, 4);
  for (int i = 0; i < count; ++i) entries.push_back(RandomEntry(input, i));

  for (auto format :
       {streamcar::config::Format::kJson, streamcar::config::Format::kRaw,
        streamcar::config::Format::kCloudEvents, streamcar::config::Format::kCloudEventsStructured,
        streamcar::config::Format::kDapr}) {
    handler.format = format;
    for (const auto& entry : entries) {
      HttpRequest request;
      std::string why;
      if (streamcar::delivery::EncodeEntry(context, entry, &request, &why)) {
        CheckRequest(request);
        // Structured mode: whatever the entry held, the body is one JSON document.
        if ((format == streamcar::config::Format::kCloudEventsStructured ||
             format == streamcar::config::Format::kDapr) &&
            !IsJson(request.body)) {
          __builtin_trap();
        }
        // A content_type taken from the entry was a media type.
        if (format != streamcar::config::Format::kJson &&
            !streamcar::delivery::MediaTypeError(request.content_type).empty()) {
          __builtin_trap();
        }
      } else if (why.empty()) {
        __builtin_trap();  // a refusal always says why
      }
    }
  }
  handler.format = streamcar::config::Format::kJson;
  std::vector<const StreamEntry*> batch;
  for (const auto& entry : entries) batch.push_back(&entry);
  HttpRequest request;
  std::string why;
  if (streamcar::delivery::EncodeBatch(context, batch, &request, &why)) CheckRequest(request);
  handler.format = streamcar::config::Format::kCloudEventsStructured;
  if (streamcar::delivery::EncodeBatch(context, batch, &request, &why)) {
    CheckRequest(request);
    if (!IsJson(request.body)) __builtin_trap();
  }
  return 0;
}

#include "sidecar/telemetry/otlp_proto.h"

#include <cstdint>

namespace streamcar::telemetry {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

// trace.proto's numbers.
constexpr uint64_t kSpanKindClient = 3;
constexpr uint64_t kStatusCodeError = 2;

void Varint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void Tag(std::string* out, uint32_t field, uint32_t wire_type) {
  Varint(out, (uint64_t{field} << 3) | wire_type);
}

void Bytes(std::string* out, uint32_t field, std::string_view bytes) {
  Tag(out, field, kLengthDelimited);
  Varint(out, bytes.size());
  out->append(bytes);
}

void VarintField(std::string* out, uint32_t field, uint64_t value) {
  Tag(out, field, kVarint);
  Varint(out, value);
}

void Fixed(std::string* out, uint32_t field, uint64_t value, int width) {
  Tag(out, field, width == 8 ? kFixed64 : kFixed32);
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// KeyValue {1 key, 2 AnyValue {1 string_value | 3 int_value}}.
std::string KeyValue(const SpanAttribute& attribute) {
  std::string any;
  if (const auto* text = std::get_if<std::string>(&attribute.value)) {
    Bytes(&any, 1, *text);
  } else {
    VarintField(&any, 3, static_cast<uint64_t>(std::get<int64_t>(attribute.value)));
  }
  std::string kv;
  Bytes(&kv, 1, attribute.key);
  Bytes(&kv, 2, any);
  return kv;
}

// Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 7/8 times, 9 attributes,
// 13 links {1 trace_id, 2 span_id}, 15 status {2 message, 3 code}.
std::string EncodeSpan(const Span& span) {
  std::string out;
  Bytes(&out, 1, span.trace_id);
  Bytes(&out, 2, span.span_id);
  if (!span.parent_span_id.empty()) Bytes(&out, 4, span.parent_span_id);
  Bytes(&out, 5, span.name);
  VarintField(&out, 6, kSpanKindClient);
  Fixed(&out, 7, span.start_unix_nano, 8);
  Fixed(&out, 8, span.end_unix_nano, 8);
  for (const auto& attribute : span.attributes) Bytes(&out, 9, KeyValue(attribute));
  for (const auto& link : span.links) {
    std::string encoded;
    Bytes(&encoded, 1, link.trace_id);
    Bytes(&encoded, 2, link.span_id);
    Bytes(&out, 13, encoded);
  }
  if (span.error) {
    std::string status;
    if (!span.status_message.empty()) Bytes(&status, 2, span.status_message);
    VarintField(&status, 3, kStatusCodeError);
    Bytes(&out, 15, status);
  }
  return out;
}

}  // namespace

std::string EncodeExportRequest(std::string_view service_name, std::string_view scope_version,
                                const std::vector<Span>& spans) {
  std::string resource;  // Resource {1 attributes}
  Bytes(&resource, 1, KeyValue({"service.name", std::string(service_name)}));
  std::string scope;  // InstrumentationScope {1 name, 2 version}
  Bytes(&scope, 1, "streamcar");
  Bytes(&scope, 2, scope_version);
  std::string scope_spans;  // ScopeSpans {1 scope, 2 spans}
  Bytes(&scope_spans, 1, scope);
  for (const auto& span : spans) Bytes(&scope_spans, 2, EncodeSpan(span));
  std::string resource_spans;  // ResourceSpans {1 resource, 2 scope_spans}
  Bytes(&resource_spans, 1, resource);
  Bytes(&resource_spans, 2, scope_spans);
  std::string request;  // ExportTraceServiceRequest {1 resource_spans}
  Bytes(&request, 1, resource_spans);
  return request;
}

}  // namespace streamcar::telemetry

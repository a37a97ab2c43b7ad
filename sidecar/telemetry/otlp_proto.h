#pragma once
// OTLP/HTTP's default encoding: an ExportTraceServiceRequest
// (opentelemetry/proto/collector/trace/v1/trace_service.proto) as protobuf bytes, written by hand
// (a few fields of a stable wire format do not need a protobuf library). Kind CLIENT for every
// span: a delivery is streamcar's call to the handler. Pure code.

#include <string>
#include <string_view>
#include <vector>

#include "sidecar/telemetry/span.h"

namespace streamcar::telemetry {

// One ResourceSpans (resource attribute service.name = `service_name`) with one ScopeSpans
// (scope "streamcar", `scope_version`) holding `spans`.
std::string EncodeExportRequest(std::string_view service_name, std::string_view scope_version,
                                const std::vector<Span>& spans);

}  // namespace streamcar::telemetry

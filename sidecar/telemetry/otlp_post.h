#pragma once
// One OTLP/HTTP export: a blocking POST of an encoded request to the collector, bounded by a
// deadline at every step (connecting, writing, reading the answer), on a fresh connection that
// closes after the answer. For the exporter's own thread only: it blocks.

#include <string_view>

#include "sidecar/common/clock.h"
#include "sidecar/common/status.h"
#include "sidecar/delivery/http_target.h"

namespace streamcar::telemetry {

// The HTTP status the collector answered, or kIo / kTimeout-ish errors ("connect: ...",
// "timed out", "malformed answer") when there was no answer by `deadline`.
StatusOr<int> PostExport(const delivery::HttpTarget& target, std::string_view body,
                         SteadyTime deadline);

}  // namespace streamcar::telemetry

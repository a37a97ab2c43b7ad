// libFuzzer: what a handler answers (entry verdicts, batch failures) and Retry-After values.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sidecar/delivery/response_parser.h"
#include "sidecar/delivery/retry_after.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)streamcar::delivery::ParseEntryVerdict(text);
  auto answer = streamcar::delivery::ParseBatchAnswer(text);
  for (const auto& failure : answer.failures) {
    if (failure.verdict == streamcar::delivery::BodyVerdict::kSuccess) __builtin_trap();
  }
  auto delay = streamcar::ParseRetryAfter(text, 1'700'000'000'000);
  if (delay && delay->count() < 0) __builtin_trap();
  return 0;
}

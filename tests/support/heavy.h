#pragma once
// Tests that spend most of a minute waiting on real cadences run only when STREAMCAR_HEAVY is
// set: CI's heavy variants (.ci/run with HEAVY=1) set it, the default run skips them to stay
// within its 45 minutes. Each such test says, in its skip message, what the default run still
// proves of the same behaviour.

#include <cstdlib>

namespace streamcar::testing {

inline bool HeavyRun() {
  const char* heavy = std::getenv("STREAMCAR_HEAVY");
  return heavy != nullptr && *heavy != '\0';
}

}  // namespace streamcar::testing

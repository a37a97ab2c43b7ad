// libFuzzer: configuration loading must answer any bytes with a config or a one-line error,
// never a crash, a hang or an uncaught exception.

#include <cstddef>
#include <cstdint>
#include <string>

#include "sidecar/config/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  auto env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "SET") return std::string("value");
    if (name == "EMPTY") return std::string();
    return std::nullopt;
  };
  auto config = streamcar::config::LoadConfigText(yaml, "fuzz.yaml", env);
  if (config.ok()) {
    // What check prints must load again.
    auto again = streamcar::config::LoadConfigText(streamcar::config::EmitEffectiveYaml(*config),
                                                   "again.yaml", env);
    if (!again.ok()) __builtin_trap();
  } else if (config.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // errors are one line
  }
  return 0;
}

#include "sidecar/config/config.h"

namespace streamcar::config {

const char* FormatName(Format format) {
  switch (format) {
    case Format::kJson:
      return "json";
    case Format::kRaw:
      return "raw";
    case Format::kCloudEvents:
      return "cloudevents";
  }
  return "json";
}

std::string Subscription::StartId() const {
  if (start == "new") return "$";
  if (start == "beginning") return "0";
  return start;
}

}  // namespace streamcar::config

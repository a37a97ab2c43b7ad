#pragma once
// A stream entry as the engine carries it from Redis to the handler and back.

#include <string>
#include <utility>
#include <vector>

namespace streamcar {

struct StreamEntry {
  std::string id;
  // Field/value pairs in entry order; names may repeat, values are arbitrary bytes.
  std::vector<std::pair<std::string, std::string>> fields;
  int attempts = 1;      // the delivery count in the group's PEL
  bool deleted = false;  // read back as [id, nil]: trimmed or deleted while pending

  // The first value of `name`, or nullptr.
  const std::string* Find(std::string_view name) const {
    for (const auto& [field, value] : fields) {
      if (field == name) return &value;
    }
    return nullptr;
  }
};

}  // namespace streamcar

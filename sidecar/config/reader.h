#pragma once
// Reading one scalar of the configuration file with its rule (a range, a duration, a size), and
// failing with the place it came from: "<file>:<line>: <path>: <message>". The field tables
// (fields.h) read every key through it.
//
// Only config/ and its tests include this header (it brings yaml-cpp).

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/config/config.h"
#include "sidecar/config/expand.h"

namespace streamcar::config {

// Thrown while reading only; LoadConfigText turns it into a Status.
struct ConfigProblem {
  std::string message;
};

// Reads scalars with their rules and fails with "<file>:<line>: <path>: <message>".
class Reader {
 public:
  Reader(std::string file, const EnvLookup& env) : file_(std::move(file)), env_(env) {}

  [[noreturn]] void Fail(const YAML::Node& node, const std::string& path,
                         const std::string& message) const;
  std::string Locate(int line, const std::string& path, const std::string& message) const;
  static int Line(const YAML::Node& node);

  void RequireMap(const YAML::Node& node, const std::string& path) const;
  // Duplicate keys, keys that are not plain names, unknown keys (with the closest allowed one).
  void CheckKeys(const YAML::Node& node, const std::string& path,
                 const std::vector<std::string_view>& allowed) const;

  // A scalar with ${VAR} expanded. A null value (key with nothing after it) reads as "".
  std::string Text(const YAML::Node& node, const std::string& path) const;
  // Text that must be present, not null and not empty; `parent` is the mapping holding `key`.
  std::string RequiredText(const YAML::Node& parent, const std::string& path,
                           const YAML::Node& node) const;
  int64_t Int(const YAML::Node& node, const std::string& path, int64_t min, int64_t max) const;
  double Real(const YAML::Node& node, const std::string& path, double min, double max,
              bool max_inclusive) const;
  bool Bool(const YAML::Node& node, const std::string& path) const;
  Millis Duration(const YAML::Node& node, const std::string& path, bool allow_zero) const;
  uint64_t Size(const YAML::Node& node, const std::string& path) const;

  // The line of each item of a list (subscriptions, streams), for the messages of cross-key
  // rules, which name a path and no node.
  void NoteItemLine(std::string_view list, int line);
  int ItemLine(std::string_view list, size_t index) const;

  // `defaults:` as read so far; each subscription starts from it.
  Subscription defaults;

 private:
  std::string file_;
  const EnvLookup& env_;
  std::vector<std::pair<std::string, std::vector<int>>> item_lines_;
};

}  // namespace streamcar::config

#include "sidecar/config/reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "sidecar/common/duration.h"
#include "sidecar/common/size.h"
#include "sidecar/common/text.h"

namespace streamcar::config {

void Reader::Fail(const YAML::Node& node, const std::string& path,
                  const std::string& message) const {
  throw ConfigProblem{Locate(Line(node), path, message)};
}

std::string Reader::Locate(int line, const std::string& path, const std::string& message) const {
  std::string out = file_;
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!path.empty()) out += path + ": ";
  return out + message;
}

int Reader::Line(const YAML::Node& node) {
  if (!node || !node.IsDefined()) return 0;
  const auto mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : 0;
}

void Reader::RequireMap(const YAML::Node& node, const std::string& path) const {
  if (!node.IsMap()) Fail(node, path, "must be a mapping of keys to values");
}

void Reader::CheckKeys(const YAML::Node& node, const std::string& path,
                       const std::vector<std::string_view>& allowed) const {
  std::vector<std::string> seen;
  for (auto it : node) {
    if (!it.first.IsScalar()) Fail(it.first, path, "keys must be plain names");
    const auto key = it.first.as<std::string>();
    // yaml-cpp keeps the first of two equal keys silently; a second one is a mistake to report.
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      Fail(it.first, path.empty() ? key : path + "." + key, "duplicate key");
    }
    seen.push_back(key);
    bool known = false;
    for (auto candidate : allowed) known = known || candidate == key;
    if (known) continue;
    std::string message = "unknown key";
    if (auto meant = ClosestMatch(key, allowed)) message += " (did you mean " + *meant + "?)";
    Fail(it.first, path.empty() ? key : path + "." + key, message);
  }
}

std::string Reader::Text(const YAML::Node& node, const std::string& path) const {
  if (node.IsNull()) return {};
  if (!node.IsScalar()) Fail(node, path, "must be a single value, not a list or mapping");
  std::string error;
  auto expanded = ExpandVariables(node.Scalar(), env_, &error);
  if (!expanded) Fail(node, path, error);
  return *expanded;
}

std::string Reader::RequiredText(const YAML::Node& parent, const std::string& path,
                                 const YAML::Node& node) const {
  if (!node || node.IsNull()) Fail(parent, path, "required");
  std::string value = Text(node, path);
  if (value.empty()) Fail(node, path, "must not be empty");
  return value;
}

int64_t Reader::Int(const YAML::Node& node, const std::string& path, int64_t min,
                    int64_t max) const {
  const std::string text = Text(node, path);
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    Fail(node, path, "must be a whole number (got \"" + text + "\")");
  }
  if (value < min || value > max) {
    Fail(node, path,
         "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " +
             text + ")");
  }
  return value;
}

double Reader::Real(const YAML::Node& node, const std::string& path, double min, double max,
                    bool max_inclusive) const {
  const std::string text = Text(node, path);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  // strtod reads "nan" too, which every range comparison below would let through.
  if (text.empty() || end != text.c_str() + text.size() || std::isspace(text[0]) ||
      std::isnan(value)) {
    Fail(node, path, "must be a number (got \"" + text + "\")");
  }
  if (value < min || value > max || (!max_inclusive && value == max)) {
    std::ostringstream range;
    range << "must be at least " << min << " and " << (max_inclusive ? "at most " : "below ") << max
          << " (got " << text << ")";
    Fail(node, path, range.str());
  }
  return value;
}

bool Reader::Bool(const YAML::Node& node, const std::string& path) const {
  std::string text = Text(node, path);
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "true" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "no" || text == "off") return false;
  Fail(node, path, "must be true or false (got \"" + text + "\")");
}

Millis Reader::Duration(const YAML::Node& node, const std::string& path, bool allow_zero) const {
  const std::string text = Text(node, path);
  std::string error;
  auto value = ParseDuration(text, &error);
  if (!value) Fail(node, path, error);
  if (!allow_zero && value->count() == 0) Fail(node, path, "must be greater than 0s");
  return *value;
}

uint64_t Reader::Size(const YAML::Node& node, const std::string& path) const {
  const std::string text = Text(node, path);
  std::string error;
  auto value = ParseSize(text, &error);
  if (!value) Fail(node, path, error);
  if (*value == 0) Fail(node, path, "must be greater than 0B");
  return *value;
}

void Reader::NoteItemLine(std::string_view list, int line) {
  for (auto& [name, lines] : item_lines_) {
    if (name == list) {
      lines.push_back(line);
      return;
    }
  }
  item_lines_.push_back({std::string(list), {line}});
}

int Reader::ItemLine(std::string_view list, size_t index) const {
  for (const auto& [name, lines] : item_lines_) {
    if (name == list && index < lines.size()) return lines[index];
  }
  return 0;
}

}  // namespace streamcar::config

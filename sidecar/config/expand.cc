#include "sidecar/config/expand.h"

#include <cctype>
#include <cstdlib>

namespace streamcar::config {
namespace {

bool IsNameChar(char c, bool first) {
  return c == '_' || std::isalpha(static_cast<unsigned char>(c)) ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<std::string> ExpandVariables(std::string_view text, const EnvLookup& env,
                                           std::string* error) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (c != '$') {
      out += c;
      ++pos;
      continue;
    }
    if (pos + 1 < text.size() && text[pos + 1] == '$') {
      out += '$';
      pos += 2;
      continue;
    }
    if (pos + 1 >= text.size() || text[pos + 1] != '{') {
      out += c;  // a lone "$" is literal text
      ++pos;
      continue;
    }
    const size_t close = text.find('}', pos + 2);
    if (close == std::string_view::npos) {
      *error = "unterminated variable reference \"" + std::string(text.substr(pos)) + "\"";
      return std::nullopt;
    }
    std::string_view body = text.substr(pos + 2, close - pos - 2);
    std::string_view name = body;
    std::optional<std::string_view> fallback;
    if (auto sep = body.find(":-"); sep != std::string_view::npos) {
      name = body.substr(0, sep);
      fallback = body.substr(sep + 2);
    }
    bool valid = !name.empty();
    for (size_t i = 0; i < name.size() && valid; ++i) valid = IsNameChar(name[i], i == 0);
    if (!valid) {
      *error = "invalid variable reference \"${" + std::string(body) +
               "}\" (write ${NAME} or ${NAME:-default})";
      return std::nullopt;
    }
    auto value = env(std::string(name));
    if (value && !(value->empty() && fallback)) {
      out += *value;  // like the shell's ":-": an empty variable takes the default too
    } else if (fallback) {
      out += *fallback;
    } else {
      *error = "environment variable " + std::string(name) + " is not set (set it, or write ${" +
               std::string(name) + ":-default})";
      return std::nullopt;
    }
    pos = close + 1;
  }
  return out;
}

}  // namespace streamcar::config

#include "sidecar/delivery/header_values.h"

#include <array>
#include <set>

namespace streamcar::delivery {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

void AppendPercent(std::string* out, unsigned char byte) {
  out->push_back('%');
  out->push_back(kHex[byte >> 4]);
  out->push_back(kHex[byte & 0x0F]);
}

bool IsAlpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(unsigned char c) { return c >= '0' && c <= '9'; }
bool IsLowAlpha(unsigned char c) { return c >= 'a' && c <= 'z'; }
bool IsLowHex(unsigned char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

// RFC 9110 tchar, as a table: every header name of every request and answer is checked.
constexpr std::array<bool, 256> kTokenChar = [] {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[static_cast<size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[static_cast<size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[static_cast<size_t>(c)] = true;
  for (const char c : std::string_view("!#$%&'*+-.^_`|~")) {
    table[static_cast<unsigned char>(c)] = true;
  }
  return table;
}();

bool IsTokenChar(unsigned char c) { return kTokenChar[c]; }

bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (unsigned char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

bool IsOws(char c) { return c == ' ' || c == '\t'; }

// `count` lowercase hex digits at `at`, not all zero when `nonzero`.
bool LowHexField(std::string_view text, size_t at, size_t count, bool nonzero) {
  if (text.size() < at + count) return false;
  bool any = false;
  for (size_t i = at; i < at + count; ++i) {
    if (!IsLowHex(static_cast<unsigned char>(text[i]))) return false;
    any = any || text[i] != '0';
  }
  return any || !nonzero;
}

// W3C tracestate key chars after the first: lcalpha / DIGIT / "_" / "-" / "*" / "/".
bool IsKeyChar(unsigned char c) {
  return IsLowAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

bool IsKeyPart(std::string_view part, size_t max_size, bool digit_first) {
  if (part.empty() || part.size() > max_size) return false;
  const auto first = static_cast<unsigned char>(part[0]);
  if (!IsLowAlpha(first) && !(digit_first && IsDigit(first))) return false;
  for (unsigned char c : part.substr(1)) {
    if (!IsKeyChar(c)) return false;
  }
  return true;
}

bool IsTracestateKey(std::string_view key) {
  const auto at = key.find('@');
  if (at == std::string_view::npos) return IsKeyPart(key, 256, false);
  return IsKeyPart(key.substr(0, at), 241, true) && IsKeyPart(key.substr(at + 1), 14, false);
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E.
bool IsTracestateValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  for (unsigned char c : value) {
    if (c < 0x20 || c > 0x7E || c == ',' || c == '=') return false;
  }
  return true;
}

}  // namespace

std::string CloudEventsHeaderValue(std::string_view attribute) {
  std::string out;
  out.reserve(attribute.size());
  for (unsigned char c : attribute) {
    if (c < 0x21 || c > 0x7E || c == '"' || c == '%') {
      AppendPercent(&out, c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string PathSegment(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    const bool unreserved =
        IsAlpha(c) || IsDigit(c) || c == '-' || c == '.' || c == '_' || c == '~';
    bool sub_delim = false;
    switch (c) {
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case ':':
      case '@':
        sub_delim = true;
        break;
      default:
        break;
    }
    if (unreserved || sub_delim) {
      out.push_back(static_cast<char>(c));
    } else {
      AppendPercent(&out, c);
    }
  }
  return out;
}

std::string CloudEventsSource(std::string_view stream) { return "/streams/" + PathSegment(stream); }

bool IsValidTraceparent(std::string_view value) {
  // version "-" trace-id "-" parent-id "-" trace-flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  constexpr size_t kSize = 55;
  if (value.size() < kSize) return false;
  if (!LowHexField(value, 0, 2, false) || value.starts_with("ff")) return false;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return false;
  if (!LowHexField(value, 3, 32, true) || !LowHexField(value, 36, 16, true) ||
      !LowHexField(value, 53, 2, false)) {
    return false;
  }
  if (value.starts_with("00")) return value.size() == kSize;
  // A later version may append fields; they must be separated by '-'. Only lowercase hex and '-'
  // are forwarded, so a future format cannot smuggle anything else through.
  if (value.size() == kSize) return true;
  if (value[kSize] != '-') return false;
  for (unsigned char c : value.substr(kSize)) {
    if (!IsLowHex(c) && c != '-') return false;
  }
  return true;
}

bool IsValidTracestate(std::string_view value) {
  constexpr size_t kMaxMembers = 32;
  std::set<std::string_view> keys;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    std::string_view member = value.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!member.empty() && IsOws(member.front())) member.remove_prefix(1);
    while (!member.empty() && IsOws(member.back())) member.remove_suffix(1);
    if (!member.empty()) {
      const size_t equals = member.find('=');
      if (equals == std::string_view::npos) return false;
      const std::string_view key = member.substr(0, equals);
      if (!IsTracestateKey(key) || !IsTracestateValue(member.substr(equals + 1))) return false;
      if (!keys.insert(key).second || keys.size() > kMaxMembers) return false;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return !keys.empty();
}

std::string_view TrimOws(std::string_view value) {
  while (!value.empty() && IsOws(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsOws(value.back())) value.remove_suffix(1);
  return value;
}

std::string MediaTypeError(std::string_view raw) {
  const std::string_view value = TrimOws(raw);
  if (value.empty()) return "it is empty";
  size_t i = 0;
  auto token_end = [&](size_t from) {
    size_t k = from;
    while (k < value.size() && IsTokenChar(static_cast<unsigned char>(value[k]))) ++k;
    return k;
  };
  const size_t type_end = token_end(0);
  if (type_end == 0) return "the type is not an RFC 9110 token";
  if (type_end == value.size() || value[type_end] != '/') return "it has no \"/subtype\"";
  const size_t subtype_end = token_end(type_end + 1);
  if (subtype_end == type_end + 1) return "the subtype is not an RFC 9110 token";
  i = subtype_end;
  // parameters = *( OWS ";" OWS [ parameter ] )
  while (i < value.size()) {
    while (i < value.size() && IsOws(value[i])) ++i;
    if (i == value.size() || value[i] != ';') return "a parameter does not start with ';'";
    ++i;
    while (i < value.size() && IsOws(value[i])) ++i;
    if (i == value.size() || value[i] == ';') continue;  // an empty parameter is allowed
    const size_t name_end = token_end(i);
    if (name_end == i) return "a parameter name is not an RFC 9110 token";
    if (name_end == value.size() || value[name_end] != '=') return "a parameter has no '='";
    i = name_end + 1;
    if (i < value.size() && value[i] == '"') {
      // quoted-string: qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text; quoted-pair.
      ++i;
      bool closed = false;
      while (i < value.size()) {
        const auto c = static_cast<unsigned char>(value[i]);
        if (c == '"') {
          closed = true;
          ++i;
          break;
        }
        if (c == '\\') {
          if (i + 1 == value.size()) break;
          const auto escaped = static_cast<unsigned char>(value[i + 1]);
          if ((escaped < 0x20 && escaped != '\t') || escaped == 0x7F) {
            return "a quoted parameter value holds a control character";
          }
          i += 2;
          continue;
        }
        if ((c < 0x20 && c != '\t') || c == 0x7F) {
          return "a quoted parameter value holds a control character";
        }
        ++i;
      }
      if (!closed) return "a quoted parameter value is not closed";
    } else {
      const size_t value_end = token_end(i);
      if (value_end == i) return "a parameter value is neither a token nor a quoted string";
      i = value_end;
    }
  }
  return "";
}

bool IsHeaderName(std::string_view name) { return IsToken(name); }

bool IsSafeHeaderValue(std::string_view value) {
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7F) return false;
  }
  return true;
}

std::string FramingError(const std::string& content_type,
                         const std::vector<std::pair<std::string, std::string>>& headers) {
  if (!IsSafeHeaderValue(content_type)) {
    return "header Content-Type would carry a control character (CR, LF, NUL or another)";
  }
  for (const auto& [name, value] : headers) {
    if (!IsHeaderName(name)) return "a header name is not an RFC 9110 token";
    if (!IsSafeHeaderValue(value)) {
      return "header " + name + " would carry a control character (CR, LF, NUL or another)";
    }
  }
  return "";
}

}  // namespace streamcar::delivery

#include "sidecar/http/request.h"

#include <algorithm>
#include <array>
#include <charconv>

#include "sidecar/common/text.h"

namespace streamcar::http {
namespace {

// RFC 9110 5.6.2 tchar, as a table: every header name byte of every request is looked up.
constexpr std::array<bool, 256> kTokenTable = [] {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = table[c - 'a' + 'A'] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

bool IsTokenChar(char c) { return kTokenTable[static_cast<unsigned char>(c)]; }

bool IsToken(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), IsTokenChar);
}

// True when the comma-separated `list` holds `token` (case-insensitive).
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (LowerAscii(TrimBlanks(list.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

HeadProblem Bad(std::string message) { return HeadProblem{400, std::move(message)}; }

}  // namespace

const std::string* Request::Header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_name) return &value;
  }
  return nullptr;
}

size_t FindHeadEnd(std::string_view in) {
  const size_t end = in.find("\r\n\r\n");
  return end == std::string_view::npos ? end : end + 4;
}

namespace {

// The request line "METHOD TARGET VERSION" into *request (method, path, query, keep_alive as
// the version implies); *version is the line's.
std::optional<HeadProblem> ParseRequestLine(std::string_view line, Request* request,
                                            std::string_view* version) {
  if (line.find('\n') != std::string_view::npos) return Bad("bare LF in the request line");
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Bad("malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  *version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Bad("malformed request method");
  if (*version != "HTTP/1.1" && *version != "HTTP/1.0") {
    return HeadProblem{version->starts_with("HTTP/") ? 505 : 400, "HTTP/1.1 or HTTP/1.0 only"};
  }
  // Origin form only: no absolute-form, authority-form or asterisk-form targets.
  if (target.empty() || target.front() != '/') return Bad("the request target must be a path");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Bad("control character in the request target");
    }
  }
  request->method = std::string(method);
  const size_t question = target.find('?');
  request->path = std::string(target.substr(0, question));
  request->query =
      question == std::string_view::npos ? "" : std::string(target.substr(question + 1));
  request->keep_alive = *version == "HTTP/1.1";
  return std::nullopt;
}

// What the header fields said so far about the body's framing and the connection.
struct FramingFields {
  bool connection_close = false;
  bool connection_keep_alive = false;
  int content_lengths = 0;
  int transfer_encodings = 0;
  int hosts = 0;
};

// The framing header fields: Content-Length, Transfer-Encoding and Connection.
std::optional<HeadProblem> NoteFraming(const std::string& lower, std::string_view value,
                                       Request* request, FramingFields* framing) {
  if (lower == "content-length") {
    if (++framing->content_lengths > 1) return Bad("more than one Content-Length");
    uint64_t length = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (value.empty() || ec != std::errc() || ptr != value.data() + value.size()) {
      return Bad("malformed Content-Length");
    }
    request->content_length = length;
  } else if (lower == "transfer-encoding") {
    if (++framing->transfer_encodings > 1) return Bad("more than one Transfer-Encoding");
    if (LowerAscii(value) != "chunked") return Bad("only Transfer-Encoding: chunked is accepted");
    request->chunked = true;
  } else if (lower == "connection") {
    framing->connection_close = framing->connection_close || ListHas(value, "close");
    framing->connection_keep_alive = framing->connection_keep_alive || ListHas(value, "keep-alive");
  }
  return std::nullopt;
}

// One field line (without its CRLF) of the head or of the trailers, checked into its lower-case
// name and its trimmed value.
std::optional<HeadProblem> SplitField(std::string_view field, std::string* lower,
                                      std::string_view* value) {
  if (field.find('\n') != std::string_view::npos || field.find('\r') != std::string_view::npos) {
    return Bad("bare CR or LF in a header field");
  }
  if (field.front() == ' ' || field.front() == '\t') {
    return Bad("obsolete line folding is not accepted");
  }
  const size_t colon = field.find(':');
  if (colon == std::string_view::npos) return Bad("malformed header field");
  const std::string_view name = field.substr(0, colon);
  if (!IsToken(name)) return Bad("malformed header field name");
  *value = TrimBlanks(field.substr(colon + 1));
  // RFC 9110 5.5: visible characters, obs-text, spaces and tabs; any other control character
  // (NUL, BEL, ESC, DEL, ...) is refused rather than passed on to a log or into an entry.
  for (char c : *value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7f) {
      return Bad("control character in a header field value");
    }
  }
  *lower = LowerAscii(name);
  return std::nullopt;
}

// One header field line, added to request->headers by its lower-case name.
std::optional<HeadProblem> ParseHeaderField(std::string_view field, Request* request,
                                            FramingFields* framing) {
  std::string lower;
  std::string_view value;
  if (auto problem = SplitField(field, &lower, &value)) return problem;
  if (lower == "host") ++framing->hosts;
  if (auto problem = NoteFraming(lower, value, request, framing)) return problem;
  request->headers.emplace_back(std::move(lower), std::string(value));
  return std::nullopt;
}

// One trailer field line: well-formed, and none of the fields that frame, route or manage the
// connection (RFC 9110 6.5.1), which a front end could honour where this server ignores them.
std::optional<HeadProblem> CheckTrailerField(std::string_view field) {
  std::string lower;
  std::string_view value;
  if (auto problem = SplitField(field, &lower, &value)) return problem;
  static constexpr std::string_view kRefused[] = {
      "content-length", "transfer-encoding", "host", "connection", "te", "trailer", "expect"};
  for (std::string_view refused : kRefused) {
    if (lower == refused) return Bad("trailer field " + lower + " is not accepted");
  }
  return std::nullopt;
}

// A quoted-string (RFC 9110 5.6.4) at the start of `text`: its length with both quotes, 0 when
// malformed.
size_t QuotedStringLength(std::string_view text) {
  if (text.empty() || text.front() != '"') return 0;
  for (size_t i = 1; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (text[i] == '"') return i + 1;
    if (text[i] == '\\') {
      if (++i == text.size()) return 0;
      const auto escaped = static_cast<unsigned char>(text[i]);
      if ((escaped < 0x20 && text[i] != '\t') || escaped == 0x7f) return 0;
      continue;
    }
    if ((byte < 0x20 && text[i] != '\t') || byte == 0x7f) return 0;
  }
  return 0;
}

size_t TokenLength(std::string_view text) {
  size_t n = 0;
  while (n < text.size() && IsTokenChar(text[n])) ++n;
  return n;
}

std::string_view SkipBlanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  return text;
}

// The chunk extensions after a chunk size (RFC 9112 7.1.1):
// *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ). True when well-formed.
bool ValidChunkExtensions(std::string_view text) {
  while (!text.empty()) {
    // Blanks only before a ';' (BWS): trailing ones could hide a line end from this parser.
    text = SkipBlanks(text);
    if (text.empty() || text.front() != ';') return false;
    text = SkipBlanks(text.substr(1));
    const size_t name = TokenLength(text);
    if (name == 0) return false;
    text = text.substr(name);
    if (const std::string_view after = SkipBlanks(text); !after.empty() && after.front() == '=') {
      text = SkipBlanks(after.substr(1));
      size_t value = TokenLength(text);
      if (value == 0) value = QuotedStringLength(text);
      if (value == 0) return false;
      text = text.substr(value);
    }
  }
  return true;
}

}  // namespace

std::optional<HeadProblem> ParseRequestHead(std::string_view head, Request* request) {
  size_t line_end = head.find("\r\n");
  if (line_end == std::string_view::npos) return Bad("malformed request line");
  std::string_view version;
  if (auto problem = ParseRequestLine(head.substr(0, line_end), request, &version)) {
    return problem;
  }
  request->headers.clear();
  request->headers.reserve(16);  // most clients send fewer: one allocation per request
  FramingFields framing;
  size_t at = line_end + 2;
  while (at < head.size()) {
    const size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) return Bad("header fields must end with CRLF");
    const std::string_view field = head.substr(at, end - at);
    at = end + 2;
    if (field.empty()) break;  // the blank line
    if (auto problem = ParseHeaderField(field, request, &framing)) return problem;
  }
  if (framing.content_lengths > 0 && framing.transfer_encodings > 0) {
    return Bad("Content-Length together with Transfer-Encoding");
  }
  // RFC 9112 3.2: an HTTP/1.1 request without Host, or any request with two, is answered 400.
  if (framing.hosts > 1 || (framing.hosts == 0 && version == "HTTP/1.1")) {
    return Bad("exactly one Host field is required");
  }
  if (request->chunked && version == "HTTP/1.0") {
    return Bad("Transfer-Encoding in an HTTP/1.0 request");
  }
  if (framing.connection_close) {
    request->keep_alive = false;
  } else if (framing.connection_keep_alive) {
    request->keep_alive = true;
  }
  return std::nullopt;
}

size_t DecodeChunked(std::string_view in, uint64_t max_body, std::string* body,
                     std::optional<HeadProblem>* problem, ChunkedState* state) {
  ChunkedState fresh;
  if (state == nullptr) {
    body->clear();
    state = &fresh;
  }
  size_t at = state->at;
  while (!state->trailers) {
    const size_t line_end = in.find("\r\n", at);
    if (line_end == std::string_view::npos) {
      if (in.size() - at > 1024) *problem = Bad("chunk size line too long");
      return 0;
    }
    const std::string_view line = in.substr(at, line_end - at);
    uint64_t size = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + line.size(), size, 16);
    if (ptr == line.data() || ec != std::errc()) {
      *problem = Bad("malformed chunk size");
      return 0;
    }
    // Extensions are ignored, but only once they are well-formed: a bare LF or any other byte
    // a lenient front end might end the line at is refused.
    if (!ValidChunkExtensions(line.substr(static_cast<size_t>(ptr - line.data())))) {
      *problem = Bad("malformed chunk size or extension");
      return 0;
    }
    const size_t data = line_end + 2;
    if (size == 0) {
      at = data;
      state->at = at;
      state->trailers = true;
      break;
    }
    if (size > max_body || body->size() + size > max_body) {
      *problem = HeadProblem{413, "request body over api.max_body"};
      return 0;
    }
    if (in.size() - data < size + 2) return 0;  // resumes at this chunk's size line
    if (in.substr(data + size, 2) != "\r\n") {
      *problem = Bad("chunk data not followed by CRLF");
      return 0;
    }
    body->append(in.substr(data, size));
    at = data + size + 2;
    state->at = at;
  }
  // Trailer fields up to the blank line; checked, then discarded.
  while (true) {
    const size_t line_end = in.find("\r\n", at);
    if (line_end == std::string_view::npos) {
      if (in.size() - at > 8192) *problem = Bad("trailer fields too long");
      return 0;
    }
    const bool blank = line_end == at;
    if (!blank) {
      if (auto refused = CheckTrailerField(in.substr(at, line_end - at))) {
        *problem = std::move(refused);
        return 0;
      }
    }
    at = line_end + 2;
    state->at = at;
    if (blank) return at;
  }
}

}  // namespace streamcar::http

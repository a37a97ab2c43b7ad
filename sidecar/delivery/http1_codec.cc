#include "sidecar/delivery/http1_codec.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "sidecar/common/text.h"
#include "sidecar/delivery/header_values.h"

namespace streamcar::delivery::http1 {
namespace {

// A chunk-size line ("1a2b;name=value") longer than this is an attack, not an answer.
constexpr size_t kMaxChunkLine = 4096;

// RFC 9110 token (a method, a header name): header_values.h holds the one tchar table.
bool IsToken(std::string_view text) { return IsHeaderName(text); }

// field-vchar / SP / HTAB: printable ASCII, obs-text, blanks; no other control character.
bool IsFieldChar(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

bool HasFraming(std::string_view text) {
  // One pass (find_first_of would search the set once per byte).
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// The bytes SerializeRequest writes, so that the request is built in one allocation.
size_t RequestSize(const RequestHead& head, std::string_view body) {
  constexpr size_t kFixed = 128;  // the request line's and fixed headers' words, Content-Length
  size_t size = kFixed + head.method.size() + head.target.size() + head.authority.size() +
                head.content_type.size() + head.user_agent.size() + body.size();
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) size += name.size() + value.size() + 4;
  }
  return size;
}

bool Listed(const HeaderList* headers, std::string_view name) {
  if (headers == nullptr) return false;
  return std::any_of(headers->begin(), headers->end(),
                     [&](const auto& header) { return EqualsIgnoreCase(header.first, name); });
}

}  // namespace

Status SerializeRequest(const RequestHead& head, std::string_view body, std::string* out) {
  if (!IsToken(head.method)) return Status(StatusCode::kInvalid, "HTTP method is not a token");
  const bool bad_target = head.target.empty() || head.target.front() != '/' ||
                          std::any_of(head.target.begin(), head.target.end(), [](char c) {
                            const auto byte = static_cast<unsigned char>(c);
                            return byte <= 0x20 || byte == 0x7f;
                          });
  if (bad_target) return Status(StatusCode::kInvalid, "request target has a space or control byte");
  if (HasFraming(head.authority) || HasFraming(head.content_type) || HasFraming(head.user_agent)) {
    return Status(StatusCode::kInvalid, "Host or Content-Type contains CR, LF or NUL");
  }
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) {
      if (!IsToken(name)) {
        return Status(StatusCode::kInvalid, "header name \"" + name + "\" is not a token");
      }
      if (HasFraming(value)) {
        return Status(StatusCode::kInvalid, "header " + name + " contains CR, LF or NUL");
      }
    }
  }
  out->reserve(out->size() + RequestSize(head, body));
  out->append(head.method).append(" ").append(head.target).append(" HTTP/1.1\r\n");
  if (!Listed(head.headers, "Host")) out->append("Host: ").append(head.authority).append("\r\n");
  if (!head.content_type.empty() && !Listed(head.headers, "Content-Type")) {
    out->append("Content-Type: ").append(head.content_type).append("\r\n");
  }
  if (!head.user_agent.empty() && !Listed(head.headers, "User-Agent")) {
    out->append("User-Agent: ").append(head.user_agent).append("\r\n");
  }
  if (head.has_body) {
    out->append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  }
  if (head.headers != nullptr) {
    for (const auto& [name, value] : *head.headers) {
      if (EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Transfer-Encoding") ||
          EqualsIgnoreCase(name, "Connection")) {
        continue;
      }
      out->append(name).append(": ").append(value).append("\r\n");
    }
  }
  out->append("\r\n");
  if (head.has_body) out->append(body);
  return Status::Ok();
}

const std::string* Response::Find(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoreCase(key, name)) return &value;
  }
  return nullptr;
}

void ResponseParser::Reset() {
  state_ = State::kIncomplete;
  phase_ = Phase::kStatusLine;
  error_.clear();
  line_.clear();
  saw_cr_ = false;
  received_any_ = false;
  head_bytes_ = 0;
  interim_ = 0;
  chunked_ = false;
  has_length_ = false;
  length_ = 0;
  connection_close_ = false;
  connection_keep_alive_ = false;
  remaining_ = 0;
  response_ = Response();
}

bool ResponseParser::Fail(std::string why) {
  state_ = State::kError;
  error_ = std::move(why);
  return false;
}

bool ResponseParser::OverCap(std::string why) {
  if (response_.status < 200 || response_.status > 299) return Fail(std::move(why));
  std::string().swap(response_.body);
  response_.body_over_cap = true;
  Finish();
  response_.keep_alive = false;  // the rest of the body is still on its way
  return true;
}

void ResponseParser::Finish() {
  response_.keep_alive = response_.minor_version >= 1
                             ? !connection_close_
                             : connection_keep_alive_ && !connection_close_;
  if (phase_ == Phase::kBodyToEof) response_.keep_alive = false;
  state_ = State::kComplete;
}

bool ResponseParser::TakeLine(std::string_view data, size_t* pos, size_t cap, const char* what) {
  const size_t begin = *pos;
  const void* found = std::memchr(data.data() + begin, '\n', data.size() - begin);
  const size_t end =
      found == nullptr ? data.size() : static_cast<const char*>(found) - data.data() + 1;
  const size_t taken = end - begin;
  if (line_.size() + taken > cap) {
    Fail(std::string(what) + " is longer than " + std::to_string(cap) + " bytes");
    return false;
  }
  line_.append(data.substr(begin, taken));
  *pos = end;
  if (found == nullptr) return false;
  line_.pop_back();  // LF
  if (line_.empty() || line_.back() != '\r') {
    Fail(std::string(what) + " ends in a bare LF");
    return false;
  }
  line_.pop_back();  // CR
  if (line_.find('\r') != std::string::npos) {
    Fail(std::string(what) + " contains a bare CR");
    return false;
  }
  return true;
}

size_t ResponseParser::Feed(std::string_view data) {
  if (response_.body_over_cap) return data.size();  // more of the body that is not read
  if (state_ != State::kIncomplete) return 0;
  if (!data.empty()) received_any_ = true;
  size_t pos = 0;
  while (pos < data.size() && state_ == State::kIncomplete) {
    switch (phase_) {
      case Phase::kStatusLine:
      case Phase::kHeaderLine:
      case Phase::kTrailerLine: {
        const size_t before = pos;
        const size_t budget = kMaxHeadBytes - std::min(kMaxHeadBytes, head_bytes_ - line_.size());
        const bool whole = TakeLine(data, &pos, budget, "response head");
        head_bytes_ += pos - before;
        if (!whole) break;
        const bool ok = phase_ == Phase::kStatusLine   ? OnStatusLine()
                        : phase_ == Phase::kHeaderLine ? OnHeaderLine()
                                                       : OnTrailerLine();
        line_.clear();
        if (!ok) return pos;
        break;
      }
      case Phase::kChunkSizeLine:
        if (!TakeLine(data, &pos, kMaxChunkLine, "chunk size line")) break;
        if (!OnChunkSizeLine()) return pos;
        line_.clear();
        break;
      case Phase::kBodyLength:
      case Phase::kChunkData: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - pos));
        response_.body.append(data.substr(pos, take));
        pos += take;
        remaining_ -= take;
        if (remaining_ == 0) {
          if (phase_ == Phase::kBodyLength) {
            Finish();
          } else {
            phase_ = Phase::kChunkDataEnd;
            saw_cr_ = false;
          }
        }
        break;
      }
      case Phase::kChunkDataEnd: {
        const char c = data[pos++];
        if (!saw_cr_ && c == '\r') {
          saw_cr_ = true;
        } else if (saw_cr_ && c == '\n') {
          phase_ = Phase::kChunkSizeLine;
        } else {
          Fail("chunk data is not followed by CRLF");
          return pos;
        }
        break;
      }
      case Phase::kBodyToEof: {
        const size_t take = data.size() - pos;
        if (response_.body.size() + take > kMaxBodyBytes) {
          if (!OverCap("body is larger than " + std::to_string(kMaxBodyBytes) + " bytes")) {
            return pos;
          }
          break;
        }
        response_.body.append(data.substr(pos));
        pos = data.size();
        break;
      }
    }
  }
  return response_.body_over_cap ? data.size() : pos;
}

void ResponseParser::FeedEof() {
  if (state_ != State::kIncomplete) return;
  if (phase_ == Phase::kBodyToEof) {
    Finish();
    return;
  }
  Fail(received_any_ ? "connection closed in the middle of the answer"
                     : "connection closed before any answer");
}

bool ResponseParser::OnStatusLine() {
  const std::string_view line = line_;
  // "HTTP/1.1 200" at least; the reason phrase is optional, its space too.
  if (line.size() < 12 || !line.starts_with("HTTP/1.") || (line[7] != '0' && line[7] != '1') ||
      line[8] != ' ' || std::isdigit(static_cast<unsigned char>(line[9])) == 0 ||
      std::isdigit(static_cast<unsigned char>(line[10])) == 0 ||
      std::isdigit(static_cast<unsigned char>(line[11])) == 0 ||
      (line.size() > 12 && line[12] != ' ')) {
    return Fail("malformed status line");
  }
  const int status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  if (status < 100 || status > 599) return Fail("status code out of range");
  const std::string_view reason = line.size() > 12 ? line.substr(13) : std::string_view();
  if (!std::all_of(reason.begin(), reason.end(),
                   [](char c) { return IsFieldChar(static_cast<unsigned char>(c)); })) {
    return Fail("control byte in the reason phrase");
  }
  response_.status = status;
  response_.minor_version = line[7] - '0';
  phase_ = Phase::kHeaderLine;
  return true;
}

bool ResponseParser::OnHeaderLine() {
  const std::string_view line = line_;
  if (line.empty()) return OnHeadersDone();
  if (line.front() == ' ' || line.front() == '\t') return Fail("folded header line (obs-fold)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Fail("header line without a colon");
  const std::string_view name = line.substr(0, colon);
  if (!IsToken(name)) return Fail("header name is not a token");
  const std::string_view value = TrimBlanks(line.substr(colon + 1));
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return IsFieldChar(static_cast<unsigned char>(c)); })) {
    return Fail("control byte in header " + std::string(name));
  }
  if (EqualsIgnoreCase(name, "Content-Length")) {
    if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c)) != 0;
        })) {
      return Fail("Content-Length is not a number");
    }
    uint64_t length = 0;
    for (char c : value) {
      // Saturate: anything past the body cap is refused later as too large.
      length = length > kMaxBodyBytes ? length : length * 10 + static_cast<uint64_t>(c - '0');
    }
    if (has_length_ && length != length_) return Fail("conflicting Content-Length headers");
    has_length_ = true;
    length_ = length;
  } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
    if (chunked_) return Fail("repeated Transfer-Encoding header");
    if (!EqualsIgnoreCase(value, "chunked")) {
      return Fail("unsupported Transfer-Encoding \"" + std::string(value) + "\"");
    }
    chunked_ = true;
  } else if (EqualsIgnoreCase(name, "Connection")) {
    std::string_view rest = value;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view token = TrimBlanks(rest.substr(0, comma));
      if (EqualsIgnoreCase(token, "close")) connection_close_ = true;
      if (EqualsIgnoreCase(token, "keep-alive")) connection_keep_alive_ = true;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  response_.headers.emplace_back(std::string(name), std::string(value));
  return true;
}

bool ResponseParser::OnHeadersDone() {
  const int status = response_.status;
  if (status == 101) return Fail("unexpected 101 Switching Protocols");
  if (chunked_ && has_length_) return Fail("both Content-Length and Transfer-Encoding");
  if (chunked_ && response_.minor_version == 0) return Fail("Transfer-Encoding in HTTP/1.0");
  if (status < 200) {
    // An interim answer (100 Continue, 103 Early Hints): the real one follows.
    if (++interim_ > kMaxInterim) return Fail("too many interim (1xx) responses");
    const int interim = interim_;
    Reset();
    interim_ = interim;
    received_any_ = true;
    return true;
  }
  if (status == 204 || status == 304) {
    Finish();
    return true;
  }
  if (chunked_) {
    phase_ = Phase::kChunkSizeLine;
    return true;
  }
  if (has_length_) {
    if (length_ > kMaxBodyBytes) {
      return OverCap("Content-Length is larger than " + std::to_string(kMaxBodyBytes) + " bytes");
    }
    remaining_ = length_;
    phase_ = Phase::kBodyLength;
    if (remaining_ == 0) Finish();
    return true;
  }
  phase_ = Phase::kBodyToEof;
  return true;
}

bool ResponseParser::OnChunkSizeLine() {
  const std::string_view line = line_;
  uint64_t size = 0;
  size_t i = 0;
  for (; i < line.size() && HexDigitValue(line[i]) >= 0; ++i) {
    size = size * 16 + static_cast<uint64_t>(HexDigitValue(line[i]));
    if (size > kMaxBodyBytes) {
      return OverCap("chunk is larger than " + std::to_string(kMaxBodyBytes) + " bytes");
    }
  }
  if (i == 0) return Fail("chunk size is not hexadecimal");
  std::string_view rest = line.substr(i);
  if (!rest.empty()) {
    // Only BWS ";" chunk-ext may follow the size; the extensions are ignored.
    const size_t semicolon = rest.find_first_not_of(" \t");
    if (semicolon == std::string_view::npos || rest[semicolon] != ';') {
      return Fail("malformed chunk size line");
    }
    if (!std::all_of(rest.begin(), rest.end(),
                     [](char c) { return IsFieldChar(static_cast<unsigned char>(c)); })) {
      return Fail("control byte in a chunk extension");
    }
  }
  if (size == 0) {
    phase_ = Phase::kTrailerLine;
    head_bytes_ = 0;
    return true;
  }
  if (response_.body.size() + size > kMaxBodyBytes) {
    return OverCap("body is larger than " + std::to_string(kMaxBodyBytes) + " bytes");
  }
  remaining_ = size;
  phase_ = Phase::kChunkData;
  return true;
}

bool ResponseParser::OnTrailerLine() {
  const std::string_view line = line_;
  if (line.empty()) {
    Finish();
    return true;
  }
  // Trailers are checked like headers and then dropped: nothing in an answer's meaning may hide
  // after its body.
  if (line.front() == ' ' || line.front() == '\t') return Fail("folded trailer line (obs-fold)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    return Fail("malformed trailer line");
  }
  const std::string_view value = line.substr(colon + 1);
  if (!std::all_of(value.begin(), value.end(),
                   [](char c) { return IsFieldChar(static_cast<unsigned char>(c)); })) {
    return Fail("control byte in a trailer");
  }
  return true;
}

}  // namespace streamcar::delivery::http1

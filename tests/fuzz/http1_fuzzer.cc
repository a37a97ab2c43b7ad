// libFuzzer: the handler client's HTTP/1.1 response parser (sidecar/delivery/http1_codec.h).
// Input: one byte choosing where to split the rest, then the bytes a handler sent. Asserts that
// the parser never crashes, that splitting never changes the result, and that it never reports an
// answer complete with inconsistent framing.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "sidecar/delivery/http1_codec.h"

namespace {

using streamcar::delivery::http1::kMaxBodyBytes;
using streamcar::delivery::http1::ResponseParser;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

struct Result {
  ResponseParser::State state;
  size_t consumed = 0;
  int status = 0;
  std::string body;
  bool keep_alive = false;
};

Result Parse(std::string_view wire, size_t cut, bool eof) {
  ResponseParser parser;
  Result result;
  result.consumed = parser.Feed(wire.substr(0, cut));
  result.consumed += parser.Feed(wire.substr(cut));
  if (eof) parser.FeedEof();
  result.state = parser.state();
  Check(result.consumed <= wire.size());
  if (parser.complete()) {
    const auto& response = parser.response();
    result.status = response.status;
    result.body = response.body;
    result.keep_alive = response.keep_alive;
    // A final answer, never an interim one, with a valid status.
    Check(response.status >= 200 && response.status <= 599 && response.status != 101);
    Check(response.body.size() <= kMaxBodyBytes);
    const std::string* length = response.Find("Content-Length");
    const std::string* chunked = response.Find("Transfer-Encoding");
    Check(length == nullptr || chunked == nullptr);  // never both
    if (response.body_over_cap) {
      // A 2xx past the body cap: complete without its body, everything fed consumed, not reused.
      Check(response.status >= 200 && response.status <= 299 && response.body.empty() &&
            !response.keep_alive && result.consumed == wire.size());
    } else if (response.status == 204 || response.status == 304) {
      Check(response.body.empty());
    } else if (length != nullptr) {
      Check(response.body.size() == std::strtoull(length->c_str(), nullptr, 10));
    } else if (chunked == nullptr) {
      // Close-delimited: only the end of the connection completes it, and it cannot be reused.
      Check(eof && !response.keep_alive && result.consumed == wire.size());
    }
  }
  return result;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = wire.empty() ? 0 : data[0] % (wire.size() + 1);
  for (bool eof : {false, true}) {
    const Result whole = Parse(wire, wire.size(), eof);
    const Result split = Parse(wire, cut, eof);
    Check(whole.state == split.state);
    if (whole.state == ResponseParser::State::kComplete) {
      Check(whole.consumed == split.consumed && whole.status == split.status &&
            whole.body == split.body && whole.keep_alive == split.keep_alive);
      // The answer is exactly its consumed bytes: parsing them alone gives the same answer.
      const Result again = Parse(wire.substr(0, whole.consumed), whole.consumed, eof);
      Check(again.state == ResponseParser::State::kComplete && again.body == whole.body &&
            again.status == whole.status);
    }
  }
  return 0;
}

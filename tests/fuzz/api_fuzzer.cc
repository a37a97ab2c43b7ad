// libFuzzer: the request side of the inbound servers (sidecar/http/request.h, the one parser of
// the admin port and the log API) and the log API's own (log/api_route.h, api_json.h), which read
// whatever a client sends. Input: one byte choosing where to split the
// rest, then the bytes a client sent. Asserts that nothing crashes, that a head that is accepted
// has unambiguous framing and no control character in any field, that a chunked body decodes to
// the same result whether it arrives whole or in two reads (ChunkedState), and that a decoded
// body never exceeds its limit.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sidecar/http/request.h"
#include "sidecar/log/api_json.h"
#include "sidecar/log/api_route.h"

namespace {

using streamcar::http::ChunkedState;
using streamcar::http::DecodeChunked;
using streamcar::http::HeadProblem;
using streamcar::http::Request;

constexpr uint64_t kMaxBody = 4096;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

bool HasControl(std::string_view text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7f) return true;
  }
  return false;
}

struct Decoded {
  size_t used = 0;
  std::string body;
  bool refused = false;
};

// Decodes `in` as it would arrive in two reads, the first `cut` bytes long.
Decoded DecodeInTwoReads(std::string_view in, size_t cut) {
  Decoded out;
  ChunkedState state;
  std::optional<HeadProblem> problem;
  out.used = DecodeChunked(in.substr(0, cut), kMaxBody, &out.body, &problem, &state);
  if (out.used == 0 && !problem) {
    out.used = DecodeChunked(in, kMaxBody, &out.body, &problem, &state);
  }
  out.refused = problem.has_value();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = wire.empty() ? 0 : data[0] % (wire.size() + 1);

  // The head: accepted only with one framing, and nothing in it can carry a line break on.
  const size_t head_end = streamcar::http::FindHeadEnd(wire);
  std::string_view rest = wire;
  if (head_end != std::string_view::npos) {
    Check(head_end <= wire.size() && wire.substr(0, head_end).ends_with("\r\n\r\n"));
    Request request;
    if (!streamcar::http::ParseRequestHead(wire.substr(0, head_end), &request)) {
      Check(!request.method.empty());
      Check(!(request.chunked && request.content_length.has_value()));
      // Exactly one Host on HTTP/1.1, at most one on HTTP/1.0.
      int hosts = 0;
      for (const auto& field : request.headers) hosts += field.first == "host" ? 1 : 0;
      Check(hosts <= 1);
      Check(!HasControl(request.method) && !HasControl(request.path) && !HasControl(request.query));
      for (const auto& [name, value] : request.headers) {
        Check(!name.empty() && !HasControl(name) && !HasControl(value));
      }
      (void)streamcar::log::StreamOfPath(request.path);
      (void)streamcar::log::ParseQuery(request.query);
    }
    rest = wire.substr(head_end);
  }

  // A chunked body: the same whether it arrives whole or split, never over its limit.
  const Decoded whole = DecodeInTwoReads(rest, rest.size());
  const Decoded split = DecodeInTwoReads(rest, std::min(cut, rest.size()));
  Check(whole.refused == split.refused);
  if (!whole.refused) {
    Check(whole.used == split.used && whole.body == split.body);
    Check(whole.used <= rest.size() && whole.body.size() <= kMaxBody);
  }

  // A JSON body as the fields of an entry: an answer, never a crash.
  (void)streamcar::log::FieldsFromJson(rest);
  return 0;
}

#pragma once
// HTTP/1.1 client framing as pure code (sans I/O): a request serializer and an incremental,
// strict response parser fed with whatever bytes arrived. It knows no sockets, threads or clocks,
// so any driver (the event-loop client, http_client.cc; the fuzzer) can drive it, and every framing
// rule is unit-tested byte by byte and fuzzed.
//
// Why our own parser: Debian 12's libhttp-parser (2.9.4, unmaintained upstream since 2022) is
// built without HTTP_PARSER_STRICT, so it accepts "HXYZ/1.1 200", a chunk followed by any two
// bytes instead of CRLF, spaces inside header names and folded headers; llhttp is not packaged.
// A handler client must reject exactly those (SPEC 3.1: an answer is never matched to a request
// it did not answer), so the framing below is small, strict and owned.
//
// What the parser accepts (RFC 9112, as a client that never sends HEAD or asks to upgrade):
// - status line "HTTP/1.0|1.1 SP 3DIGIT [SP reason]" CRLF, status 100-599; lines end in CRLF
//   (a bare LF is an error), no obs-fold, header names are tokens with no space before ':'.
// - 1xx interim answers (100 Continue, 103...) are skipped, at most kMaxInterim of them; 101 is an
//   error. 204 and 304 have no body whatever their headers say.
// - Transfer-Encoding must be exactly "chunked" (we never send TE, so nothing else is allowed),
//   only in HTTP/1.1, never with Content-Length. Content-Length is 1*DIGIT; repeated headers must
//   agree. Chunk sizes are hex with optional ";ext", each chunk ends in CRLF, trailers are read and
//   ignored. With neither, the body runs to the end of the connection.
// - The head (status line and headers, and a trailer section) is at most 64 KiB, the body at most
//   16 MiB (a handler's answer is a status and a short verdict; the first 1 KiB goes to the dead
//   letter). Past that cap a non-2xx answer is an error. A 2xx is complete the moment its body
//   would pass the cap (body_over_cap, body dropped, connection not reusable): the status already
//   says success, and a verdict object that large is not one (SPEC 3.2), so neither the rest of
//   the body nor its end is waited for.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sidecar/common/status.h"

namespace streamcar::delivery::http1 {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

inline constexpr size_t kMaxHeadBytes = size_t{64} * 1024;
inline constexpr size_t kMaxBodyBytes = size_t{16} * 1024 * 1024;
inline constexpr int kMaxInterim = 16;

struct RequestHead {
  std::string_view method;        // "POST", "GET"
  std::string_view target;        // origin-form: "/path?query"
  std::string_view authority;     // the Host header: "host[:port]"
  std::string_view content_type;  // "" sends none
  std::string_view user_agent;    // "" sends none
  const HeaderList* headers = nullptr;
  bool has_body = false;  // true: Content-Length is sent, even for an empty body
};

// Appends the request (head, then `body`) to *out. Framing is ours alone: Content-Length,
// Transfer-Encoding and Connection among `headers` are not sent, and a Host among them replaces
// `authority` (a Content-Type or User-Agent among them likewise). A header name that is not a
// token, or a value or target with CR, LF or NUL, is kInvalid and nothing is appended: the caller
// built a request that would be smuggling, which is a programming error upstream, never something
// to put on the wire.
Status SerializeRequest(const RequestHead& head, std::string_view body, std::string* out);

struct Response {
  int status = 0;
  int minor_version = 1;   // HTTP/1.<minor>
  HeaderList headers;      // as received (the final answer's, not an interim's)
  std::string body;        // de-chunked
  bool keep_alive = true;  // false: the connection must be closed after this answer
  // A 2xx whose body would pass kMaxBodyBytes: the rest was not read and `body` is empty.
  bool body_over_cap = false;

  // The first header of this name (case-insensitive), or nullptr.
  const std::string* Find(std::string_view name) const;
};

class ResponseParser {
 public:
  enum class State { kIncomplete, kComplete, kError };

  ResponseParser() { Reset(); }

  // Feeds the next bytes of the connection. Returns how many were consumed: after kComplete,
  // data.substr(consumed) are bytes the peer sent after its answer, which the caller must treat as
  // a protocol violation. Feeding in kComplete or kError consumes nothing, except after an answer
  // complete with body_over_cap: every byte after its head is its own unread body, consumed.
  size_t Feed(std::string_view data);
  // The peer closed the connection: ends a close-delimited body (kComplete), anything else
  // unfinished is kError. Nothing received at all is kError too (see received_any()).
  void FeedEof();

  State state() const { return state_; }
  bool complete() const { return state_ == State::kComplete; }
  bool failed() const { return state_ == State::kError; }
  const std::string& error() const { return error_; }
  // True once any byte was fed: an answer began.
  bool received_any() const { return received_any_; }
  const Response& response() const { return response_; }
  Response& response() { return response_; }

  // Ready for the next answer on the same connection.
  void Reset();

 private:
  enum class Phase {
    kStatusLine,
    kHeaderLine,
    kBodyLength,
    kBodyToEof,
    kChunkSizeLine,
    kChunkData,
    kChunkDataEnd,
    kTrailerLine,
  };

  bool Fail(std::string why);
  // The body would pass kMaxBodyBytes: a 2xx is complete without it (true), anything else fails
  // with `why` (false).
  bool OverCap(std::string why);
  // Accumulates one CRLF-terminated line from data[*pos...]; true when line_ holds a whole line
  // (without its CRLF).
  bool TakeLine(std::string_view data, size_t* pos, size_t cap, const char* what);
  bool OnStatusLine();
  bool OnHeaderLine();
  bool OnHeadersDone();
  bool OnChunkSizeLine();
  bool OnTrailerLine();
  void Finish();

  State state_;
  Phase phase_;
  std::string error_;
  std::string line_;
  bool saw_cr_ = false;
  bool received_any_ = false;
  size_t head_bytes_ = 0;
  int interim_ = 0;
  // Framing learnt from the headers.
  bool chunked_ = false;
  bool has_length_ = false;
  uint64_t length_ = 0;
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
  uint64_t remaining_ = 0;  // of a Content-Length body or the current chunk
  Response response_;
};

}  // namespace streamcar::delivery::http1

#pragma once
// The one place where entry data becomes HTTP header values (SPEC 3.1, "Entry data never becomes
// HTTP framing"). Whoever can XADD to a stream controls these bytes, so each value is either
// encoded into a form that cannot carry framing (percent-encoding), validated against its own
// grammar (W3C Trace Context, RFC 9110 media types), or refused. Pure functions, no state.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace streamcar::delivery {

// A CloudEvents attribute value as the HTTP protocol binding (3.1.3.2) requires in a header:
// space, '"', '%' and every byte outside printable ASCII (U+0021..U+007E) become %XX (uppercase
// hex of each UTF-8 byte). The result is printable ASCII only.
std::string CloudEventsHeaderValue(std::string_view attribute);

// `value` as one RFC 3986 path segment: every byte but unreserved, sub-delims, ':' and '@' becomes
// %XX, so '/', '?', '#', '%', spaces and non-ASCII bytes can never change the URI's structure.
std::string PathSegment(std::string_view value);

// The ce-source attribute of a stream: "/streams/<stream as a path segment>", always a valid
// URI-reference that decodes back to the stream name.
std::string CloudEventsSource(std::string_view stream);

// W3C Trace Context (Level 1, section 3.2 and 3.3): true when `value` is a traceparent this
// sidecar may forward. Version 00 is exactly "00-<32 lowhex>-<16 lowhex>-<2 lowhex>" with neither
// id all zeros; version ff is invalid; a later version is accepted when its first 55 characters
// parse as version 00 does and anything after them starts with '-' (lowercase hex and '-' only).
bool IsValidTraceparent(std::string_view value);

// W3C tracestate: comma-separated key=value list members (empty members allowed), at most 32
// members, no key twice, keys and values by the W3C grammar.
bool IsValidTracestate(std::string_view value);

// RFC 9110 media type: type "/" subtype *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] ),
// with surrounding spaces/tabs ignored. Empty when `value` is one; otherwise why not (names no
// bytes of the value, which may be hostile).
std::string MediaTypeError(std::string_view value);
// `value` without leading and trailing spaces and tabs (what MediaTypeError judged).
std::string_view TrimOws(std::string_view value);

// A header name is an RFC 9110 token.
bool IsHeaderName(std::string_view name);
// A header value that cannot break framing: no CR, LF, NUL or any other control byte but HTAB.
bool IsSafeHeaderValue(std::string_view value);

// The last line of defence, run on every request before it leaves the encoder: empty when every
// header name is a token and every value (Content-Type included) is safe; otherwise what is wrong,
// naming the header.
std::string FramingError(const std::string& content_type,
                         const std::vector<std::pair<std::string, std::string>>& headers);

}  // namespace streamcar::delivery

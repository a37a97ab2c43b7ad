#pragma once
// Where a handler (or health) URL points, split once: the scheme, the host to connect to, the
// Host header, and the request target as it goes on the wire. Pure: no resolution, no I/O.

#include <string>
#include <string_view>

namespace streamcar::delivery {

struct HttpTarget {
  bool tls = false;
  std::string host;  // without brackets for IPv6
  int port = 80;
  std::string authority;  // the Host header: host[:port] as the URL spells it
  std::string origin;     // scheme://authority, for messages
  std::string path;       // origin-form "/orders?x=1", percent-encoded, without any #fragment
  // Set (SPEC 11, handler.unix_socket): connections go to this Unix socket instead of host:port;
  // the Host header and the path stay the url's.
  std::string unix_socket;
};

// `url` is an http:// or https:// URL (config validation checked the scheme and host).
HttpTarget SplitUrl(const std::string& url);

// `target` reached over the Unix socket at `path` ("" leaves it on TCP); messages name both
// ("http://app/orders via unix:/run/app.sock").
HttpTarget ViaUnixSocket(HttpTarget target, const std::string& path);

// Bytes a request target may not carry as they are (spaces, controls, non-ASCII, '"', '<', '>')
// percent-encoded, as a browser would; everything else unchanged.
std::string EncodeTarget(std::string_view path);

}  // namespace streamcar::delivery

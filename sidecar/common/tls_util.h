#pragma once
// OpenSSL and address helpers shared by the TLS transports: the Redis connection's
// (tls_transport.cc) and the handler client's (delivery/http_client.cc).

#include <string>

namespace streamcar {

// The oldest error on this thread's OpenSSL queue, as text (its reason when OpenSSL has one);
// the queue is cleared.
std::string TakeOpenSslError();

// Whether `host` is a literal IPv4 or IPv6 address (checked as an IP SAN, not a DNS name).
bool IsIpAddress(const std::string& host);

}  // namespace streamcar

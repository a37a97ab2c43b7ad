#pragma once
// The keys of SPEC 11's handler targets, for the tables of fields.cc: `handler.unix_socket`,
// `handler.auth` and a subscription's `routes`. Their cross-key rules (a route's url with the
// socket, Authorization set twice) are validate.cc's.
//
// Only config/ includes this header (it brings yaml-cpp).

#include <array>
#include <string>

#include "sidecar/config/fields.h"

namespace streamcar::config {

// handler.unix_socket: "" (TCP to the url's host and port) or an absolute path that fits a
// socket address.
std::string CheckUnixSocket(const std::string& path);

// handler.auth. The token file is read while loading, so that `check` (and `run` before it
// starts anything) fails on a file that is missing, unreadable, empty or not a token; the
// running sidecar re-reads it as it rotates (delivery/bearer_token.h). The secret is printed as
// "***".
extern const std::array<Field<HandlerAuthConfig>, 2> kHandlerAuthFields;

// subscriptions[].routes: a list of mappings (field, equals or prefix, url or drop). A list
// replaces the one of `defaults`; null is an empty list. Printed with every key of each route.
void ReadRoutes(Reader& in, const Field<Subscription>& field, const YAML::Node& parent,
                const YAML::Node& value, const std::string& path, Subscription* out);
void WriteRoutes(Writer& out, const Field<Subscription>& field, const Subscription& sub);

}  // namespace streamcar::config

#pragma once
// The JSON error answer of a service that speaks JSON (the log API, SPEC 10):
// {"error":"<message>"} with `status`, the message escaped as a JSON string. Pure code.

#include <string>
#include <string_view>

#include "sidecar/http/response.h"

namespace streamcar::http {

// The body alone: {"error":"<message>"}.
std::string ErrorJson(std::string_view message);

// An application/json answer with that body.
Response JsonError(int status, std::string_view message);

}  // namespace streamcar::http

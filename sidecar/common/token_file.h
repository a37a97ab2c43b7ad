#pragma once
// A bearer token kept in a file (handler.auth.bearer_token_file, SPEC 11): a Kubernetes projected
// service-account token, a mounted Secret. The token is the file's content with trailing
// whitespace removed (the final newline an editor or `echo` adds, or a CRLF). Any other
// whitespace, a control character or a byte outside printable ASCII makes the file unusable
// rather than being trimmed or escaped: such a token is not what RFC 6750 allows, a header
// cannot carry some of those bytes, and silently sending something other than the file says
// would fail later and more obscurely. Messages never quote the token.

#include <string>

#include "sidecar/common/status.h"

namespace streamcar {

// The token in `path`, or kInvalid naming the file and what is wrong ("cannot read ...: No such
// file or directory", "... is empty", "... holds a byte that cannot be in a token at offset N").
// Any thread; blocks on the read.
StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace streamcar

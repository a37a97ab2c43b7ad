#pragma once
// Redis endpoints: redis://[user[:password]@]host[:port][/db], rediss://... (TLS), and
// unix:///path/to/socket[?db=N].

#include <optional>
#include <string>
#include <string_view>

namespace streamcar::config {

struct RedisEndpoint {
  enum class Kind { kTcp, kTls, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp / kTls
  int port = 6379;
  std::string path;  // kUnix
  int db = 0;
  std::string username;  // from the URL's user info; the config's fields take precedence
  std::string password;

  // For logs and `check`: the URL with any password replaced by "***".
  std::string Describe() const;
};

std::optional<RedisEndpoint> ParseRedisUrl(std::string_view url, std::string* error);

// The URL text with every secret in it replaced by "***", for printing (check, logs, errors): the
// password of the user info, and the value of every query parameter whose name says it holds a
// credential (password, sslpassword, oauth_client_secret, anything with "pass", "pwd", "secret"
// or "token" in its name, percent-encoded or not). The one masking function for any URL.
std::string MaskUrlPassword(std::string_view url);

}  // namespace streamcar::config

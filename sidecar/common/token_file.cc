#include "sidecar/common/token_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace streamcar {

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status(StatusCode::kInvalid, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return Status(StatusCode::kInvalid, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) return Status(StatusCode::kInvalid, path + " is empty: no token to send");
  for (size_t i = 0; i < token.size(); ++i) {
    const auto byte = static_cast<unsigned char>(token[i]);
    if (byte <= 0x20 || byte >= 0x7f) {
      return Status(StatusCode::kInvalid,
                    path +
                        " holds a byte that cannot be in a token (whitespace, a control "
                        "character or non-ASCII) at offset " +
                        std::to_string(i));
    }
  }
  return token;
}

}  // namespace streamcar

#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace streamcar {

// RFC 4648 base64 with padding.
std::string Base64Encode(std::string_view bytes);
void Base64EncodeTo(std::string_view bytes, std::string* out);
// Strict decoding (padding required); nullopt on any invalid character or length.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace streamcar

#include "sidecar/delivery/base64.h"

#include <gtest/gtest.h>

namespace streamcar {
namespace {

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
}

TEST(Base64, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(Base64Decode(Base64Encode(all)), all);
}

TEST(Base64, DecodeRejectsInvalid) {
  EXPECT_FALSE(Base64Decode("abc"));
  EXPECT_FALSE(Base64Decode("ab=c"));
  EXPECT_FALSE(Base64Decode("a*=="));
}

}  // namespace
}  // namespace streamcar

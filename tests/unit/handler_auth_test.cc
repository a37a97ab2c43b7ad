// handler.auth (SPEC 11) without sockets: the token file's rules (common/token_file.h), the
// rotating bearer token on an injected clock (delivery/bearer_token.h), including the atomic
// `..data` symlink swap of a Kubernetes volume, and the request signature
// (delivery/request_auth.h) against a value computed independently (Python's hmac module).

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sidecar/common/token_file.h"
#include "sidecar/delivery/bearer_token.h"
#include "sidecar/delivery/request_auth.h"

namespace streamcar::delivery {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "streamcar-auth-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& content) const {
    std::ofstream(File(name), std::ios::binary | std::ios::trunc) << content;
  }

 private:
  std::string path_;
};

TEST(TokenFile, TrailingWhitespaceIsTrimmedAndNothingElse) {
  TempDir dir;
  dir.Write("plain", "abc.def-ghi_jkl~+/==\n");
  EXPECT_EQ(*ReadTokenFile(dir.File("plain")), "abc.def-ghi_jkl~+/==");
  dir.Write("crlf", "tok\r\n \t\n");
  EXPECT_EQ(*ReadTokenFile(dir.File("crlf")), "tok");
  dir.Write("bare", "tok");
  EXPECT_EQ(*ReadTokenFile(dir.File("bare")), "tok");
}

TEST(TokenFile, AFileThatHoldsNoTokenIsRefusedWithoutQuotingIt) {
  TempDir dir;
  auto missing = ReadTokenFile(dir.File("missing"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "cannot read " + dir.File("missing") + ": No such file or directory");
  dir.Write("empty", "\n\n");
  EXPECT_EQ(ReadTokenFile(dir.File("empty")).status().message(),
            dir.File("empty") + " is empty: no token to send");
  for (const std::string& content :
       {std::string(" secret-one"), std::string("secret two"), std::string("secret\x01three"),
        std::string("secret\nfour"), std::string("s\xc3\xa9\x63ret")}) {
    dir.Write("bad", content);
    auto bad = ReadTokenFile(dir.File("bad"));
    ASSERT_FALSE(bad.ok()) << content;
    EXPECT_NE(bad.status().message().find("cannot be in a token"), std::string::npos);
    EXPECT_EQ(bad.status().message().find("secret"), std::string::npos)
        << "the message quotes the token: " << bad.status().message();
  }
}

TEST(BearerToken, ARewrittenFileIsSentFromTheNextCheckOn) {
  TempDir dir;
  dir.Write("token", "first\n");
  const SteadyTime start{};
  auto token = BearerToken::Open(dir.File("token"), start);
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->HeaderValue(start), "Bearer first");
  dir.Write("token", "second-token\n");
  // Within kRecheck of the last look the file is not looked at.
  EXPECT_EQ(token->HeaderValue(start + BearerToken::kRecheck - Millis(1)), "Bearer first");
  EXPECT_EQ(token->HeaderValue(start + BearerToken::kRecheck), "Bearer second-token");
  // The same size: the modification time (or the inode) tells.
  ::usleep(20'000);
  dir.Write("token", "third-token!\n");
  EXPECT_EQ(token->HeaderValue(start + 2 * BearerToken::kRecheck), "Bearer third-token!");
}

// The kubelet's atomic writer: the files live in a timestamped directory, `..data` points at
// it, and `token` points at `..data/token`. A rotation writes a new directory and renames a new
// `..data` symlink over the old one, then removes the old directory.
TEST(BearerToken, FollowsTheAtomicSymlinkSwapOfAKubernetesVolume) {
  TempDir dir;
  fs::create_directory(dir.File("..2026_12_03_09_00_00.1"));
  dir.Write("..2026_12_03_09_00_00.1/token", "eyJhbGciOiJSUzI1NiJ9.first.sig");
  fs::create_directory_symlink("..2026_12_03_09_00_00.1", dir.File("..data"));
  fs::create_symlink("..data/token", dir.File("token"));
  const SteadyTime start{};
  auto token = BearerToken::Open(dir.File("token"), start);
  ASSERT_TRUE(token.ok()) << token.status().message();
  EXPECT_EQ(token->HeaderValue(start), "Bearer eyJhbGciOiJSUzI1NiJ9.first.sig");

  fs::create_directory(dir.File("..2026_12_03_09_48_00.2"));
  dir.Write("..2026_12_03_09_48_00.2/token", "eyJhbGciOiJSUzI1NiJ9.second.sig");
  fs::create_directory_symlink("..2026_12_03_09_48_00.2", dir.File("..data_tmp"));
  fs::rename(dir.File("..data_tmp"), dir.File("..data"));
  fs::remove_all(dir.File("..2026_12_03_09_00_00.1"));
  EXPECT_EQ(token->HeaderValue(start + BearerToken::kRecheck),
            "Bearer eyJhbGciOiJSUzI1NiJ9.second.sig");
}

TEST(BearerToken, AFileThatBreaksLaterKeepsTheLastGoodToken) {
  TempDir dir;
  dir.Write("token", "good\n");
  SteadyTime now{};
  auto token = BearerToken::Open(dir.File("token"), now);
  ASSERT_TRUE(token.ok());
  fs::remove(dir.File("token"));
  now += BearerToken::kRecheck;
  EXPECT_EQ(token->HeaderValue(now), "Bearer good");
  dir.Write("token", "");  // truncated, as a writer that has not written yet leaves it
  now += BearerToken::kRecheck;
  EXPECT_EQ(token->HeaderValue(now), "Bearer good");
  dir.Write("token", "better\n");
  now += BearerToken::kRecheck;
  EXPECT_EQ(token->HeaderValue(now), "Bearer better");
}

TEST(BearerToken, NoUsableTokenAtStartIsAnErrorNamingTheKey) {
  TempDir dir;
  auto token = BearerToken::Open(dir.File("absent"), SteadyTime{});
  ASSERT_FALSE(token.ok());
  EXPECT_EQ(token.status().code(), StatusCode::kInvalid);
  EXPECT_EQ(token.status().message(), "handler.auth.bearer_token_file: cannot read " +
                                          dir.File("absent") + ": No such file or directory");
}

// Computed with Python: hmac.new(b"whsec-0123456789abcdef", b'1700000000.{"id":"1-0"}',
// hashlib.sha256).hexdigest(), and the same over b"1700000000." (an empty body).
TEST(RequestAuth, SignatureIsHmacSha256OfTimestampDotBody) {
  EXPECT_EQ(SignatureHeaderValue("whsec-0123456789abcdef", 1700000000, R"({"id":"1-0"})"),
            "t=1700000000,v1=8d5bf6f823720734fc5529f29f79d8537d4303606101d285bccc9ac86a351960");
  EXPECT_EQ(SignatureHeaderValue("whsec-0123456789abcdef", 1700000000, ""),
            "t=1700000000,v1=b225047a70491323cb35ad04c6121e8c0ca18b344d6d975fc714cd1da1aa3b34");
}

TEST(RequestAuth, AddsTheConfiguredHeadersOnTheInjectedClock) {
  TempDir dir;
  dir.Write("token", "tok-1\n");
  config::HandlerAuthConfig config;
  ManualClock clock;
  clock.SetWallMillis(1'700'000'000'999);  // 1700000000 s, rounded down
  EXPECT_EQ(RequestAuth::Create(config, clock.Now())->get(), nullptr);  // nothing asked

  config.hmac_secret = "whsec-0123456789abcdef";
  config.bearer_token_file = dir.File("token");
  auto auth = RequestAuth::Create(config, clock.Now());
  ASSERT_TRUE(auth.ok()) << auth.status().message();
  http1::HeaderList headers = {{"X-Static", "1"}};
  (*auth)->AddHeaders(R"({"id":"1-0"})", clock, &headers);
  const http1::HeaderList expected = {
      {"X-Static", "1"},
      {"Authorization", "Bearer tok-1"},
      {"Streamcar-Signature",
       "t=1700000000,v1=8d5bf6f823720734fc5529f29f79d8537d4303606101d285bccc9ac86a351960"}};
  EXPECT_EQ(headers, expected);

  // A rotation shows from the next check on; the signature follows the wall clock.
  dir.Write("token", "tok-2\n");
  clock.Advance(BearerToken::kRecheck);
  headers.clear();
  (*auth)->AddHeaders("", clock, &headers);
  ASSERT_EQ(headers.size(), 2u);
  EXPECT_EQ(headers[0].second, "Bearer tok-2");
  EXPECT_EQ(headers[1].second, SignatureHeaderValue("whsec-0123456789abcdef", 1700000001, ""));
}

}  // namespace
}  // namespace streamcar::delivery

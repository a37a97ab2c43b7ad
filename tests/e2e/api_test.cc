// The log API (SPEC section 10) end to end: the real binary with a streams-only configuration, a
// real redis-server, real HTTP over sockets written byte by byte (so framing is under test too).

#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/e2e_fixture.h"

namespace streamcar::testing {
namespace {

class ApiTest : public E2eTest {
 protected:
  std::string WriteToken(const std::string& token) {
    std::string path = WriteConfig(token);  // a file of its own that lives as long as the test
    return path;
  }
};

TEST_F(ApiTest, CheckPrintsTheLogApiSectionsButNeverTheTokenItself) {
  const std::string token_path = WriteToken("s3cret-token-value\n");
  const std::string path = WriteConfig(
      "version: 1\nredis: { url: \"" + redis_->url() +
      "\" }\napi:\n  listen: 127.0.0.1:9465\n  token_file: " + token_path +
      "\n  max_body: 64KiB\nstreams:\n  - name: feed\n    produce: false\n    max_len: 10\n"
      "archive: { url: \"postgres://app:pgpass@db:5432/log\" }\n");
  auto result = RunStreamcar({"check", "-c", path});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("subscriptions: []"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("token_file: " + token_path), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("max_body: 64KiB"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("  - name: feed\n    produce: false\n    max_len: 10"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find("s3cret-token-value"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("pgpass"), std::string::npos) << result.out;
}

TEST_F(ApiTest, CheckRejectsAnArchivedStreamWithoutAnArchive) {
  const std::string path = WriteConfig("version: 1\nstreams:\n  - name: feed\n    archive: true\n");
  auto result = RunStreamcar({"check", "-c", path});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(path + ":3: streams[0].archive: archive: true needs archive.url"),
            std::string::npos)
      << result.err;
}

}  // namespace
}  // namespace streamcar::testing

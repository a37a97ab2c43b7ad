#include "sidecar/config/expand.h"

#include <gtest/gtest.h>

#include <map>

namespace streamcar::config {
namespace {

EnvLookup Env(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

std::string Expand(const std::string& text, const EnvLookup& env) {
  std::string error;
  auto out = ExpandVariables(text, env, &error);
  EXPECT_TRUE(out.has_value()) << error;
  return out.value_or("<error>");
}

TEST(Expand, ReplacesVariables) {
  EXPECT_EQ(Expand("redis://${HOST}:${PORT}/0", Env({{"HOST", "r"}, {"PORT", "1"}})),
            "redis://r:1/0");
}

TEST(Expand, UsesDefaultWhenUnsetOrEmpty) {
  EXPECT_EQ(Expand("${POD_NAME:-fallback}", Env({})), "fallback");
  EXPECT_EQ(Expand("${POD_NAME:-fallback}", Env({{"POD_NAME", ""}})), "fallback");
  EXPECT_EQ(Expand("${POD_NAME:-}", Env({})), "");
  EXPECT_EQ(Expand("${POD_NAME:-x}", Env({{"POD_NAME", "pod-1"}})), "pod-1");
}

TEST(Expand, UnsetWithoutDefaultNamesTheVariable) {
  std::string error;
  EXPECT_FALSE(ExpandVariables("${REDIS_PASSWORD}", Env({}), &error));
  EXPECT_NE(error.find("REDIS_PASSWORD"), std::string::npos);
}

TEST(Expand, DollarDollarIsALiteralDollar) {
  EXPECT_EQ(Expand("$${NOT_EXPANDED} costs $5", Env({})), "${NOT_EXPANDED} costs $5");
}

TEST(Expand, RejectsMalformedReferences) {
  std::string error;
  EXPECT_FALSE(ExpandVariables("${UNCLOSED", Env({}), &error));
  EXPECT_NE(error.find("unterminated"), std::string::npos);
  EXPECT_FALSE(ExpandVariables("${1BAD}", Env({}), &error));
  EXPECT_FALSE(ExpandVariables("${}", Env({}), &error));
}

TEST(Expand, ValueIsNotExpandedAgain) {
  EXPECT_EQ(Expand("${A}", Env({{"A", "${B}"}, {"B", "x"}})), "${B}");
}

}  // namespace
}  // namespace streamcar::config

#include "sidecar/delivery/response_parser.h"

#include <rapidjson/document.h>

#include <cctype>

#include "sidecar/common/text.h"

namespace streamcar::delivery {
namespace {

// The verdict named by a JSON string value; kSuccess for anything else.
BodyVerdict VerdictOf(const rapidjson::Value& value) {
  if (!value.IsString()) return BodyVerdict::kSuccess;
  std::string_view text(value.GetString(), value.GetStringLength());
  if (EqualsIgnoreCase(text, "RETRY")) return BodyVerdict::kRetry;
  if (EqualsIgnoreCase(text, "DROP")) return BodyVerdict::kDrop;
  return BodyVerdict::kSuccess;
}

bool LooksLikeObject(std::string_view body) {
  for (char c : body) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    return c == '{';
  }
  return false;
}

}  // namespace

BodyVerdict ParseEntryVerdict(std::string_view body) {
  if (!LooksLikeObject(body)) return BodyVerdict::kSuccess;  // cheap exit for the common case
  rapidjson::Document document;
  document.Parse(body.data(), body.size());
  if (document.HasParseError() || !document.IsObject()) return BodyVerdict::kSuccess;
  if (!document.HasMember("status")) return BodyVerdict::kSuccess;
  return VerdictOf(document["status"]);
}

BatchAnswer ParseBatchAnswer(std::string_view body) {
  BatchAnswer answer;
  if (!LooksLikeObject(body)) return answer;
  rapidjson::Document document;
  document.Parse(body.data(), body.size());
  if (document.HasParseError() || !document.IsObject()) return answer;
  if (!document.HasMember("failures") || !document["failures"].IsArray()) return answer;
  answer.has_failures = true;
  for (const auto& item : document["failures"].GetArray()) {
    if (!item.IsObject()) {
      ++answer.malformed;
      continue;
    }
    if (!item.HasMember("id") || !item["id"].IsString()) {
      ++answer.malformed;
      continue;
    }
    BatchFailure failure;
    failure.id.assign(item["id"].GetString(), item["id"].GetStringLength());
    // A listed entry without a readable status is a failure all the same: retry it.
    failure.verdict = item.HasMember("status") ? VerdictOf(item["status"]) : BodyVerdict::kRetry;
    if (failure.verdict == BodyVerdict::kSuccess) failure.verdict = BodyVerdict::kRetry;
    if (item.HasMember("error") && item["error"].IsString()) {
      failure.error.assign(item["error"].GetString(), item["error"].GetStringLength());
    }
    answer.failures.push_back(std::move(failure));
  }
  return answer;
}

}  // namespace streamcar::delivery

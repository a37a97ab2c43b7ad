#include "sidecar/delivery/response_parser.h"

#include <rapidjson/document.h>

#include <cctype>
#include <optional>

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

// The verdict of an object's "status" member; nullopt when it has none. An object that names
// "status" twice is ambiguous (RFC 8259 leaves duplicate names to the parser, rapidjson takes the
// first, others the last): it is a retry whatever the values say, which loses nothing and, if the
// handler keeps answering so, ends in a dead letter that shows the body.
std::optional<BodyVerdict> StatusVerdict(const rapidjson::Value& object) {
  const rapidjson::Value* status = nullptr;
  for (const auto& member : object.GetObject()) {
    if (std::string_view(member.name.GetString(), member.name.GetStringLength()) != "status") {
      continue;
    }
    if (status != nullptr) return BodyVerdict::kRetry;
    status = &member.value;
  }
  if (status == nullptr) return std::nullopt;
  return VerdictOf(*status);
}

// A UTF-8 byte-order mark before the JSON is not part of it: RFC 8259 lets a parser ignore it,
// and a handler whose framework writes one means the object that follows.
std::string_view WithoutByteOrderMark(std::string_view body) {
  constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";
  if (body.starts_with(kByteOrderMark)) {
    body.remove_prefix(kByteOrderMark.size());
  }
  return body;
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
  body = WithoutByteOrderMark(body);
  if (!LooksLikeObject(body)) return BodyVerdict::kSuccess;  // cheap exit for the common case
  rapidjson::Document document;
  document.Parse(body.data(), body.size());
  if (document.HasParseError() || !document.IsObject()) return BodyVerdict::kSuccess;
  return StatusVerdict(document).value_or(BodyVerdict::kSuccess);
}

BodyVerdict ParseDaprVerdict(std::string_view body) {
  body = WithoutByteOrderMark(body);
  if (!LooksLikeObject(body)) return BodyVerdict::kSuccess;
  rapidjson::Document document;
  document.Parse(body.data(), body.size());
  if (document.HasParseError() || !document.IsObject()) return BodyVerdict::kSuccess;
  const rapidjson::Value& root = document;
  const rapidjson::Value* status = nullptr;
  for (const auto& member : root.GetObject()) {
    if (std::string_view(member.name.GetString(), member.name.GetStringLength()) != "status") {
      continue;
    }
    if (status != nullptr) return BodyVerdict::kRetry;
    status = &member.value;
  }
  if (status == nullptr || !status->IsString()) return BodyVerdict::kSuccess;
  std::string_view text(status->GetString(), status->GetStringLength());
  if (text.empty() || EqualsIgnoreCase(text, "SUCCESS")) return BodyVerdict::kSuccess;
  if (EqualsIgnoreCase(text, "DROP")) return BodyVerdict::kDrop;
  return BodyVerdict::kRetry;
}

BatchAnswer ParseBatchAnswer(std::string_view body) {
  BatchAnswer answer;
  body = WithoutByteOrderMark(body);
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
    failure.verdict = StatusVerdict(item).value_or(BodyVerdict::kRetry);
    if (failure.verdict == BodyVerdict::kSuccess) failure.verdict = BodyVerdict::kRetry;
    if (item.HasMember("error") && item["error"].IsString()) {
      failure.error.assign(item["error"].GetString(), item["error"].GetStringLength());
    }
    answer.failures.push_back(std::move(failure));
  }
  return answer;
}

}  // namespace streamcar::delivery

#include "sidecar/delivery/published_event.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "sidecar/common/text.h"
#include "sidecar/delivery/exact_json.h"
#include "sidecar/delivery/header_values.h"

namespace streamcar::delivery {
namespace {

// One top-level member of the published object: its key, its value as JSON written again, and
// what kind of value it is.
struct Member {
  std::string key;
  std::string json;
  bool is_string = false;
  bool is_scalar = false;  // a string, number or boolean
  std::string text;        // the string's value when is_string
};

// A rapidjson SAX handler that splits a top-level object into its members, each value written by
// an ExactWriter of its own. Stops (false) at a top level that is not an object. Keeps counters
// only, so the iterative reader's guarantee holds: no recursion, however deep the data.
class MemberSplitter {
 public:
  MemberSplitter() : writer_(buffer_) {}

  std::vector<Member>& members() { return members_; }

  bool Null() {
    return Scalar(false, [&] { return writer_.Null(); });
  }
  bool Bool(bool b) {
    return Scalar(true, [&] { return writer_.Bool(b); });
  }
  bool Int(int i) {
    return Scalar(true, [&] { return writer_.Int(i); });
  }
  bool Uint(unsigned u) {
    return Scalar(true, [&] { return writer_.Uint(u); });
  }
  bool Int64(int64_t i) {
    return Scalar(true, [&] { return writer_.Int64(i); });
  }
  bool Uint64(uint64_t u) {
    return Scalar(true, [&] { return writer_.Uint64(u); });
  }
  bool Double(double d) {
    return Scalar(true, [&] { return writer_.Double(d); });
  }
  bool RawNumber(const char* text, rapidjson::SizeType length, bool copy) {
    return Scalar(true, [&] { return writer_.RawNumber(text, length, copy); });
  }
  bool String(const char* text, rapidjson::SizeType length, bool copy) {
    if (depth_ == 1) {
      members_.back().is_string = true;
      members_.back().text.assign(text, length);
    }
    return Scalar(true, [&] { return writer_.String(text, length, copy); });
  }
  bool Key(const char* text, rapidjson::SizeType length, bool copy) {
    if (depth_ == 1) {
      members_.push_back({std::string(text, length)});
      buffer_.Clear();
      writer_.Reset(buffer_);
      return true;
    }
    return writer_.Key(text, length, copy);
  }
  bool StartObject() {
    if (depth_++ == 0) return true;  // the published object itself
    return writer_.StartObject();
  }
  bool EndObject(rapidjson::SizeType count) {
    if (--depth_ == 0) return true;
    return writer_.EndObject(count) && Finished();
  }
  bool StartArray() {
    if (depth_++ == 0) return false;  // not an object: no event
    return writer_.StartArray();
  }
  bool EndArray(rapidjson::SizeType count) {
    --depth_;
    return writer_.EndArray(count) && Finished();
  }

 private:
  template <typename Write>
  bool Scalar(bool scalar, Write write) {
    if (depth_ == 0) return false;  // not an object: no event
    if (depth_ == 1) members_.back().is_scalar = scalar;
    return write() && Finished();
  }
  // A member's value is complete when the writer is back at the top level.
  bool Finished() {
    if (depth_ == 1) members_.back().json.assign(buffer_.GetString(), buffer_.GetSize());
    return true;
  }

  rapidjson::StringBuffer buffer_;
  ExactWriter writer_;
  std::vector<Member> members_;
  int depth_ = 0;
};

// Attributes whose value the CloudEvents JSON format (or Dapr, for its own) requires to be a
// string: anything else makes the object no event.
bool MustBeString(std::string_view key) {
  static constexpr std::array<std::string_view, 14> kStrings = {
      "specversion", "id",          "source",  "type",        "datacontenttype",
      "dataschema",  "subject",     "time",    "data_base64", "topic",
      "pubsubname",  "traceparent", "traceid", "tracestate"};
  return std::find(kStrings.begin(), kStrings.end(), key) != kStrings.end();
}

// Attributes streamcar asserts itself (cloudevent_json.cc): never taken from entry data. (The
// type is taken, but not as a member: PublishedEvent::type.)
bool IsOurs(std::string_view key) {
  static constexpr std::array<std::string_view, 9> kOurs = {"specversion", "id",      "source",
                                                            "time",        "topic",   "pubsubname",
                                                            "traceparent", "traceid", "tracestate"};
  return std::find(kOurs.begin(), kOurs.end(), key) != kOurs.end();
}

// A CloudEvents attribute name: lowercase ASCII letters and digits only (the spec's rule, which
// also keeps a receiver's SDK from refusing the whole event for one odd key).
bool IsAttributeName(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  });
}

// Whether the published member goes into the delivered event.
bool Kept(const Member& member) {
  if (member.key == "data" || member.key == "data_base64") return true;
  if (member.key == "type" || IsOurs(member.key) || !IsAttributeName(member.key)) return false;
  return member.is_scalar;  // datacontenttype, subject, dataschema, extensions
}

// "application/cloudevents+json", parameters and case aside.
bool IsCloudEventsJson(std::string_view content_type) {
  return EqualsIgnoreCase(TrimOws(content_type.substr(0, content_type.find(';'))),
                          "application/cloudevents+json");
}

}  // namespace

std::optional<PublishedEvent> FindPublishedEvent(const config::HandlerConfig& handler,
                                                 const StreamEntry& entry) {
  if (handler.format != config::Format::kDapr) return std::nullopt;
  const std::string* bytes = entry.Find(handler.raw_field);
  if (bytes == nullptr) return std::nullopt;
  if (const std::string* content_type = entry.Find("content_type");
      content_type != nullptr && !IsCloudEventsJson(*content_type)) {
    return std::nullopt;
  }
  // Most entries are no published event: a cheap look before parsing.
  if (bytes->find("specversion") == std::string::npos) return std::nullopt;
  MemberSplitter splitter;
  if (!ParseWith(*bytes, splitter)) return std::nullopt;
  std::vector<Member>& members = splitter.members();
  bool specversion = false;
  bool data = false;
  bool data_base64 = false;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& member = members[i];
    for (size_t j = 0; j < i; ++j) {
      if (members[j].key == member.key) return std::nullopt;  // a key given twice
    }
    if (MustBeString(member.key) && !member.is_string) return std::nullopt;
    specversion = specversion || member.key == "specversion";
    data = data || member.key == "data";
    data_base64 = data_base64 || member.key == "data_base64";
  }
  if (!specversion || (data && data_base64)) return std::nullopt;
  PublishedEvent event;
  for (Member& member : members) {
    if (member.key == "traceparent") event.traceparent = member.text;
    if (member.key == "tracestate") event.tracestate = member.text;
    if (member.key == "type") event.type = member.text;
    if (Kept(member)) event.members.emplace_back(std::move(member.key), std::move(member.json));
  }
  return event;
}

}  // namespace streamcar::delivery

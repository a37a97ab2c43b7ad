#include "sidecar/redis/reply.h"

#include <hiredis.h>

namespace streamcar::redis {

Command& Command::Arg(std::string_view value) {
  if (count_ == 0) name_ = std::string(value);
  body_ += '$';
  body_ += std::to_string(value.size());
  body_ += "\r\n";
  body_.append(value.data(), value.size());
  body_ += "\r\n";
  ++count_;
  return *this;
}

Command& Command::Arg(int64_t value) { return Arg(std::string_view(std::to_string(value))); }

void Command::AppendTo(std::string* out) const {
  *out += '*';
  *out += std::to_string(count_);
  *out += "\r\n";
  *out += body_;
}

std::string Command::Encode() const {
  std::string out;
  out.reserve(body_.size() + 16);
  AppendTo(&out);
  return out;
}

bool ReplyView::IsNil() const { return reply_ == nullptr || reply_->type == REDIS_REPLY_NIL; }
bool ReplyView::IsError() const { return reply_ != nullptr && reply_->type == REDIS_REPLY_ERROR; }
bool ReplyView::IsArray() const { return reply_ != nullptr && reply_->type == REDIS_REPLY_ARRAY; }
bool ReplyView::IsString() const {
  return reply_ != nullptr &&
         (reply_->type == REDIS_REPLY_STRING || reply_->type == REDIS_REPLY_STATUS);
}
bool ReplyView::IsInteger() const {
  return reply_ != nullptr && reply_->type == REDIS_REPLY_INTEGER;
}

std::string_view ReplyView::Str() const {
  if (reply_ == nullptr || reply_->str == nullptr) return {};
  if (reply_->type != REDIS_REPLY_STRING && reply_->type != REDIS_REPLY_STATUS &&
      reply_->type != REDIS_REPLY_ERROR) {
    return {};
  }
  return {reply_->str, reply_->len};
}

int64_t ReplyView::Integer() const { return IsInteger() ? reply_->integer : 0; }

size_t ReplyView::Size() const { return IsArray() ? reply_->elements : 0; }

ReplyView ReplyView::operator[](size_t index) const {
  if (!IsArray() || index >= reply_->elements) return ReplyView(nullptr);
  return ReplyView(reply_->element[index]);
}

}  // namespace streamcar::redis

#pragma once
// Redis commands (RESP encoding) and replies (hiredis reply objects under RAII). The only headers
// that mention hiredis types are in sidecar/redis/.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

struct redisReply;   // NOLINT(readability-identifier-naming): hiredis's name
struct redisReader;  // NOLINT(readability-identifier-naming): hiredis's name

namespace streamcar::redis {

// One command, encoded as it is built: Command("XACK").Arg(stream).Arg(group).Arg(id).
class Command {
 public:
  // Room for a typical command's arguments up front: most outgrow the inline string at their
  // second argument anyway, and growing by doubling would copy them three or four times.
  explicit Command(std::string_view name) {
    body_.reserve(kInitialBytes);
    Arg(name);
  }
  Command& Arg(std::string_view value);
  Command& Arg(int64_t value);
  // The RESP bytes of the command.
  std::string Encode() const;
  void AppendTo(std::string* out) const;
  size_t arg_count() const { return count_; }
  // For error messages: the command name.
  std::string_view name() const { return name_; }

 private:
  static constexpr size_t kInitialBytes = 128;
  std::string body_;
  std::string name_;
  size_t count_ = 0;
};

// A non-owning view of a reply or of one of its elements. Cheap to copy.
class ReplyView {
 public:
  explicit ReplyView(const redisReply* reply = nullptr) : reply_(reply) {}

  bool IsNil() const;
  bool IsError() const;
  bool IsArray() const;
  bool IsString() const;  // bulk or status string
  bool IsInteger() const;

  std::string_view Str() const;  // empty unless a string or error
  int64_t Integer() const;       // 0 unless an integer
  size_t Size() const;           // elements of an array, else 0
  ReplyView operator[](size_t index) const;

 private:
  const redisReply* reply_;
};

// Frees a reply of a NewReader() reader (its arena; see reply_reader.cc). A reply of any other
// reader (redisReaderCreate's) must not be put in a ReplyPtr.
struct ReplyDeleter {
  void operator()(redisReply* reply) const;
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

using ReaderPtr = std::unique_ptr<redisReader, void (*)(redisReader*)>;
// hiredis's reader, building each reply in one arena: every reader whose replies become a Reply.
ReaderPtr NewReader();

// An owned top-level reply.
class Reply {
 public:
  Reply() = default;
  explicit Reply(ReplyPtr reply) : reply_(std::move(reply)) {}
  ReplyView view() const { return ReplyView(reply_.get()); }
  ReplyView operator[](size_t index) const { return view()[index]; }
  bool IsError() const { return view().IsError(); }
  bool IsNil() const { return view().IsNil(); }

 private:
  ReplyPtr reply_;
};

}  // namespace streamcar::redis

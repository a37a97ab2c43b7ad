// libFuzzer: Redis reply decoding. Any bytes from the wire go through hiredis's reader, our views,
// and every parser of a build/parse pair (stream_ops.h, group_info.h, dead_letter_record.h)
// without a crash.

#include <hiredis.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/group_info.h"
#include "sidecar/redis/reply.h"
#include "sidecar/redis/stream_ops.h"

namespace {

// Walks every element like the engine's parsers do.
size_t Walk(const streamcar::redis::ReplyView& view, int depth) {
  if (depth > 8) return 0;
  size_t n = view.Str().size() + static_cast<size_t>(view.Integer() & 1);
  for (size_t i = 0; i < view.Size(); ++i) n += Walk(view[i], depth + 1);
  return n;
}

// hiredis 0.14's reader allocates the element array that a "*N" header announces, before any
// element arrives (newer hiredis caps it; Debian 12's does not). Only a hostile server could send
// such a header, so inputs announcing more than a million elements or bytes are skipped: the
// finding is documented in docs/reliability.md, and everything else is fuzzed.
bool AnnouncesHugeSize(const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != '*' && data[i] != '$' && data[i] != '%' && data[i] != '~') continue;
    size_t digits = 0;
    for (size_t k = i + 1; k < size && data[k] >= '0' && data[k] <= '9'; ++k) ++digits;
    if (digits > 6) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (AnnouncesHugeSize(data, size)) return 0;
  using streamcar::redis::SubscriptionOps;
  namespace redis = streamcar::redis;
  redis::ReaderPtr owned = redis::NewReader();
  redisReader* reader = owned.get();
  redisReaderFeed(reader, reinterpret_cast<const char*>(data), size);
  std::vector<redis::Reply> replies;
  for (int i = 0; i < 16; ++i) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK || raw == nullptr) break;
    redis::Reply reply{redis::ReplyPtr(static_cast<redisReply*>(raw))};
    const redis::ReplyView view = reply.view();
    (void)Walk(view, 0);
    (void)SubscriptionOps::ParseEntries(view);
    (void)SubscriptionOps::ParseRead(view);
    (void)SubscriptionOps::ParseAutoClaim(view);
    (void)SubscriptionOps::ParsePendingIds(view);
    (void)SubscriptionOps::ParseRetryClaim(view);
    (void)SubscriptionOps::ParseIds(view);
    (void)SubscriptionOps::ParseDeadLetter(view);
    (void)SubscriptionOps::ParseCount(view);
    (void)redis::ParseGroupInfo(view, "g");
    (void)redis::ParseGroupCount(view);
    (void)redis::ParsePendingCount(view);
    (void)redis::ParseHasAckDel(view);
    (void)redis::ParseReplay(view);
    for (auto& entry : SubscriptionOps::ParseEntries(view)) {
      redis::DeadLetterRecord record(std::move(entry));
      (void)record.Original();
      (void)record.MetaInteger("streamcar.attempts");
    }
    replies.push_back(std::move(reply));
  }
  // The multi-reply parsers, over whatever arrived.
  (void)SubscriptionOps::ParseAck(replies);
  std::vector<streamcar::StreamEntry> entries(replies.size());
  (void)SubscriptionOps::ApplyDeliveryCounts(replies, &entries);
  std::vector<std::string> ids(replies.size(), "1-1");
  (void)SubscriptionOps::ParseFetch(replies, ids);
  return 0;
}

// The merge-read of SPEC section 10: archive below the watermark W, Redis above it.
//
// Why it is gap-free and duplicate-free while a fold and a trim run concurrently:
//
//  (a) The folder trims only ids <= W, and only after W is committed in the archive; W never
//      moves backwards. So at any moment every id Redis has lost to a trim is <= the W committed
//      at that moment.
//  (b) Every id <= a committed W is in the archive: a fold writes every entry up to its trim
//      point in the same transaction that advances W, and XADD ids only grow, so no entry at or
//      below W can appear in Redis after the fold that covered it.
//
// A read runs in three steps:
//   1. W1 = the archive's watermark.
//   2. XRANGE Redis for the window from max(start, W1+1), COUNT n+1. Ids <= W1 are not needed
//      from Redis: by (b) the archive has them.
//   3. The archive: W2 (>= W1, by monotony) and the window's entries <= W2, n+1 of them, as one
//      snapshot would give them (read in chunks that add up to the first chunk's snapshot:
//      ReadArchive says why).
// The result takes the archive's entries (all <= W2) and Redis's entries > W2. Every id <= W2 is
// in the archive snapshot by (b). Every id > W2 that existed when step 2 ran was still in Redis
// then: any trim before step 2 cut at most the W committed before it, which is <= W2 because W2
// was read later and W only grows (a). Nothing is counted twice because the two parts are split
// at W2. The window's first n+1 entries are therefore exact; the (n+1)th only tells whether
// `next` is set. (Redis entries <= W2 that step 2 returned are dropped; they are all in the
// archive part, so the archive part plus the rest still holds at least n+1 entries when Redis
// returned n+1.)
//
// Byte budget (kPageByteBudget): step 2 reads Redis in chunks, all before step 3, so the argument
// above holds for their union; it stops once the chunks hold the budget, at an id L. The Redis
// part is then exact only up to L: every entry the merge keeps is <= max(L, W2), and the window
// is exact up to there, so `next` is set (the client continues after the last entry kept). The
// merged list is then cut where its field bytes reach the budget; any prefix of an exact list is
// exact, and `next` is its last id. Step 3 stops the same way at an id A <= W2 once its chunks
// hold the budget; the archive part is then exact up to A and the Redis part (all above W2) is
// dropped, so the page ends at A. (The archive part then already holds the budget, so the final
// cut would mostly drop the Redis part anyway; dropping it is what keeps the page exact.)

#include "sidecar/log/log_reader.h"

#include <algorithm>

#include "sidecar/log/archive_store.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::log {
namespace {

constexpr int kMaxCount = 10000;
// Redis and the archive are read in chunks: the first small (entry sizes are unknown), the next
// sized by the average entry so far to about the budget left, and never more than twice the
// entries read so far: a few small entries followed by large ones cannot make one reply hold
// thousands of large entries (the overshoot of a reply is bounded by the entries already read).
constexpr int kFirstChunk = 16;
constexpr int kMaxChunk = 1000;

// The next chunk after `read` entries holding `bytes`, of at most `most` entries.
int NextChunk(size_t budget, size_t bytes, size_t read, size_t most) {
  const size_t average = bytes / std::max<size_t>(read, 1) + 1;
  const size_t fits = budget > bytes ? (budget - bytes) / average + 1 : 1;
  return static_cast<int>(std::clamp<size_t>(std::min(fits, 2 * read), 1, most));
}

size_t FieldBytes(const StreamEntry& entry) {
  size_t bytes = 0;
  for (const auto& [name, value] : entry.fields) bytes += name.size() + value.size();
  return bytes;
}

StatusOr<EntryId> ValidId(const std::string& text, const char* what) {
  auto id = ParseId(text);
  if (!id) {
    return Status(StatusCode::kInvalid, std::string(what) + " must be an entry id like " +
                                            "1764513000000-0 (got \"" + PrintableOneLine(text) +
                                            "\")");
  }
  return *id;
}

// An archive failure as the reader reports it (kArchiveErrorPrefix).
Status FromArchive(const Status& status) {
  return Status(status.code(), std::string(kArchiveErrorPrefix) + status.message());
}

}  // namespace

LogReader::LogReader(redis::Session* session, ArchiveStore* archive, size_t page_byte_budget)
    : session_(session), archive_(archive), budget_(page_byte_budget) {}

// Step 3 of Read, byte-bounded like step 2: the first archive read is one snapshot that fixes
// W2; the chunks after it read only ids <= W2, which no later fold changes (a fold inserts an id
// <= W only when it is already there: (b) above), so their union is that snapshot's window.
// Stops at *cut once the entries hold the page's byte budget.
StatusOr<std::vector<StreamEntry>> LogReader::ReadArchive(const std::string& stream, EntryId start,
                                                          std::optional<EntryId> until, int want,
                                                          EntryId* w2,
                                                          std::optional<EntryId>* cut) {
  std::vector<StreamEntry> entries;
  size_t bytes = 0;
  int chunk = kFirstChunk;
  // `after` of the archive is exclusive; ids start above 0-0, so 0-0 excludes nothing real.
  EntryId after = Predecessor(start).value_or(kMinId);
  bool first = true;
  while (static_cast<int>(entries.size()) < want) {
    const int ask = std::min(chunk, want - static_cast<int>(entries.size()));
    std::optional<EntryId> bound = until;
    if (!first) {
      const std::optional<EntryId> above_w2 = Successor(*w2);
      if (above_w2 && (!bound || *above_w2 < *bound)) bound = above_w2;
    }
    auto archived =
        archive_->Read(stream, FormatId(after), bound ? FormatId(*bound) : std::string(), ask);
    if (!archived.ok()) return FromArchive(archived.status());
    if (first) {
      auto parsed = ParseId(archived->watermark);
      if (!parsed) {
        return FromArchive(
            Status(StatusCode::kProtocol, "it holds a bad watermark " + archived->watermark));
      }
      *w2 = *parsed;
      first = false;
    }
    const int got_count = static_cast<int>(archived->entries.size());
    for (auto& entry : archived->entries) {
      auto id = ParseId(entry.id);
      if (!id || *id < start || *id > *w2 || (until && *id >= *until)) continue;
      bytes += FieldBytes(entry);
      entries.push_back(std::move(entry));
    }
    if (got_count < ask || entries.empty()) break;  // all of the window below W2
    auto last = ParseId(entries.back().id);
    if (!last || *last >= *w2) break;
    if (bytes >= budget_) {
      *cut = *last;
      break;
    }
    after = *last;
    // No kMaxChunk here: one archive query costs no Redis time.
    chunk = NextChunk(budget_, bytes, entries.size(), static_cast<size_t>(want));
  }
  return entries;
}

namespace {

// The ids a query's window covers: [start, until), until open when nullopt; `empty` when nothing
// can be in it.
struct Window {
  EntryId start;  // the first id the page may hold (inclusive)
  std::optional<EntryId> until;
  bool empty = false;
};

StatusOr<Window> WindowOf(const WindowQuery& query) {
  if (query.count < 1 || query.count > kMaxCount) {
    return Status(StatusCode::kInvalid, "count must be between 1 and " + std::to_string(kMaxCount) +
                                            " (got " + std::to_string(query.count) + ")");
  }
  auto since = ValidId(query.since, "since");
  if (!since.ok()) return since.status();
  Window window{*since};
  if (!query.after.empty()) {
    auto after = ValidId(query.after, "after");
    if (!after.ok()) return after.status();
    auto next = Successor(*after);
    if (!next) return Window{.empty = true};  // nothing is above the largest id
    window.start = std::max(window.start, *next);
  }
  if (!query.until.empty()) {
    auto parsed = ValidId(query.until, "until");
    if (!parsed.ok()) return parsed.status();
    window.until = *parsed;
    if (window.start >= *window.until) return Window{.empty = true};
  }
  return window;
}

// Cuts the merged page at `count` entries or at the byte budget, whichever comes first (at least
// one entry), and sets `next` where the window may hold more: after the cut, or above the part
// of the archive (archive_cut) or of Redis (redis_cut) that was read.
void CutPage(LogPage& page, int count, size_t budget, const std::optional<EntryId>& archive_cut,
             const std::optional<EntryId>& redis_cut, const EntryId& w2) {
  size_t keep = 0;
  size_t bytes = 0;
  while (keep < page.entries.size() && keep < static_cast<size_t>(count)) {
    const size_t entry_bytes = FieldBytes(page.entries[keep]);
    if (keep > 0 && bytes + entry_bytes > budget) break;
    bytes += entry_bytes;
    ++keep;
  }
  if (keep < page.entries.size()) {
    page.entries.resize(keep);
    page.next = page.entries.back().id;
  } else if (archive_cut) {
    page.next = page.entries.back().id;
  } else if (redis_cut) {
    // The window may hold more above what Redis was read for. With no entry kept (every entry
    // Redis gave was folded before step 3), continue above both parts read.
    page.next = page.entries.empty() ? FormatId(std::max(*redis_cut, w2)) : page.entries.back().id;
  }
}

}  // namespace

StatusOr<EntryId> LogReader::ArchiveWatermark(const std::string& stream) {
  if (archive_ == nullptr) return kMinId;
  auto w = archive_->Watermark(stream);
  if (!w.ok()) return FromArchive(w.status());
  auto parsed = ParseId(*w);
  if (!parsed) return FromArchive(Status(StatusCode::kProtocol, "it holds a bad watermark " + *w));
  return *parsed;
}

// Step 2 of Read: Redis from `from` up to `until`, `want` entries, in chunks until they hold the
// byte budget (then *cut is the last id read).
StatusOr<std::vector<StreamEntry>> LogReader::ReadRedis(const std::string& stream, EntryId from,
                                                        std::optional<EntryId> until, int want,
                                                        std::optional<EntryId>* cut) {
  if (!session_->connected()) {
    Millis retry_in{0};
    if (Status status = session_->ConnectOnce(&retry_in); !status.ok()) return status;
  }
  std::vector<StreamEntry> live;
  size_t live_bytes = 0;
  int chunk = kFirstChunk;
  while (static_cast<int>(live.size()) < want) {
    const int ask = std::min(chunk, want - static_cast<int>(live.size()));
    redis::Command xrange("XRANGE");
    xrange.Arg(stream).Arg(FormatId(from));
    if (until) {
      xrange.Arg("(" + FormatId(*until));
    } else {
      xrange.Arg("+");
    }
    xrange.Arg("COUNT").Arg(int64_t{ask});
    auto reply = session_->Run(xrange);
    if (!reply.ok()) {
      if (reply.status().IsServerError("WRONGTYPE")) {
        return Status(StatusCode::kServerError, "WRONGTYPE the Redis key \"" +
                                                    PrintableOneLine(stream) +
                                                    "\" holds another type, not a stream");
      }
      return reply.status();
    }
    auto got = redis::SubscriptionOps::ParseEntries(reply->view());
    const int got_count = static_cast<int>(got.size());
    for (auto& entry : got) {
      live_bytes += FieldBytes(entry);
      live.push_back(std::move(entry));
    }
    if (got_count < ask || static_cast<int>(live.size()) >= want) break;  // all of the window
    auto last = ParseId(live.back().id);
    auto above = last ? Successor(*last) : std::nullopt;
    if (!above) break;
    if (live_bytes >= budget_) {
      *cut = *last;
      break;
    }
    from = *above;
    chunk = NextChunk(budget_, live_bytes, live.size(), kMaxChunk);
  }
  return live;
}

StatusOr<LogPage> LogReader::Read(const std::string& stream, const WindowQuery& query) {
  auto window = WindowOf(query);
  if (!window.ok()) return window.status();
  if (window->empty) return LogPage{};
  const EntryId start = window->start;
  const std::optional<EntryId> until = window->until;
  const int want = query.count + 1;  // one more than a page: whether `next` is set

  // Step 1.
  auto w1 = ArchiveWatermark(stream);
  if (!w1.ok()) return w1.status();

  // Step 2.
  std::vector<StreamEntry> live;
  std::optional<EntryId> redis_cut;  // Redis was read only up to here (the byte budget)
  EntryId redis_from = start;
  if (archive_ != nullptr && *w1 >= start) {
    auto above = Successor(*w1);
    redis_from = above ? *above : kMaxId;
  }
  const bool redis_needed =
      (!until || redis_from < *until) && !(archive_ != nullptr && *w1 == kMaxId);
  if (redis_needed) {
    auto read = ReadRedis(stream, redis_from, until, want, &redis_cut);
    if (!read.ok()) return read.status();
    live = std::move(*read);
  }

  LogPage page;
  // Step 3.
  EntryId w2 = kMinId;
  std::optional<EntryId> archive_cut;  // the archive was read only up to here (the byte budget)
  if (archive_ != nullptr) {
    auto archived = ReadArchive(stream, start, until, want, &w2, &archive_cut);
    if (!archived.ok()) return archived.status();
    page.entries = std::move(*archived);
  }
  if (archive_cut) live.clear();  // entries above the cut and at or below W2 were not read
  for (auto& entry : live) {
    auto id = ParseId(entry.id);
    if (!id || (archive_ != nullptr && *id <= w2)) continue;
    page.entries.push_back(std::move(entry));
  }
  CutPage(page, query.count, budget_, archive_cut, redis_cut, w2);
  return page;
}

}  // namespace streamcar::log

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
//   3. One archive snapshot: W2 (>= W1, by monotony) and the window's entries <= W2, n+1 of them.
// The result takes the archive's entries (all <= W2) and Redis's entries > W2. Every id <= W2 is
// in the archive snapshot by (b). Every id > W2 that existed when step 2 ran was still in Redis
// then: any trim before step 2 cut at most the W committed before it, which is <= W2 because W2
// was read later and W only grows (a). Nothing is counted twice because the two parts are split
// at W2. The window's first n+1 entries are therefore exact; the (n+1)th only tells whether
// `next` is set. (Redis entries <= W2 that step 2 returned are dropped; they are all in the
// archive part, so the archive part plus the rest still holds at least n+1 entries when Redis
// returned n+1.)

#include "sidecar/log/log_reader.h"

#include "sidecar/log/archive_store.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/stream_ops.h"

namespace streamcar::log {
namespace {

constexpr int kMaxCount = 10000;

StatusOr<EntryId> ValidId(const std::string& text, const char* what) {
  auto id = ParseId(text);
  if (!id) {
    return Status(StatusCode::kInvalid, std::string(what) + " must be an entry id like " +
                                            "1764513000000-0 (got \"" + PrintableOneLine(text) +
                                            "\")");
  }
  return *id;
}

}  // namespace

LogReader::LogReader(redis::Session* session, ArchiveStore* archive)
    : session_(session), archive_(archive) {}

StatusOr<LogPage> LogReader::Read(const std::string& stream, const WindowQuery& query) {
  if (query.count < 1 || query.count > kMaxCount) {
    return Status(StatusCode::kInvalid, "count must be between 1 and " + std::to_string(kMaxCount) +
                                            " (got " + std::to_string(query.count) + ")");
  }
  auto since = ValidId(query.since, "since");
  if (!since.ok()) return since.status();
  // The first id the page may hold (inclusive).
  EntryId start = *since;
  if (!query.after.empty()) {
    auto after = ValidId(query.after, "after");
    if (!after.ok()) return after.status();
    auto next = Successor(*after);
    if (!next) return LogPage{};  // nothing is above the largest id
    start = std::max(start, *next);
  }
  std::optional<EntryId> until;
  if (!query.until.empty()) {
    auto parsed = ValidId(query.until, "until");
    if (!parsed.ok()) return parsed.status();
    until = *parsed;
    if (start >= *until) return LogPage{};
  }
  const int want = query.count + 1;  // one more than a page: whether `next` is set

  // Step 1.
  EntryId w1 = kMinId;
  if (archive_ != nullptr) {
    auto w = archive_->Watermark(stream);
    if (!w.ok()) return w.status();
    auto parsed = ParseId(*w);
    if (!parsed) return Status(StatusCode::kProtocol, "the archive holds a bad watermark " + *w);
    w1 = *parsed;
  }

  // Step 2.
  std::vector<StreamEntry> live;
  EntryId redis_from = start;
  if (archive_ != nullptr && w1 >= start) {
    auto above = Successor(w1);
    redis_from = above ? *above : kMaxId;
  }
  const bool redis_needed =
      (!until || redis_from < *until) && !(archive_ != nullptr && w1 == kMaxId);
  if (redis_needed) {
    if (!session_->connected()) {
      Millis retry_in{0};
      if (Status status = session_->ConnectOnce(&retry_in); !status.ok()) return status;
    }
    redis::Command xrange("XRANGE");
    xrange.Arg(stream).Arg(FormatId(redis_from));
    if (until) {
      xrange.Arg("(" + FormatId(*until));
    } else {
      xrange.Arg("+");
    }
    xrange.Arg("COUNT").Arg(int64_t{want});
    auto reply = session_->Run(xrange);
    if (!reply.ok()) {
      if (reply.status().IsServerError("WRONGTYPE")) {
        return Status(StatusCode::kServerError, "WRONGTYPE the Redis key \"" +
                                                    PrintableOneLine(stream) +
                                                    "\" holds another type, not a stream");
      }
      return reply.status();
    }
    live = redis::StreamOps::ParseEntries(reply->view());
  }

  LogPage page;
  // Step 3.
  EntryId w2 = kMinId;
  if (archive_ != nullptr) {
    // `after` of the archive is exclusive; ids start above 0-0, so 0-0 excludes nothing real.
    const std::string archive_after = FormatId(Predecessor(start).value_or(kMinId));
    auto archived =
        archive_->Read(stream, archive_after, until ? FormatId(*until) : std::string(), want);
    if (!archived.ok()) return archived.status();
    auto parsed = ParseId(archived->watermark);
    if (!parsed) {
      return Status(StatusCode::kProtocol,
                    "the archive holds a bad watermark " + archived->watermark);
    }
    w2 = *parsed;
    for (auto& entry : archived->entries) {
      auto id = ParseId(entry.id);
      if (!id || *id < start || *id > w2 || (until && *id >= *until)) continue;
      page.entries.push_back(std::move(entry));
    }
  }
  for (auto& entry : live) {
    auto id = ParseId(entry.id);
    if (!id || (archive_ != nullptr && *id <= w2)) continue;
    page.entries.push_back(std::move(entry));
  }
  if (static_cast<int>(page.entries.size()) > query.count) {
    page.entries.resize(static_cast<size_t>(query.count));
    page.next = page.entries.back().id;
  }
  return page;
}

}  // namespace streamcar::log

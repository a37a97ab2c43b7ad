#include "sidecar/log/trim_plan.h"

#include <algorithm>
#include <charconv>

#include "sidecar/log/entry_id.h"

namespace streamcar::log {
namespace {

// Entries per XRANGE while paging to a position or counting: a reply of bounded size.
constexpr int64_t kPage = 1000;

// TIME on the node that holds `stream`: a keyless TIME would go to any node of a cluster, so the
// script declares the stream as its key (and only reads the clock). EVAL, not EVALSHA: it runs
// once per command, and a one-shot session has nothing loaded.
constexpr const char* kStreamTimeLua = "local t = redis.call('TIME') return {t[1], t[2]}";

std::optional<int64_t> ToInt64(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The ids of one XRANGE (or XREVRANGE) reply, in its order.
StatusOr<std::vector<EntryId>> IdsOf(const redis::ReplyView& reply) {
  std::vector<EntryId> ids;
  for (size_t i = 0; i < reply.Size(); ++i) {
    auto id = ParseId(reply[i][0].Str());
    if (!id) return Status(StatusCode::kProtocol, "XRANGE answered a bad id");
    ids.push_back(*id);
  }
  return ids;
}

// Up to `count` ids after `after` (exclusive; none: from the head), oldest first, or before
// `after` newest first when `from_tail`. An empty answer at the stream's end.
StatusOr<std::vector<EntryId>> Page(redis::Session& session, const std::string& stream,
                                    const std::optional<EntryId>& after, bool from_tail,
                                    int64_t count, const std::optional<EntryId>& through = {}) {
  std::string start = from_tail ? "+" : "-";
  if (after) {
    const auto next = from_tail ? Predecessor(*after) : Successor(*after);
    if (!next) return std::vector<EntryId>{};
    start = FormatId(*next);
  }
  const std::string end = through ? FormatId(*through) : (from_tail ? "-" : "+");
  auto reply = session.Run(redis::Command(from_tail ? "XREVRANGE" : "XRANGE")
                               .Arg(stream)
                               .Arg(start)
                               .Arg(end)
                               .Arg("COUNT")
                               .Arg(count));
  if (!reply.ok()) return reply.status();
  return IdsOf(reply->view());
}

// The id of the n-th entry (1-based) from the head, or from the tail; none when the stream is
// shorter than n (it was trimmed meanwhile).
StatusOr<std::optional<EntryId>> NthId(redis::Session& session, const std::string& stream,
                                       int64_t n, bool from_tail) {
  std::optional<EntryId> at;
  while (n > 0) {
    const int64_t ask = std::min(n, kPage);
    auto ids = Page(session, stream, at, from_tail, ask);
    if (!ids.ok()) return ids.status();
    if (static_cast<int64_t>(ids->size()) < ask) return std::optional<EntryId>{};
    at = ids->back();
    n -= ask;
  }
  return at;
}

// How many entries are at or below `last`, by paging through their ids.
StatusOr<int64_t> CountThrough(redis::Session& session, const std::string& stream,
                               const EntryId& last) {
  int64_t count = 0;
  std::optional<EntryId> at;
  while (true) {
    auto ids = Page(session, stream, at, false, kPage, last);
    if (!ids.ok()) return ids.status();
    count += static_cast<int64_t>(ids->size());
    if (static_cast<int64_t>(ids->size()) < kPage) return count;
    at = ids->back();
  }
}

}  // namespace

StatusOr<EntryId> MinIdOf(redis::Session& session, const std::string& stream,
                          const TrimPoint& point) {
  if (point.kind == TrimPoint::Kind::kMinId) return point.min_id;
  auto reply = session.Run(redis::Command("EVAL").Arg(kStreamTimeLua).Arg(1).Arg(stream));
  if (!reply.ok()) return reply.status();
  const auto view = reply->view();
  const auto seconds = view.IsArray() && view.Size() == 2 ? ToInt64(view[0].Str()) : std::nullopt;
  const auto micros = view.IsArray() && view.Size() == 2 ? ToInt64(view[1].Str()) : std::nullopt;
  if (!seconds || !micros) return Status(StatusCode::kProtocol, "TIME answered no time");
  const int64_t cut = *seconds * 1000 + *micros / 1000 - point.max_age.count();
  return EntryId{static_cast<uint64_t>(std::max<int64_t>(0, cut)), 0};
}

StatusOr<DueSpan> DueSpanOf(redis::Session& session, const std::string& stream,
                            const TrimPoint& point, bool count) {
  DueSpan span;
  auto length = session.Run(redis::Command("XLEN").Arg(stream));
  if (!length.ok()) return length.status();
  span.length = length->view().Integer();
  if (point.kind == TrimPoint::Kind::kMaxLen) {
    span.count = std::max<int64_t>(0, span.length - point.max_len);
    if (span.count == 0) return span;
    // The newest due entry is the count-th from the head, or the (max_len+1)-th from the tail.
    const bool from_tail = point.max_len + 1 < span.count;
    auto last = NthId(session, stream, from_tail ? point.max_len + 1 : span.count, from_tail);
    if (!last.ok()) return last.status();
    span.last = *last;
    if (!span.last) span.count = 0;  // trimmed meanwhile: nothing left to say
    return span;
  }
  auto cut = MinIdOf(session, stream, point);
  if (!cut.ok()) return cut.status();
  span.count = 0;
  // The newest entry below the cut (none for a cut at 0-0).
  auto newest = Page(session, stream, *cut, true, 1);
  if (!newest.ok()) return newest.status();
  if (newest->empty()) return span;
  span.last = newest->front();
  if (!count) {
    span.count = -1;
    return span;
  }
  auto counted = CountThrough(session, stream, *span.last);
  if (!counted.ok()) return counted.status();
  span.count = *counted;
  return span;
}

}  // namespace streamcar::log

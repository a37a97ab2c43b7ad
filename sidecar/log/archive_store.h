#pragma once
// The archive's storage seam (SPEC section 10): trimmed entries folded below a watermark W.
// One interface, SQLite (embedded, one replica) and PostgreSQL (shared by many) behind it, one
// conformance suite (tests/integration/archive_conformance_test.cc) run against both.
//
// Thread-safety: every method may be called from any thread; an implementation serializes what
// it must.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sidecar/common/status.h"
#include "sidecar/common/stream_entry.h"

namespace streamcar::log {

// What one Fold did.
struct FoldResult {
  std::string watermark;  // W after the transaction
  int64_t inserted = 0;   // entries that were not archived before (a repeated fold inserts 0)
};

struct ArchivePage {
  std::string watermark;             // W when the page was read ("0-0": nothing folded)
  std::vector<StreamEntry> entries;  // ascending, all at or below `watermark`
};

class ArchiveStore {
 public:
  virtual ~ArchiveStore() = default;

  // In one transaction: checks that `fence_token` is at least the highest token this stream's
  // folds have used (else kFatal "fenced", writing nothing), records it, inserts `entries`
  // (ascending ids; an id already archived is kept as it was: the fold is idempotent), and
  // advances W to the highest id folded if that is above W (W never moves backwards). Returns W
  // after the transaction and how many entries were new. kInvalid (writing nothing) for an id
  // that is not "<ms>-<seq>"; kIo when the store cannot be reached (the transaction may or may
  // not have committed: folding again is safe).
  virtual StatusOr<FoldResult> Fold(const std::string& stream,
                                    const std::vector<StreamEntry>& entries,
                                    int64_t fence_token) = 0;

  // W of `stream` ("0-0" when nothing was folded).
  virtual StatusOr<std::string> Watermark(const std::string& stream) = 0;

  // In one read snapshot: W and up to `count` archived entries with `after` < id < `until`
  // ("" = no upper bound; `after` "" = from the first), ascending. `count` is at least 1.
  virtual StatusOr<ArchivePage> Read(const std::string& stream, const std::string& after,
                                     const std::string& until, int count) = 0;
};

// Opens the backend `url` names: sqlite:///absolute/path (created if missing, WAL mode) or
// postgres://user:password@host:port/db (libpq URI; the schema is created if missing). kInvalid
// for any other scheme, and for postgres:// in a build without PostgreSQL support (saying so);
// kIo when the store cannot be reached.
StatusOr<std::unique_ptr<ArchiveStore>> OpenArchive(const std::string& url);

}  // namespace streamcar::log

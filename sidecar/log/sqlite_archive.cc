#include "sidecar/log/sqlite_archive.h"

#include <sqlite3.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

#include "sidecar/common/backoff.h"
#include "sidecar/log/archive_codec.h"

namespace streamcar::log {
namespace {

// A writer waits this long for another process's transaction (busy_timeout) before a fold
// reports kTimeout; the next beat tries again.
constexpr int kBusyTimeoutMs = 10000;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS streamcar_archive_entries (
  stream TEXT NOT NULL,
  ms INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  fields BLOB NOT NULL,
  PRIMARY KEY (stream, ms, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS streamcar_archive_meta (
  stream TEXT PRIMARY KEY,
  watermark_ms INTEGER NOT NULL,
  watermark_seq INTEGER NOT NULL,
  fence_token INTEGER NOT NULL
);
)sql";

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

bool IsBusy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

Status Error(sqlite3* db, const std::string& what) {
  const StatusCode status =
      IsBusy(sqlite3_extended_errcode(db)) ? StatusCode::kTimeout : StatusCode::kIo;
  return Status(status, "sqlite archive: " + what + ": " + sqlite3_errmsg(db));
}

// Runs `sql`, trying again while another connection holds the lock, for up to kBusyTimeoutMs.
// Needed for the steps of opening: SQLite answers a switch to WAL, a WAL recovery and a schema
// change that races another connection's with SQLITE_BUSY at once, without its busy handler, so
// two processes (or a reader and the folder) opening one file together would fail one of them.
// The pauses are the reconnect backoff's (jittered, so racing openers fall out of step).
int ExecRetryingBusy(sqlite3* db, const char* sql) {
  const auto deadline = SteadyClock::now() + Millis(kBusyTimeoutMs);
  for (int step = 0;; ++step) {
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    const Millis pause = ReconnectDelay(step, Millis(1), Millis(50), UnitRandom());
    if (!IsBusy(rc) || SteadyClock::now() + pause > deadline) return rc;
    std::this_thread::sleep_for(pause);
  }
}

StatusOr<Db> OpenConnection(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return Status(StatusCode::kIo, "sqlite archive: cannot open " + path + ": " +
                                       (raw != nullptr ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  // WAL: readers see a snapshot while a fold writes; FULL: a commit is on disk when it returns
  // (the folder trims Redis right after, so a lost commit would be lost entries).
  const char* pragmas = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;";
  if (ExecRetryingBusy(db.get(), pragmas) != SQLITE_OK) {
    return Error(db.get(), "cannot configure " + path);
  }
  return db;
}

class SqliteArchive : public ArchiveStore {
 public:
  SqliteArchive(Db writer, Db reader) : writer_(std::move(writer)), reader_(std::move(reader)) {}

  Status Prepare() {
    if (ExecRetryingBusy(writer_.get(), kSchema) != SQLITE_OK) {
      return Error(writer_.get(), "cannot create the schema");
    }
    auto prepare = [](sqlite3* db, const char* sql, Stmt* out) -> Status {
      sqlite3_stmt* raw = nullptr;
      if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &raw, nullptr) != SQLITE_OK) {
        return Error(db, "cannot prepare a statement");
      }
      out->reset(raw);
      return Status::Ok();
    };
    const std::pair<const char*, Stmt*> writer_statements[] = {
        {"BEGIN IMMEDIATE", &begin_immediate_},
        {"COMMIT", &commit_},
        {"ROLLBACK", &rollback_},
        {"SELECT watermark_ms, watermark_seq, fence_token FROM streamcar_archive_meta "
         "WHERE stream = ?1",
         &select_meta_},
        {"INSERT INTO streamcar_archive_meta (stream, watermark_ms, watermark_seq, fence_token) "
         "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (stream) DO UPDATE SET watermark_ms = ?2, "
         "watermark_seq = ?3, fence_token = ?4",
         &upsert_meta_},
        {"INSERT OR IGNORE INTO streamcar_archive_entries (stream, ms, seq, fields) "
         "VALUES (?1, ?2, ?3, ?4)",
         &insert_entry_},
    };
    for (const auto& [sql, stmt] : writer_statements) {
      if (Status s = prepare(writer_.get(), sql, stmt); !s.ok()) return s;
    }
    const std::pair<const char*, Stmt*> reader_statements[] = {
        {"BEGIN", &read_begin_},
        {"COMMIT", &read_commit_},
        {"SELECT watermark_ms, watermark_seq FROM streamcar_archive_meta WHERE stream = ?1",
         &read_meta_},
        {"SELECT ms, seq, fields FROM streamcar_archive_entries WHERE stream = ?1 AND "
         "(ms, seq) >= (?2, ?3) AND (ms, seq) <= (?4, ?5) ORDER BY ms, seq LIMIT ?6",
         &read_entries_},
    };
    for (const auto& [sql, stmt] : reader_statements) {
      if (Status s = prepare(reader_.get(), sql, stmt); !s.ok()) return s;
    }
    return Status::Ok();
  }

  StatusOr<FoldResult> Fold(const std::string& stream, const std::vector<StreamEntry>& entries,
                            int64_t fence_token) override {
    auto ids = FoldIds(entries);
    if (!ids.ok()) return ids.status();
    std::lock_guard lock(writer_mutex_);
    sqlite3* db = writer_.get();
    if (!Step(begin_immediate_.get())) return Error(db, "cannot begin a fold");
    auto result = FoldInTransaction(stream, entries, *ids, fence_token);
    if (!result.ok()) {
      Step(rollback_.get());
      return result;
    }
    if (!Step(commit_.get())) {
      Status status = Error(db, "cannot commit a fold");
      if (sqlite3_get_autocommit(db) == 0) Step(rollback_.get());
      return status;
    }
    return result;
  }

  StatusOr<std::string> Watermark(const std::string& stream) override {
    std::lock_guard lock(reader_mutex_);
    auto w = ReadWatermark(stream);
    if (!w.ok()) return w.status();
    return w->ToString();
  }

  StatusOr<ArchivePage> Read(const std::string& stream, const std::string& after,
                             const std::string& until, int count) override {
    auto range = ReadRange(after, until);
    if (!range.ok()) return range.status();
    std::lock_guard lock(reader_mutex_);
    sqlite3* db = reader_.get();
    // One read transaction: W and the rows come from the same WAL snapshot.
    if (!Step(read_begin_.get())) return Error(db, "cannot begin a read");
    auto page = ReadInTransaction(stream, *range, count);
    Step(read_commit_.get());
    return page;
  }

 private:
  // Runs a statement that returns no rows to completion; false on an error.
  static bool Step(sqlite3_stmt* stmt) {
    const int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_DONE || rc == SQLITE_ROW;
  }

  StatusOr<FoldResult> FoldInTransaction(const std::string& stream,
                                         const std::vector<StreamEntry>& entries,
                                         const std::vector<EntryId>& ids, int64_t fence_token) {
    sqlite3* db = writer_.get();
    EntryId watermark{0, 0};
    int64_t stored_token = 0;
    sqlite3_stmt* meta = select_meta_.get();
    sqlite3_bind_text(meta, 1, stream.data(), static_cast<int>(stream.size()), SQLITE_STATIC);
    int rc = sqlite3_step(meta);
    if (rc == SQLITE_ROW) {
      watermark = {FromStored(sqlite3_column_int64(meta, 0)),
                   FromStored(sqlite3_column_int64(meta, 1))};
      stored_token = sqlite3_column_int64(meta, 2);
    }
    sqlite3_reset(meta);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error(db, "cannot read the watermark");
    if (fence_token < stored_token) {
      return Status(StatusCode::kFatal, "fenced: stream " + stream + " was folded with token " +
                                            std::to_string(stored_token) + ", this folder has " +
                                            std::to_string(fence_token));
    }
    FoldResult result;
    sqlite3_stmt* insert = insert_entry_.get();
    std::string blob;
    for (size_t i = 0; i < entries.size(); ++i) {
      blob = EncodeFields(entries[i].fields);
      sqlite3_bind_text(insert, 1, stream.data(), static_cast<int>(stream.size()), SQLITE_STATIC);
      sqlite3_bind_int64(insert, 2, ToStored(ids[i].ms));
      sqlite3_bind_int64(insert, 3, ToStored(ids[i].seq));
      sqlite3_bind_blob64(insert, 4, blob.data(), blob.size(), SQLITE_STATIC);
      rc = sqlite3_step(insert);
      sqlite3_reset(insert);
      if (rc != SQLITE_DONE) return Error(db, "cannot insert an entry");
      result.inserted += sqlite3_changes(db);
      if (ids[i] > watermark) watermark = ids[i];
    }
    sqlite3_stmt* upsert = upsert_meta_.get();
    sqlite3_bind_text(upsert, 1, stream.data(), static_cast<int>(stream.size()), SQLITE_STATIC);
    sqlite3_bind_int64(upsert, 2, ToStored(watermark.ms));
    sqlite3_bind_int64(upsert, 3, ToStored(watermark.seq));
    sqlite3_bind_int64(upsert, 4, fence_token);
    rc = sqlite3_step(upsert);
    sqlite3_reset(upsert);
    if (rc != SQLITE_DONE) return Error(db, "cannot advance the watermark");
    result.watermark = watermark.ToString();
    return result;
  }

  StatusOr<EntryId> ReadWatermark(const std::string& stream) {
    sqlite3_stmt* meta = read_meta_.get();
    sqlite3_bind_text(meta, 1, stream.data(), static_cast<int>(stream.size()), SQLITE_STATIC);
    const int rc = sqlite3_step(meta);
    EntryId watermark{0, 0};
    if (rc == SQLITE_ROW) {
      watermark = {FromStored(sqlite3_column_int64(meta, 0)),
                   FromStored(sqlite3_column_int64(meta, 1))};
    }
    sqlite3_reset(meta);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return Error(reader_.get(), "cannot read W");
    return watermark;
  }

  StatusOr<ArchivePage> ReadInTransaction(const std::string& stream,
                                          const std::optional<IdRange>& range, int count) {
    auto watermark = ReadWatermark(stream);
    if (!watermark.ok()) return watermark.status();
    ArchivePage page;
    page.watermark = watermark->ToString();
    if (!range) return page;
    sqlite3_stmt* select = read_entries_.get();
    sqlite3_bind_text(select, 1, stream.data(), static_cast<int>(stream.size()), SQLITE_STATIC);
    sqlite3_bind_int64(select, 2, ToStored(range->first.ms));
    sqlite3_bind_int64(select, 3, ToStored(range->first.seq));
    sqlite3_bind_int64(select, 4, ToStored(range->last.ms));
    sqlite3_bind_int64(select, 5, ToStored(range->last.seq));
    sqlite3_bind_int(select, 6, std::max(count, 1));
    Status status = Status::Ok();
    int rc = SQLITE_ROW;
    while ((rc = sqlite3_step(select)) == SQLITE_ROW) {
      StreamEntry entry;
      entry.id = EntryId{FromStored(sqlite3_column_int64(select, 0)),
                         FromStored(sqlite3_column_int64(select, 1))}
                     .ToString();
      const auto* data = static_cast<const char*>(sqlite3_column_blob(select, 2));
      auto fields = DecodeFields(
          std::string_view(data != nullptr ? data : "", sqlite3_column_bytes(select, 2)));
      if (!fields.ok()) {
        status = fields.status();
        break;
      }
      entry.fields = std::move(*fields);
      page.entries.push_back(std::move(entry));
    }
    sqlite3_reset(select);
    sqlite3_clear_bindings(select);
    if (!status.ok()) return status;
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return Error(reader_.get(), "cannot read entries");
    return page;
  }

  std::mutex writer_mutex_;
  Db writer_;
  Stmt begin_immediate_, commit_, rollback_, select_meta_, upsert_meta_, insert_entry_;
  std::mutex reader_mutex_;
  Db reader_;
  Stmt read_begin_, read_commit_, read_meta_, read_entries_;
};

}  // namespace

StatusOr<std::unique_ptr<ArchiveStore>> OpenSqliteArchive(const std::string& path) {
  auto writer = OpenConnection(path);
  if (!writer.ok()) return writer.status();
  auto reader = OpenConnection(path);
  if (!reader.ok()) return reader.status();
  auto store = std::make_unique<SqliteArchive>(std::move(*writer), std::move(*reader));
  if (Status s = store->Prepare(); !s.ok()) return s;
  return std::unique_ptr<ArchiveStore>(std::move(store));
}

}  // namespace streamcar::log

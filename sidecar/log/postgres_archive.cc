#include "sidecar/log/postgres_archive.h"

#include <arpa/inet.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>

#include "sidecar/log/archive_codec.h"

namespace streamcar::log {
namespace {

// Rows per INSERT: 3 parameters each plus the stream, under PostgreSQL's 65535 parameters.
constexpr size_t kRowsPerInsert = 2000;

// Schema creation races between replicas starting at once (CREATE TABLE IF NOT EXISTS is not
// atomic against itself), so it runs under a transaction-scoped advisory lock.
constexpr const char* kSchema = R"sql(
BEGIN;
SET LOCAL client_min_messages = warning;
SELECT pg_advisory_xact_lock(7405143291664853001);
CREATE TABLE IF NOT EXISTS streamcar_archive_entries (
  stream TEXT NOT NULL,
  ms BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  fields BYTEA NOT NULL,
  PRIMARY KEY (stream, ms, seq)
);
CREATE TABLE IF NOT EXISTS streamcar_archive_meta (
  stream TEXT PRIMARY KEY,
  watermark_ms BIGINT NOT NULL,
  watermark_seq BIGINT NOT NULL,
  fence_token BIGINT NOT NULL
);
COMMIT;
)sql";

struct ResultClearer {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultClearer>;

// Parameters of one statement: text or binary, kept alive until it ran.
class Params {
 public:
  void Text(const std::string& value) { Add(value, 0); }
  void Int64(int64_t value) {
    uint64_t big_endian = 0;
    const auto v = static_cast<uint64_t>(value);
    for (int i = 0; i < 8; ++i) {
      reinterpret_cast<unsigned char*>(&big_endian)[i] =
          static_cast<unsigned char>(v >> (56 - 8 * i));
    }
    Add(std::string(reinterpret_cast<const char*>(&big_endian), 8), 1);
  }
  void Bytes(std::string value) { Add(std::move(value), 1); }

  int size() const { return static_cast<int>(values_.size()); }
  std::vector<const char*> pointers() const {
    std::vector<const char*> out;
    out.reserve(values_.size());
    for (const auto& v : values_) out.push_back(v.data());
    return out;
  }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  void Add(std::string value, int format) {
    lengths_.push_back(static_cast<int>(value.size()));
    formats_.push_back(format);
    values_.push_back(std::move(value));
  }
  std::vector<std::string> values_;
  std::vector<int> lengths_;
  std::vector<int> formats_;
};

int64_t BinaryInt64(const PGresult* result, int row, int column) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(PQgetvalue(result, row, column));
  uint64_t v = 0;
  if (PQgetlength(result, row, column) != 8) return 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | bytes[i];
  return static_cast<int64_t>(v);
}

// One libpq connection that comes back: dropped when the server goes away, made again on the
// next use.
class Connection {
 public:
  explicit Connection(std::string dsn) : dsn_(std::move(dsn)) {}
  ~Connection() { Drop(); }

  Status Ensure() {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
    Drop();
    // The user's DSN is expanded last, so whatever it sets wins. The defaults bound every wait:
    // a network partition gives kIo after tens of seconds instead of blocking the retention
    // beat (and its watchdog) forever: TCP keepalives and tcp_user_timeout for a silent peer,
    // statement_timeout for a server that accepts but does not answer.
    const char* keywords[] = {"connect_timeout",
                              "fallback_application_name",
                              "keepalives",
                              "keepalives_idle",
                              "keepalives_interval",
                              "keepalives_count",
                              "tcp_user_timeout",
                              "options",
                              "dbname",
                              nullptr};
    const char* values[] = {"10",         "streamcar", "1",     "10",
                            "5",          "3",         "30000", "-c statement_timeout=30000",
                            dsn_.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, 1);
    if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) {
      Status status(StatusCode::kIo, std::string("postgres archive: cannot connect: ") +
                                         (conn_ != nullptr ? PQerrorMessage(conn_) : "no memory"));
      Drop();
      return status;
    }
    return Status::Ok();
  }

  // Runs `sql`; the result when its status is `expected`, else kIo with the server's message
  // (and the connection dropped when it was lost).
  StatusOr<Result> Exec(const char* sql, const Params& params, ExecStatusType expected,
                        int result_format = 0) {
    if (conn_ == nullptr) return Status(StatusCode::kIo, "postgres archive: not connected");
    auto pointers = params.pointers();
    Result result(PQexecParams(conn_, sql, params.size(), nullptr, pointers.data(),
                               params.lengths(), params.formats(), result_format));
    if (result != nullptr && PQresultStatus(result.get()) == expected) return result;
    Status status(StatusCode::kIo, std::string("postgres archive: ") +
                                       (result != nullptr ? PQresultErrorMessage(result.get())
                                                          : PQerrorMessage(conn_)));
    if (PQstatus(conn_) != CONNECTION_OK) Drop();
    return status;
  }
  Status Run(const char* sql) {
    auto result = Exec(sql, Params(), PGRES_COMMAND_OK);
    return result.ok() ? Status::Ok() : result.status();
  }
  // After a failure inside a transaction: ROLLBACK when the connection is still there.
  void Abandon() {
    if (conn_ != nullptr && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
      const Result rollback(PQexec(conn_, "ROLLBACK"));
      if (PQstatus(conn_) != CONNECTION_OK) Drop();
    }
  }
  // BEGIN on a connection that may have been lost since its last use: one fresh try then, as
  // nothing of the transaction was sent yet.
  Status Begin(const char* begin_sql) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (Status s = Ensure(); !s.ok()) return s;
      Status s = Run(begin_sql);
      if (s.ok() || conn_ != nullptr) return s;
    }
    return Status(StatusCode::kIo, "postgres archive: connection lost");
  }
  PGconn* get() const { return conn_; }

 private:
  void Drop() {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
  }
  std::string dsn_;
  PGconn* conn_ = nullptr;
};

class PostgresArchive : public ArchiveStore {
 public:
  explicit PostgresArchive(const std::string& dsn) : writer_(dsn), reader_(dsn) {}

  Status Open() {
    if (Status s = writer_.Ensure(); !s.ok()) return s;
    Result result(PQexec(writer_.get(), kSchema));
    if (result == nullptr || PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
      Status status(StatusCode::kIo, std::string("postgres archive: cannot create the schema: ") +
                                         PQerrorMessage(writer_.get()));
      writer_.Abandon();
      return status;
    }
    return Status::Ok();
  }

  StatusOr<FoldResult> Fold(const std::string& stream, const std::vector<StreamEntry>& entries,
                            int64_t fence_token) override {
    auto ids = FoldIds(entries);
    if (!ids.ok()) return ids.status();
    std::lock_guard lock(writer_mutex_);
    if (Status s = writer_.Begin("BEGIN"); !s.ok()) return s;
    auto result = FoldInTransaction(stream, entries, *ids, fence_token);
    if (!result.ok()) {
      writer_.Abandon();
      return result;
    }
    if (Status s = writer_.Run("COMMIT"); !s.ok()) {
      writer_.Abandon();
      return s;
    }
    return result;
  }

  StatusOr<std::string> Watermark(const std::string& stream) override {
    auto page = Read(stream, "", "0-1", 1);
    if (!page.ok()) return page.status();
    return page->watermark;
  }

  StatusOr<ArchivePage> Read(const std::string& stream, const std::string& after,
                             const std::string& until, int count) override {
    auto range = ReadRange(after, until);
    if (!range.ok()) return range.status();
    std::lock_guard lock(reader_mutex_);
    // One snapshot for W and the rows.
    if (Status s = reader_.Begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !s.ok()) {
      return s;
    }
    auto page = ReadInTransaction(stream, *range, count);
    if (!page.ok()) {
      reader_.Abandon();
      return page;
    }
    if (Status s = reader_.Run("COMMIT"); !s.ok()) {
      reader_.Abandon();
      return s;
    }
    return page;
  }

 private:
  StatusOr<FoldResult> FoldInTransaction(const std::string& stream,
                                         const std::vector<StreamEntry>& entries,
                                         const std::vector<EntryId>& ids, int64_t fence_token) {
    Params key;
    key.Text(stream);
    key.Int64(ToStored(0));
    auto created = writer_.Exec(
        "INSERT INTO streamcar_archive_meta (stream, watermark_ms, watermark_seq, fence_token) "
        "VALUES ($1, $2, $2, 0) ON CONFLICT (stream) DO NOTHING",
        key, PGRES_COMMAND_OK);
    if (!created.ok()) return created.status();
    // The row lock serializes folders of this stream: the token check and the writes below see
    // no concurrent fold.
    Params only_stream;
    only_stream.Text(stream);
    auto meta = writer_.Exec(
        "SELECT watermark_ms, watermark_seq, fence_token FROM streamcar_archive_meta "
        "WHERE stream = $1 FOR UPDATE",
        only_stream, PGRES_TUPLES_OK, 1);
    if (!meta.ok()) return meta.status();
    if (PQntuples(meta->get()) != 1) {
      return Status(StatusCode::kIo, "postgres archive: the watermark row is missing");
    }
    EntryId watermark{FromStored(BinaryInt64(meta->get(), 0, 0)),
                      FromStored(BinaryInt64(meta->get(), 0, 1))};
    const int64_t stored_token = BinaryInt64(meta->get(), 0, 2);
    if (fence_token < stored_token) {
      return Status(StatusCode::kFatal, "fenced: stream " + stream + " was folded with token " +
                                            std::to_string(stored_token) + ", this folder has " +
                                            std::to_string(fence_token));
    }
    FoldResult result;
    for (size_t begin = 0; begin < entries.size(); begin += kRowsPerInsert) {
      const size_t end = std::min(entries.size(), begin + kRowsPerInsert);
      std::string sql = "INSERT INTO streamcar_archive_entries (stream, ms, seq, fields) VALUES ";
      Params params;
      params.Text(stream);
      for (size_t i = begin; i < end; ++i) {
        const int base = params.size();
        sql += (i == begin ? "($1, $" : ", ($1, $") + std::to_string(base + 1) + "::bigint, $" +
               std::to_string(base + 2) + "::bigint, $" + std::to_string(base + 3) + "::bytea)";
        params.Int64(ToStored(ids[i].ms));
        params.Int64(ToStored(ids[i].seq));
        params.Bytes(EncodeFields(entries[i].fields));
        if (ids[i] > watermark) watermark = ids[i];
      }
      sql += " ON CONFLICT (stream, ms, seq) DO NOTHING";
      auto inserted = writer_.Exec(sql.c_str(), params, PGRES_COMMAND_OK);
      if (!inserted.ok()) return inserted.status();
      result.inserted += std::strtoll(PQcmdTuples(inserted->get()), nullptr, 10);
    }
    Params update;
    update.Text(stream);
    update.Int64(ToStored(watermark.ms));
    update.Int64(ToStored(watermark.seq));
    update.Int64(fence_token);
    auto updated = writer_.Exec(
        "UPDATE streamcar_archive_meta SET watermark_ms = $2, watermark_seq = $3, "
        "fence_token = $4 WHERE stream = $1",
        update, PGRES_COMMAND_OK);
    if (!updated.ok()) return updated.status();
    result.watermark = watermark.ToString();
    return result;
  }

  StatusOr<ArchivePage> ReadInTransaction(const std::string& stream,
                                          const std::optional<IdRange>& range, int count) {
    Params only_stream;
    only_stream.Text(stream);
    auto meta = reader_.Exec(
        "SELECT watermark_ms, watermark_seq FROM streamcar_archive_meta WHERE stream = $1",
        only_stream, PGRES_TUPLES_OK, 1);
    if (!meta.ok()) return meta.status();
    ArchivePage page;
    EntryId watermark{0, 0};
    if (PQntuples(meta->get()) == 1) {
      watermark = {FromStored(BinaryInt64(meta->get(), 0, 0)),
                   FromStored(BinaryInt64(meta->get(), 0, 1))};
    }
    page.watermark = watermark.ToString();
    if (!range) return page;
    Params params;
    params.Text(stream);
    params.Int64(ToStored(range->first.ms));
    params.Int64(ToStored(range->first.seq));
    params.Int64(ToStored(range->last.ms));
    params.Int64(ToStored(range->last.seq));
    params.Int64(std::max(count, 1));
    auto rows = reader_.Exec(
        // Row comparisons over the whole primary key, so that both bounds are index conditions.
        "SELECT ms, seq, fields FROM streamcar_archive_entries WHERE "
        "(stream, ms, seq) >= ($1, $2::bigint, $3::bigint) AND "
        "(stream, ms, seq) <= ($1, $4::bigint, $5::bigint) "
        "ORDER BY stream, ms, seq LIMIT $6::bigint",
        params, PGRES_TUPLES_OK, 1);
    if (!rows.ok()) return rows.status();
    const int n = PQntuples(rows->get());
    page.entries.reserve(n);
    for (int row = 0; row < n; ++row) {
      StreamEntry entry;
      entry.id = EntryId{FromStored(BinaryInt64(rows->get(), row, 0)),
                         FromStored(BinaryInt64(rows->get(), row, 1))}
                     .ToString();
      auto fields = DecodeFields(
          std::string_view(PQgetvalue(rows->get(), row, 2), PQgetlength(rows->get(), row, 2)));
      if (!fields.ok()) return fields.status();
      entry.fields = std::move(*fields);
      page.entries.push_back(std::move(entry));
    }
    return page;
  }

  std::mutex writer_mutex_;
  Connection writer_;
  std::mutex reader_mutex_;
  Connection reader_;
};

}  // namespace

StatusOr<std::unique_ptr<ArchiveStore>> OpenPostgresArchive(const std::string& dsn) {
  auto store = std::make_unique<PostgresArchive>(dsn);
  if (Status s = store->Open(); !s.ok()) return s;
  return std::unique_ptr<ArchiveStore>(std::move(store));
}

}  // namespace streamcar::log

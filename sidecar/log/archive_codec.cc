#include "sidecar/log/archive_codec.h"

#include <limits>

#include "sidecar/log/entry_id.h"

namespace streamcar::log {
namespace {

constexpr char kVersion = 1;

void PutVarint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Reads a varint at *pos; false when it is truncated or longer than 64 bits.
bool GetVarint(std::string_view in, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= in.size()) return false;
    const auto byte = static_cast<unsigned char>(in[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return shift < 63 || byte <= 1;
  }
  return false;
}

bool GetBytes(std::string_view in, size_t* pos, std::string* out) {
  uint64_t length = 0;
  if (!GetVarint(in, pos, &length) || length > in.size() - *pos) return false;
  out->assign(in.substr(*pos, length));
  *pos += length;
  return true;
}

}  // namespace

std::string EncodeFields(const Fields& fields) {
  size_t size = 1;
  for (const auto& [name, value] : fields) size += name.size() + value.size() + 4;
  std::string out;
  out.reserve(size);
  out.push_back(kVersion);
  for (const auto& [name, value] : fields) {
    PutVarint(&out, name.size());
    out += name;
    PutVarint(&out, value.size());
    out += value;
  }
  return out;
}

StatusOr<Fields> DecodeFields(std::string_view blob) {
  if (blob.empty() || blob[0] != kVersion) {
    return Status(StatusCode::kProtocol, "archived fields: unknown encoding");
  }
  Fields fields;
  size_t pos = 1;
  while (pos < blob.size()) {
    std::string name;
    std::string value;
    if (!GetBytes(blob, &pos, &name) || !GetBytes(blob, &pos, &value)) {
      return Status(StatusCode::kProtocol, "archived fields: truncated or damaged");
    }
    fields.emplace_back(std::move(name), std::move(value));
  }
  return fields;
}

StatusOr<std::vector<EntryId>> FoldIds(const std::vector<StreamEntry>& entries) {
  std::vector<EntryId> ids;
  ids.reserve(entries.size());
  for (const auto& entry : entries) {
    auto id = ParseEntryId(entry.id);
    if (!id) return Status(StatusCode::kInvalid, "archive fold: bad entry id " + entry.id);
    ids.push_back(*id);
  }
  return ids;
}

StatusOr<std::optional<IdRange>> ReadRange(const std::string& after, const std::string& until) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  IdRange range{{0, 0}, {kMax, kMax}};
  if (!after.empty()) {
    auto id = ParseEntryId(after);
    if (!id) return Status(StatusCode::kInvalid, "archive read: bad id " + after);
    auto next = Successor(*id);
    if (!next) return std::optional<IdRange>();
    range.first = *next;
  }
  if (!until.empty()) {
    auto id = ParseEntryId(until);
    if (!id) return Status(StatusCode::kInvalid, "archive read: bad id " + until);
    auto prev = Predecessor(*id);
    if (!prev) return std::optional<IdRange>();
    range.last = *prev;
  }
  if (range.last < range.first) return std::optional<IdRange>();
  return std::optional<IdRange>(range);
}

}  // namespace streamcar::log

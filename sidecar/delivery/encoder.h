#pragma once
// The HTTP requests of SPEC sections 3.1 and 3.4, built from stream entries. Pure code: no
// sockets, so every byte of the contract is unit-tested.

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/stream_entry.h"
#include "sidecar/config/config.h"

namespace streamcar::delivery {

struct HttpRequest {
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type
  // Which of the handler client's targets it goes to (SPEC 11 routes, delivery/routes.h): 0 is
  // handler.url. The encoder leaves it 0; the delivery pump sets a route's.
  size_t target = 0;
};

// One shard of a sharded subscription (SPEC 9): which, and the fence token of the grant the
// delivering member holds. A handler with side effects keeps the highest fence it applied per
// shard (docs/sharding.md).
struct ShardStamp {
  int shard = 0;
  int64_t fence = 0;
};

struct EncodeContext {
  std::string stream;
  std::string group;
  const config::HandlerConfig* handler = nullptr;
  // Sharded: the headers Streamcar-Shard and Streamcar-Fence, and "shard" and "fence" in the
  // JSON envelope (and a batch's top level).
  std::optional<ShardStamp> shard;
};

// One entry per request. Returns false (and sets *why) when the entry cannot be expressed in the
// configured format: raw without its raw_field, a content_type that is not a media type, or a
// header that would carry a control character (SPEC 3.1: entry data never becomes framing; this
// last check runs on every request, whatever built the header). Such an entry is dead-lettered
// as "invalid". Header values from entry data are built by header_values.h only.
bool EncodeEntry(const EncodeContext& context, const StreamEntry& entry, HttpRequest* request,
                 std::string* why);

// Many entries per request (json only): {"stream","group","entries":[{"id","attempts","payload"}]}.
// Returns false (and sets *why) when a header would carry a control character; the batch's
// entries are then dead-lettered as "invalid".
bool EncodeBatch(const EncodeContext& context, const std::vector<const StreamEntry*>& entries,
                 HttpRequest* request, std::string* why);

// The json envelope of one entry, as in the "json" format body.
std::string EncodeJsonEnvelope(const std::string& stream, const std::string& group,
                               const StreamEntry& entry, const ShardStamp* shard = nullptr);

// One entry as the log API answers it (SPEC 10): {"id":"...","fields":{...}} with the fields
// encoded exactly as the json `payload` of 3.1 (base64_fields and base64_names where needed).
std::string EncodeLogEntry(const StreamEntry& entry);

}  // namespace streamcar::delivery

#pragma once
// The keys a stream's name gives (SPEC 3.3, 8 and 10), each beside its stream in the stream's
// Redis Cluster slot where one step touches both. The slot rules themselves live in one place:
// keys/key_slot.h (SameSlotKey, KeySlot).

#include <string>
#include <string_view>

namespace streamcar::keys {

// The suffix of every dead-letter stream named after its source: "<stream>:dlq", a shard's
// "orders:{3}:dlq" (sharding_keys.h) and a cluster's "{orders}:dlq".
inline constexpr std::string_view kDeadLetterSuffix = "dlq";

// The dead-letter stream of a subscription that does not name one (SPEC 2 and 8). Outside a
// cluster it is "<stream>:dlq". In a cluster it must share the stream's slot, so that
// dead-lettering (XADD to the DLQ and XACK of the stream in one script) stays atomic:
// "{orders}:dlq", or "<stream>:dlq" when the name has a hash tag already (SameSlotKey).
std::string DefaultDeadLetterStream(std::string_view stream, bool cluster);

// The idempotency key of an append to `stream` with Idempotency-Key `key`:
// OwnedKey(stream, "idem:<key>:<length of key>"), e.g. "{orders}:idem:order-7:7". Read from the
// end, the length says where `key` starts, so the name gives back stream and key even when
// either holds ':' ("{a}b" with key "c:idem:d" and "{a}b:idem:c" with key "d" differ), and it
// ends in a digit where every archive key ends in a letter.
std::string IdempotencyKey(std::string_view stream, std::string_view key);

// The lease on consumer name `consumer` in `group` of `stream` (SPEC 4.7): a hash of the holder's
// token and instance, with a TTL. OwnedKey(stream, "consumer:<group>:<consumer>:<length of
// group>:<length of consumer>:lease"), e.g. "{orders}:consumer:workers:pod-0:7:5:lease". Read
// from the end, the lengths give group and consumer back even when either holds ':', so no two
// (group, consumer) pairs share a name; and where the idempotency key ends in a digit, this ends
// in "lease" after a digit, which no archive key does.
std::string ConsumerLeaseKey(std::string_view stream, std::string_view group,
                             std::string_view consumer);

// The channel a stream with `notify: true` publishes each append's id on: "<stream>:events".
std::string NotifyChannel(std::string_view stream);

}  // namespace streamcar::keys

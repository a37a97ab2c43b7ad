// `streamcar dlq list` and `streamcar dlq replay` (SPEC 1 and 3.3): read the dead letters of one
// subscription, and move them back onto the source stream once the handler is fixed. A sharded
// subscription's dead letters are in each shard's own stream, and go back onto their shard.

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <iomanip>
#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/common/text.h"
#include "sidecar/keys/key_slot.h"
#include "sidecar/keys/sharding_keys.h"
#include "sidecar/redis/dead_letter_record.h"
#include "sidecar/redis/stream_ops.h"
#include "sidecar/sharding/shard_subscription.h"

namespace streamcar::cli {
namespace {

// Dead letters are read in pages of this many entries.
constexpr int64_t kPage = 500;

using redis::DeadLetterRecord;

// The dead letters of `sub` (a DLQ stream may be shared by several groups of one stream), oldest
// first; at most `limit`, and only `ids` when given.
StatusOr<std::vector<DeadLetterRecord>> ReadDeadLetters(redis::Session& redis,
                                                        const config::Subscription& sub,
                                                        size_t limit,
                                                        const std::vector<std::string>& ids) {
  std::vector<DeadLetterRecord> found;
  if (!ids.empty()) {
    for (const auto& id : ids) {
      auto reply = redis.Run(redis::Command("XRANGE").Arg(sub.dead_letter.stream).Arg(id).Arg(id));
      if (!reply.ok()) return reply.status();
      auto entries = redis::SubscriptionOps::ParseEntries(reply->view());
      if (entries.empty()) {
        return Status(StatusCode::kInvalid,
                      "no dead letter " + id + " in " + sub.dead_letter.stream);
      }
      DeadLetterRecord letter(std::move(entries.front()));
      if (!letter.BelongsTo(sub.stream, sub.group)) {
        const redis::DecodedDeadLetter decoded = letter.Decode();
        return Status(StatusCode::kInvalid, "dead letter " + id + " belongs to stream \"" +
                                                decoded.stream + "\" group \"" + decoded.group +
                                                "\", not to " + sub.name);
      }
      found.push_back(std::move(letter));
    }
    return found;
  }
  std::string start = "-";
  while (found.size() < limit) {
    auto reply = redis.Run(redis::Command("XRANGE")
                               .Arg(sub.dead_letter.stream)
                               .Arg(start)
                               .Arg("+")
                               .Arg("COUNT")
                               .Arg(kPage));
    if (!reply.ok()) return reply.status();
    auto entries = redis::SubscriptionOps::ParseEntries(reply->view());
    if (entries.empty()) break;
    start = "(" + entries.back().id;
    for (auto& entry : entries) {
      DeadLetterRecord letter(std::move(entry));
      if (!letter.BelongsTo(sub.stream, sub.group)) continue;
      found.push_back(std::move(letter));
      if (found.size() >= limit) break;
    }
    if (static_cast<int64_t>(entries.size()) < kPage) break;
  }
  return found;
}

// A dead letter and the subscription (or shard) it came from.
struct Letter {
  DeadLetterRecord record;
  const config::Subscription* from = nullptr;
};

// The subscriptions the commands read: the subscription itself, or each of its shards.
std::vector<config::Subscription> DeadLetterSources(const config::Subscription& sub) {
  if (!sub.sharding.enabled()) return {sub};
  std::vector<config::Subscription> shards;
  shards.reserve(static_cast<size_t>(sub.sharding.shards));
  for (int shard = 0; shard < sub.sharding.shards; ++shard) {
    shards.push_back(sharding::ShardSubscription(sub, shard));
  }
  return shards;
}

// ReadDeadLetters over every source, in shard order. An id given is looked for in each source's
// stream (a sharded subscription: the shard whose stream holds it).
StatusOr<std::vector<Letter>> ReadLetters(redis::Session& redis,
                                          const std::vector<config::Subscription>& sources,
                                          size_t limit, const std::vector<std::string>& ids) {
  std::vector<Letter> letters;
  if (ids.empty() || sources.size() == 1) {
    for (const auto& source : sources) {
      if (letters.size() >= limit) break;
      auto found = ReadDeadLetters(redis, source, limit - letters.size(), ids);
      if (!found.ok()) return found.status();
      for (auto& record : *found) letters.push_back({std::move(record), &source});
    }
    return letters;
  }
  for (const auto& id : ids) {
    const config::Subscription* holder = nullptr;
    std::string holders;  // each shard's stream makes its own ids: two may hold the same one
    for (const auto& source : sources) {
      auto reply =
          redis.Run(redis::Command("XRANGE").Arg(source.dead_letter.stream).Arg(id).Arg(id));
      if (!reply.ok()) return reply.status();
      if (!redis::SubscriptionOps::ParseEntries(reply->view()).empty()) {
        holders += (holders.empty() ? "" : ", ") + source.dead_letter.stream;
        if (holder != nullptr) {
          return Status(StatusCode::kInvalid,
                        "dead letter id " + id + " is in more than one shard's stream (" + holders +
                            "): it cannot say which; replay without --id");
        }
        holder = &source;
      }
    }
    if (holder == nullptr) {
      return Status(StatusCode::kInvalid, "no dead letter " + id + " in any shard's stream " +
                                              keys::ShardDeadLetterKey(sources.front().stream) +
                                              " ...");
    }
    auto found = ReadDeadLetters(redis, *holder, 1, {id});  // checks that it is ours
    if (!found.ok()) return found.status();
    letters.push_back({std::move(found->front()), holder});
  }
  return letters;
}

StatusOr<std::optional<std::string>> ReplayInOneStep(redis::Session& redis,
                                                     const config::Subscription& sub,
                                                     const DeadLetterRecord& letter) {
  auto ran = redis.Run(redis::Replay(sub.stream, sub.dead_letter.stream, letter));
  return ran.ok() ? redis::ParseReplay(ran->view())
                  : StatusOr<std::optional<std::string>>(ran.status());
}

// The replay as three commands on two nodes: the dead letter must still be there (XRANGE), the
// original fields go onto the stream (XADD), and only then is the dead letter removed (XDEL). A
// crash or a lost connection between the XADD and the XDEL leaves the dead letter in place: a
// later replay then adds the entry a second time (at-least-once, as the handler is idempotent).
StatusOr<std::optional<std::string>> ReplayInTwoSteps(redis::Session& redis,
                                                      const config::Subscription& sub,
                                                      const DeadLetterRecord& letter) {
  auto still = redis.Run(
      redis::Command("XRANGE").Arg(sub.dead_letter.stream).Arg(letter.id()).Arg(letter.id()));
  if (!still.ok()) return still.status();
  if (redis::SubscriptionOps::ParseEntries(still->view()).empty()) {
    return std::optional<std::string>();
  }
  redis::Command add("XADD");
  add.Arg(sub.stream).Arg("*");
  for (const auto& [field, value] : letter.Original()) add.Arg(field).Arg(value);
  auto added = redis.Run(add);
  if (!added.ok()) return added.status();
  if (!added->view().IsString()) return Status(StatusCode::kProtocol, "replay: unexpected reply");
  std::string id(added->view().Str());
  auto removed = redis.Run(redis::Command("XDEL").Arg(sub.dead_letter.stream).Arg(letter.id()));
  if (!removed.ok()) {
    return Status(removed.status().code(),
                  "added as " + id + " on " + sub.stream +
                      " but the dead letter is kept: " + removed.status().message());
  }
  return std::optional<std::string>(std::move(id));
}

std::string OneLine(std::string text, size_t limit) {
  for (auto& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (text.size() > limit) text = text.substr(0, limit - 3) + "...";
  return text;
}

// What both dlq commands start from: the configuration, the subscription and a connection.
struct DlqSession {
  config::Config config;
  const config::Subscription* sub = nullptr;
  std::vector<config::Subscription> sources;  // DeadLetterSources(*sub)
  std::unique_ptr<CliRedis> connected;
  redis::Session* redis = nullptr;
};

// Nullopt (with *exit_code set and the reason printed) when any of them cannot be had.
std::optional<DlqSession> OpenDlqSession(const Arguments& args, int* exit_code) {
  DlqSession session;
  auto config = LoadOrReport(args, exit_code);
  if (!config) return std::nullopt;
  session.config = std::move(*config);
  if (FindSubscriptionOrReport(session.config, args.subscription, exit_code) == nullptr) {
    return std::nullopt;
  }
  // Connecting may settle the dead-letter stream's name (auto turned out a cluster: SPEC 8).
  session.connected = RedisOrReport(&session.config, exit_code);
  if (!session.connected) return std::nullopt;
  session.redis = session.connected->session.get();
  session.sub = FindSubscriptionOrReport(session.config, args.subscription, exit_code);
  session.sources = DeadLetterSources(*session.sub);
  return session;
}

// `dlq list --json`: one document, the dead letters' original fields as text (binary values
// described, not written).
void WriteLettersJson(const config::Subscription& sub, const std::string& dlq_name,
                      const std::vector<Letter>& letters) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  auto str = [&](std::string_view s) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  };
  w.StartObject();
  w.Key("subscription");
  str(sub.name);
  w.Key("dead_letter_stream");
  str(dlq_name);
  w.Key("dead_letters");
  w.StartArray();
  for (const auto& [letter, from] : letters) {
    const redis::DecodedDeadLetter decoded = letter.Decode();
    w.StartObject();
    if (sub.sharding.enabled()) {  // which shard's stream holds it
      w.Key("dead_letter_stream");
      str(from->dead_letter.stream);
    }
    for (const auto& [key, value] : {std::pair<const char*, std::string_view>{"id", letter.id()},
                                     {"original_id", decoded.original_id},
                                     {"reason", decoded.reason},
                                     {"status", decoded.status},
                                     {"error", decoded.error}}) {
      w.Key(key);
      str(value);
    }
    w.Key("attempts");
    w.Int64(decoded.attempt_count);
    w.Key("time_ms");
    w.Int64(decoded.time_ms);
    w.Key("fields");
    w.StartObject();
    for (const auto& [field, value] : letter.Original()) {
      str(field);
      str(IsValidUtf8(value) ? value : "(binary, " + std::to_string(value.size()) + " bytes)");
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::cout << buffer.GetString() << "\n";
}

// `dlq list` for people: a table, a sharded subscription's letters under their shard's stream.
void WriteLettersTable(const config::Subscription& sub, const std::string& dlq_name,
                       const std::vector<Letter>& letters) {
  if (letters.empty()) {
    std::cout << "no dead letters for " << sub.name << " in " << dlq_name << "\n";
    return;
  }
  std::cout << std::left << std::setw(22) << "ID" << std::setw(22) << "ORIGINAL ID" << std::setw(14)
            << "REASON" << std::setw(9) << "STATUS" << std::setw(9) << "ATTEMPTS" << std::setw(26)
            << "TIME"
            << "ERROR\n";
  const config::Subscription* shown = nullptr;
  for (const auto& [letter, from] : letters) {
    if (sub.sharding.enabled() && from != shown) {
      std::cout << "in " << from->dead_letter.stream << "\n";
      shown = from;
    }
    const redis::DecodedDeadLetter decoded = letter.Decode();
    std::cout << std::setw(22) << letter.id() << std::setw(22) << decoded.original_id
              << std::setw(14) << decoded.reason << std::setw(9) << decoded.status << std::setw(9)
              << decoded.attempts << std::setw(26) << Rfc3339Millis(decoded.time_ms)
              << OneLine(decoded.error, 80) << "\n";
  }
}

}  // namespace

int DlqListCommand(const Arguments& args) {
  int exit_code = 0;
  auto session = OpenDlqSession(args, &exit_code);
  if (!session) return exit_code;
  const auto* sub = session->sub;
  auto& redis = session->redis;
  // A sharded subscription's dead letters: "orders:{%d}:dlq" names them all.
  const std::string dlq_name = sub->sharding.enabled()
                                   ? keys::ShardDeadLetterKey(sub->ShardKeyPattern())
                                   : sub->dead_letter.stream;
  auto letters =
      ReadLetters(*redis, session->sources, static_cast<size_t>(args.count.value_or(100)), {});
  if (!letters.ok()) {
    std::cerr << "streamcar: cannot read " << dlq_name << ": " << letters.status().message()
              << "\n";
    return 1;
  }
  if (args.json) {
    WriteLettersJson(*sub, dlq_name, *letters);
  } else {
    WriteLettersTable(*sub, dlq_name, *letters);
  }
  return 0;
}

int DlqReplayCommand(const Arguments& args) {
  int exit_code = 0;
  auto session = OpenDlqSession(args, &exit_code);
  if (!session) return exit_code;
  const auto* sub = session->sub;
  auto& redis = session->redis;
  const size_t limit = args.count ? static_cast<size_t>(*args.count) : SIZE_MAX;
  auto letters = ReadLetters(*redis, session->sources, limit, args.ids);
  if (!letters.ok()) {
    std::cerr << "streamcar: " << letters.status().message() << "\n";
    return letters.status().code() == StatusCode::kInvalid ? 2 : 1;
  }
  if (args.count && letters->size() > limit) {
    letters->erase(letters->begin() + static_cast<std::ptrdiff_t>(limit), letters->end());
  }
  // In a cluster a dead-letter stream in another slot than its stream cannot share a script
  // with it (CROSSSLOT): the replay is then two commands (docs/dead-letters.md).
  size_t replayed = 0;
  for (const auto& [letter, from] : *letters) {
    const bool two_step = session->connected->mode == redis::ResolvedMode::kCluster &&
                          keys::KeySlot(from->stream) != keys::KeySlot(from->dead_letter.stream);
    if (args.dry_run) {
      const redis::DecodedDeadLetter decoded = letter.Decode();
      std::cout << "would replay " << letter.id() << " (original " << decoded.original_id << ", "
                << decoded.reason << ") onto " << from->stream << "\n";
      continue;
    }
    auto reply =
        two_step ? ReplayInTwoSteps(*redis, *from, letter) : ReplayInOneStep(*redis, *from, letter);
    if (!reply.ok()) {
      // A reply error (WRONGTYPE on the source key, OOM, ...) stopped the script before its XDEL:
      // the dead letter is still there. A lost connection may or may not have run it.
      const bool kept = reply.status().code() == StatusCode::kServerError;
      std::cerr << "streamcar: replay of " << letter.id() << " onto " << from->stream
                << " failed after " << replayed << " replayed: " << reply.status().message()
                << (kept ? " (the dead letter is kept)" : "") << "\n";
      return 1;
    }
    if (!reply->has_value()) {
      std::cout << "skipped " << letter.id()
                << ": no longer in the dead-letter stream (replayed or deleted meanwhile)\n";
      continue;
    }
    std::cout << "replayed " << letter.id() << " (original " << letter.Decode().original_id
              << ") as " << **reply << " on " << from->stream << "\n";
    ++replayed;
  }
  if (args.dry_run) {
    std::cout << letters->size() << " dead letters would be replayed (dry run: nothing changed)\n";
  } else {
    std::cout << replayed << " dead letters replayed onto "
              << (sub->sharding.enabled() ? "their shards of " : "") << sub->stream << "\n";
  }
  return 0;
}

}  // namespace streamcar::cli

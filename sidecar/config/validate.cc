#include "sidecar/config/validate.h"

#include <set>
#include <utility>

namespace streamcar::config {

namespace {

// SPEC section 10: `streams`, `api` and `archive`. Single keys were checked while loading.
bool ValidateLogApi(const Config& config, const ProblemSink& problem) {
  std::set<std::string> names;
  for (size_t i = 0; i < config.streams.size(); ++i) {
    const auto& stream = config.streams[i];
    const std::string path = "streams[" + std::to_string(i) + "]";
    if (!names.insert(stream.name).second) {
      problem(path + ".name", "stream \"" + stream.name + "\" is listed by an earlier stream");
      return false;
    }
    if (stream.archive && config.archive.url.empty()) {
      problem(path + ".archive",
              "archive: true needs archive.url (sqlite:///path or postgres://...)");
      return false;
    }
    if (stream.archive && stream.max_len > 0) {
      // An archived stream is trimmed only by its folder (retention), never by XADD MAXLEN:
      // a capped XADD would drop entries that were never archived.
      problem(path + ".max_len",
              "stream \"" + stream.name +
                  "\" has archive: true; max_len would trim entries before they are archived "
                  "(use retention.max_len, which folds them first)");
      return false;
    }
  }
  if (!config.api.listen.empty() && config.api.listen == config.admin.listen) {
    problem("api.listen", "must differ from admin.listen (" + config.admin.listen + ")");
    return false;
  }
  return true;
}

}  // namespace

void ValidateConfig(const Config& config, const ProblemSink& problem) {
  if (config.subscriptions.empty() && config.streams.empty()) {
    problem("subscriptions",
            "at least one subscription is required (or a `streams` list for the log API)");
    return;
  }
  if (!ValidateLogApi(config, problem)) return;
  std::set<std::pair<std::string, std::string>> stream_groups;
  std::set<std::string> names;
  for (size_t i = 0; i < config.subscriptions.size(); ++i) {
    const auto& sub = config.subscriptions[i];
    const std::string path = "subscriptions[" + std::to_string(i) + "]";
    if (!stream_groups.insert({sub.stream, sub.group}).second) {
      problem(path, "stream \"" + sub.stream + "\" with group \"" + sub.group +
                        "\" is already subscribed by an earlier subscription");
      return;
    }
    if (!names.insert(sub.name).second) {
      problem(path + ".name", "name \"" + sub.name + "\" is used by an earlier subscription");
      return;
    }
    if (sub.handler.url.empty()) {
      problem(path + ".handler.url", "required (set it here or in defaults.handler.url)");
      return;
    }
    if (sub.handler.batch_size > 1 && sub.handler.format != Format::kJson) {
      problem(path + ".handler.batch_size",
              "batch delivery (batch_size > 1) needs format: json (format is " +
                  std::string(FormatName(sub.handler.format)) + ")");
      return;
    }
    if (sub.handler.format == Format::kRaw && sub.handler.raw_field.empty()) {
      problem(path + ".handler.raw_field", "required with format: raw");
      return;
    }
    if (sub.retry.max_backoff < sub.retry.initial_backoff) {
      problem(path + ".retry.max_backoff", "must not be below retry.initial_backoff");
      return;
    }
    if (sub.ack.delete_entries) {
      bool archived = false;
      for (const auto& stream : config.streams)
        archived |= stream.archive && stream.name == sub.stream;
      if (archived) {
        // XDEL on ack would remove entries before the archive folder has folded them.
        problem(path + ".ack.delete",
                "subscription \"" + sub.name + "\" deletes acknowledged entries of stream \"" +
                    sub.stream +
                    "\", which is archived (streams: archive: true): entries would be lost "
                    "before they are folded; drop ack.delete (retention trims after folding)");
        return;
      }
    }
    if (sub.dead_letter.stream == sub.stream) {
      problem(path + ".dead_letter.stream", "must differ from the subscription's stream");
      return;
    }
  }
  const auto& tls = config.redis.tls;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    problem(tls.cert_file.empty() ? "redis.tls.cert_file" : "redis.tls.key_file",
            "cert_file and key_file go together (mutual TLS needs both)");
    return;
  }
}

}  // namespace streamcar::config

#include "sidecar/cli/log_cli_support.h"

#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/common/text.h"
#include "sidecar/log/entry_id.h"

namespace streamcar::cli {
namespace {

std::string Printable(std::string_view text) {
  std::string out = PrintableOneLine(text);
  const bool quote = out.empty() || out.find_first_of(" \"=") != std::string::npos;
  if (!quote) return out;
  std::string quoted = "\"";
  for (char c : out) {
    if (c == '"') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

config::LogStream LogStreamOf(const config::Config& config, const std::string& name) {
  for (const auto& stream : config.streams) {
    if (stream.name == name) return stream;
  }
  config::LogStream stream;
  stream.name = name;
  config::FillShardRoutingOf(config, &stream);  // appends go to the shard of --key (SPEC 9)
  return stream;
}

std::optional<redis::ConnectionOptions> LogRedisOptionsOrReport(const config::Config& config,
                                                                int* exit_code) {
  // RedisOrReport connects once (its failure is one clear line, without the session's retry
  // log) and, in cluster and sentinel modes, resolves the topology the session then routes by.
  config::Config settled = config;
  auto redis = RedisOrReport(&settled, exit_code);
  if (!redis) return std::nullopt;
  redis::ConnectionOptions options = redis::ConnectionOptionsOf(config);
  options.client_name = "streamcar-cli";
  options.topology = redis->topology;
  return options;
}

std::unique_ptr<redis::Session> SessionOrReport(const redis::ConnectionOptions& options,
                                                redis::RedisHealth* health, int* exit_code) {
  // With a topology each command goes to its key's master, following redirects (SPEC 8).
  auto session = std::make_unique<redis::Session>(options, "cli", health);
  Millis retry_in{0};
  if (Status status = session->ConnectOnce(&retry_in); !status.ok()) {
    std::cerr << "streamcar: " << status.message() << "\n";
    *exit_code = 1;
    return nullptr;
  }
  return session;
}

std::unique_ptr<log::ArchiveStore> ArchiveOrReport(const config::Config& config,
                                                   const config::LogStream& stream,
                                                   int* exit_code) {
  if (!stream.archive || config.archive.url.empty()) return nullptr;
  auto archive = log::OpenArchive(config.archive.url);
  if (!archive.ok()) {
    std::cerr << "streamcar: cannot open the archive of " << stream.name << ": "
              << archive.status().message() << "\n";
    *exit_code = 1;
    return nullptr;
  }
  return std::move(*archive);
}

std::string EntryLine(const StreamEntry& entry) {
  std::string line = entry.id;
  if (auto id = log::ParseId(entry.id)) {
    line += "  " + Rfc3339Millis(static_cast<int64_t>(id->ms));
  }
  line += " ";
  for (const auto& [field, value] : entry.fields) {
    line += " " + Printable(field) + "=" + Printable(value);
  }
  return line;
}

}  // namespace streamcar::cli

#include "sidecar/cli/log_cli_support.h"

#include <algorithm>
#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/common/text.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/redis/topology/topology.h"
#include "sidecar/redis/topology/topology_routes.h"

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
  return stream;
}

std::optional<redis::ConnectionOptions> LogRedisOptionsOrReport(const config::Config& config,
                                                                int* exit_code) {
  redis::ConnectionOptions options = redis::ConnectionOptionsOf(config);
  options.client_name = "streamcar-cli";
  // A plain connection first: its failure is one clear line, without the session's retry log.
  // Not under Sentinel, where the url's host and port are not used (SPEC 8).
  if (config.redis.mode != config::RedisMode::kSentinel && !ConnectOrReport(config, exit_code)) {
    return std::nullopt;
  }
  if (config.redis.mode == config::RedisMode::kStandalone) return options;
  auto topology = std::make_shared<redis::Topology>(redis::TopologyOptionsOf(config), nullptr);
  // A one-shot command: the first map (or master) is enough; a -MOVED corrects it meanwhile.
  const Status status =
      topology->Resolve(SteadyClock::now() + std::max(config.redis.connect_timeout * 3, Millis(1)));
  if (!status.ok()) {
    std::cerr << "streamcar: " << status.message() << "\n";
    *exit_code = status.code() == StatusCode::kFatal ? 2 : 1;
    return std::nullopt;
  }
  if (topology->mode() != redis::ResolvedMode::kStandalone) options.topology = std::move(topology);
  return options;
}

std::unique_ptr<redis::Session> SessionOrReport(const redis::ConnectionOptions& options,
                                                redis::RedisHealth* health, int* exit_code) {
  // With a topology each command goes to its key's master, following redirects (SPEC 8).
  std::shared_ptr<redis::NodeRoutes> routes;
  if (options.topology) routes = std::make_shared<redis::TopologyRoutes>(options.topology);
  auto session = std::make_unique<redis::Session>(options, "cli", health, std::move(routes));
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

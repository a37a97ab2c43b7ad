// `streamcar trim STREAM --max-len N | --max-age D | --min-id ID [--dry-run]` (SPEC 1 and 10):
// trims a stream of the log API now; an archived one is folded first (sidecar/log/manual_trim.h).
//
// Output, one line on stdout (stable: scripts may read it; docs/archive.md documents it):
//   folded N entries (K new) up to W into URL; trimmed M entries (STREAM: L left)
//   trimmed M entries (STREAM: L left)                       a stream without archive
//   would fold N entries up to W into URL; would trim M entries (STREAM: L would be left)
//   would trim M entries (STREAM: L would be left)
// W is the archive's watermark after the fold (what it would be, for a dry run); URL is
// archive.url with its password masked.

#include <unistd.h>

#include <iostream>
#include <sstream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/cli/log_cli_support.h"
#include "sidecar/common/text.h"
#include "sidecar/config/redis_url.h"
#include "sidecar/log/entry_id.h"
#include "sidecar/log/manual_trim.h"

namespace streamcar::cli {
namespace {

// The stream named under `streams:`; prints why not and sets *exit_code to 2 when it is not
// one the trim may cut (not listed, or split into shard streams).
const config::LogStream* TrimmableOrReport(const config::Config& config, const std::string& name,
                                           int* exit_code) {
  const std::string quoted = "\"" + PrintableOneLine(name) + "\"";
  for (const auto& stream : config.streams) {
    if (stream.name != name) continue;
    if (stream.shards > 0) {
      std::cerr << "streamcar: trim: stream " << quoted
                << " is sharded (SPEC 9): its entries live in its shard streams, which its "
                   "subscription's retention trims\n";
      *exit_code = 2;
      return nullptr;
    }
    return &stream;
  }
  std::string known;
  for (const auto& stream : config.streams) {
    known += (known.empty() ? "" : ", ") + PrintableOneLine(stream.name);
  }
  std::cerr << "streamcar: trim: stream " << quoted << " is not listed under streams: in "
            << config.source_file << " (listed: " << (known.empty() ? "none" : known) << ")\n";
  *exit_code = 2;
  return nullptr;
}

log::TrimPoint PointOf(const Arguments& args) {
  log::TrimPoint point;
  if (args.max_len) {
    point.kind = log::TrimPoint::Kind::kMaxLen;
    point.max_len = *args.max_len;
  } else if (args.max_age) {
    point.kind = log::TrimPoint::Kind::kMaxAge;
    point.max_age = *args.max_age;
  } else {
    point.kind = log::TrimPoint::Kind::kMinId;
    point.min_id = log::ParseId(args.min_id).value_or(log::kMinId);  // args checked it
  }
  return point;
}

// The lease holder's name: this process, on this host (the sidecars hold it by consumer name).
std::string HolderName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return "streamcar-trim:" + std::string(host) + ":" + std::to_string(::getpid());
}

std::string ReportLine(const log::ManualTrimReport& report, const std::string& stream,
                       const std::string& archive_url, bool dry_run) {
  std::ostringstream line;
  const std::string would = dry_run ? "would " : "";
  if (report.archived) {
    line << would << (dry_run ? "fold " : "folded ") << report.folded << " entries";
    if (!dry_run) line << " (" << report.inserted << " new)";
    line << " up to " << report.watermark << " into " << config::MaskUrlPassword(archive_url)
         << "; ";
  }
  line << would << (dry_run ? "trim " : "trimmed ") << report.trimmed << " entries ("
       << PrintableOneLine(stream) << ": " << report.left
       << (dry_run ? " would be left)" : " left)");
  return line.str();
}

}  // namespace

int TrimCommand(const Arguments& args) {
  int exit_code = 0;
  auto config = LoadOrReport(args, &exit_code);
  if (!config) return exit_code;
  const config::LogStream* stream = TrimmableOrReport(*config, args.stream, &exit_code);
  if (stream == nullptr) return exit_code;
  redis::RedisHealth health;
  auto options = LogRedisOptionsOrReport(*config, &exit_code);
  if (!options) return exit_code;
  auto session = SessionOrReport(*options, &health, &exit_code);
  if (!session) return exit_code;
  auto archive = ArchiveOrReport(*config, *stream, &exit_code);
  if (exit_code != 0) return exit_code;

  log::ManualTrimOptions trim;
  trim.stream = stream->name;
  trim.point = PointOf(args);
  trim.dry_run = args.dry_run;
  trim.archive = archive.get();
  trim.holder = HolderName();
  trim.batch = config->archive.batch;
  trim.on_wait = [&](const std::string& holder, Millis ttl) {
    std::cerr << "streamcar: waiting for the archive lease of " << PrintableOneLine(stream->name)
              << ", held by \"" << PrintableOneLine(holder) << "\" (expires in " << ttl.count()
              << " ms unless renewed)\n";
  };
  auto report = log::TrimNow(*session, trim);
  if (!report.ok()) {
    std::cerr << "streamcar: cannot trim " << PrintableOneLine(stream->name) << ": "
              << report.status().message() << "\n";
    return report.status().code() == StatusCode::kInvalid ? 2 : 1;
  }
  std::cout << ReportLine(*report, stream->name, config->archive.url, args.dry_run) << "\n";
  return 0;
}

}  // namespace streamcar::cli

// `streamcar read` (SPEC 1 and 10): a window of a stream, the archive and the live stream merged
// by the same LogReader the API uses.

#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/cli/log_cli_support.h"
#include "sidecar/delivery/encoder.h"
#include "sidecar/log/log_reader.h"

namespace streamcar::cli {
namespace {

// Entries are read in pages of at most this many (the API's largest count).
constexpr long kPage = 10000;

void WriteJsonString(std::ostream& out, const std::string& text) {
  // Stream names come from the user's arguments: escape them as JSON strings.
  out << '"';
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out << '\\' << c;
    } else if (c < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out << "\\u00" << kHex[c >> 4] << kHex[c & 0x0F];
    } else {
      out << c;
    }
  }
  out << '"';
}

}  // namespace

int ReadCommand(const Arguments& args) {
  int exit_code = 0;
  auto config = LoadOrReport(args, &exit_code);
  if (!config) return exit_code;
  const config::LogStream stream = LogStreamOf(*config, args.stream);
  redis::RedisHealth health;
  auto options = LogRedisOptionsOrReport(*config, &exit_code);
  if (!options) return exit_code;
  auto session = SessionOrReport(*options, &health, &exit_code);
  if (!session) return exit_code;
  auto archive = ArchiveOrReport(*config, stream, &exit_code);
  if (exit_code != 0) return exit_code;
  log::LogReader reader(session.get(), archive.get());

  const long limit = args.count.value_or(100);
  log::WindowQuery query;
  if (!args.since.empty()) query.since = args.since;
  query.until = args.until;
  long printed = 0;
  std::optional<std::string> next;
  if (args.json) {
    std::cout << "{\"stream\":";
    WriteJsonString(std::cout, args.stream);
    std::cout << ",\"entries\":[";
  }
  while (printed < limit) {
    query.count = static_cast<int>(std::min(kPage, limit - printed));
    auto page = reader.Read(args.stream, query);
    if (!page.ok()) {
      if (args.json) std::cout << "\n" << std::flush;  // end the partial document's line
      std::cerr << "streamcar: cannot read " << args.stream << ": " << page.status().message()
                << "\n";
      return page.status().code() == StatusCode::kInvalid ? 2 : 1;
    }
    for (const auto& entry : page->entries) {
      if (args.json) {
        std::cout << (printed > 0 ? "," : "") << delivery::EncodeLogEntry(entry);
      } else {
        std::cout << EntryLine(entry) << "\n";
      }
      ++printed;
    }
    next = page->next;
    if (!next) break;
    query.after = *next;
  }
  if (args.json) {
    std::cout << "],\"next\":";
    if (next) {
      WriteJsonString(std::cout, *next);
    } else {
      std::cout << "null";
    }
    std::cout << "}\n";
  } else if (next) {
    std::cerr << "streamcar: " << printed << " entries shown; the window holds more after " << *next
              << " (--count N shows more)\n";
  }
  return 0;
}

}  // namespace streamcar::cli

// `streamcar produce` (SPEC 1 and 10): one append with a receipt, the same script the API uses.

#include <iostream>

#include "sidecar/cli/cli_support.h"
#include "sidecar/cli/commands.h"
#include "sidecar/cli/log_cli_support.h"
#include "sidecar/log/producer.h"

namespace streamcar::cli {

int ProduceCommand(const Arguments& args) {
  int exit_code = 0;
  auto config = LoadOrReport(args, &exit_code);
  if (!config) return exit_code;
  const config::LogStream stream = LogStreamOf(*config, args.stream);
  if (!stream.produce) {
    std::cerr << "streamcar: stream \"" << args.stream << "\" is read-only (streams[].produce: "
              << "false in " << config->source_file << ")\n";
    return 2;
  }
  redis::RedisHealth health;
  auto options = LogRedisOptionsOrReport(*config, &exit_code);
  if (!options) return exit_code;
  auto session = SessionOrReport(*options, &health, &exit_code);
  if (!session) return exit_code;
  log::Producer producer(stream, config->api.idempotency_ttl, config->api.max_future_skew);
  log::AppendRequest request;
  request.fields = args.fields;
  request.idempotency_key = args.idempotency_key;
  request.entry_id = args.entry_id;
  request.shard_key = args.key;
  auto result = producer.Append(*session, request);
  if (!result.ok()) {
    std::cerr << "streamcar: cannot append to " << args.stream << ": " << result.status().message()
              << "\n";
    return result.status().code() == StatusCode::kInvalid ? 2 : 1;
  }
  switch (result->kind) {
    case log::AppendResult::Kind::kAppended:
      std::cout << result->id << "\n";
      return 0;
    case log::AppendResult::Kind::kDuplicate:
      // The receipt of the first append: a retry of a produce that may have failed is safe.
      std::cout << result->id << "\n";
      std::cerr << "streamcar: idempotency key \"" << args.idempotency_key
                << "\" was already used for " << result->id << ": nothing appended\n";
      return 0;
    case log::AppendResult::Kind::kNonMonotonic:
      std::cerr << "streamcar: entry id " << args.entry_id << " is not above the top of "
                << args.stream << " (top: " << result->id << "): nothing appended\n";
      return 1;
    case log::AppendResult::Kind::kOutOfRange:
      std::cerr << "streamcar: entry id " << args.entry_id
                << " is the maximum id or more than api.max_future_skew ahead of Redis's clock: "
                   "nothing appended\n";
      return 1;
  }
  return 1;
}

}  // namespace streamcar::cli

#pragma once
// The command line of SPEC section 1, parsed into a plain struct. Parsing never exits: errors come
// back as one line of text, and main() turns them into exit code 2. The grammar itself (commands,
// options, their help) is sidecar/cli/command_line.cc, on CLI11.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"

namespace streamcar::cli {

enum class CommandKind {
  kRun,
  kCheck,
  kStatus,
  kDlqList,
  kDlqReplay,
  kProduce,
  kRead,
  kTail,
  kRoute,
  kTrim,
  kCompletion,
  kMan,
  kVersion
};

struct Arguments {
  CommandKind command = CommandKind::kRun;
  std::string config_path;  // resolved: -c, else $STREAMCAR_CONFIG, else the default path
  std::string help_text;    // --help, help COMMAND: print this and exit 0 (the command is not run)
  bool json = false;
  std::string subscription;
  std::optional<long> count;
  std::vector<std::string> ids;  // --id, each once, in the order first given
  bool dry_run = false;
  // produce / read / tail (SPEC 10)
  std::string stream;                                       // the STREAM argument
  std::vector<std::pair<std::string, std::string>> fields;  // produce: FIELD=VALUE, in order
  std::string idempotency_key;                              // produce --idempotency-key
  std::string entry_id;                                     // produce --id: "<ms>-<seq>"
  std::string since;  // read/tail --since, as the entry id it stands for ("" = not given)
  std::string until;  // read --until, as an entry id ("" = not given)
  // Sharded streams (SPEC 9): route's KEY argument, produce --key.
  std::string key;
  bool key_given = false;
  // trim (SPEC 1): exactly one of these is set.
  std::optional<int64_t> max_len;  // --max-len N
  std::optional<Millis> max_age;   // --max-age D
  std::string min_id;              // --min-id, as the entry id it stands for ("" = not given)
  std::string shell;               // completion: bash or zsh
};

inline constexpr const char* kDefaultConfigPath = "/etc/streamcar/streamcar.yaml";

// Parses argv (without argv[0]). On error returns nullopt and sets *error to one line.
std::optional<Arguments> ParseArguments(const std::vector<std::string>& args, std::string* error);

}  // namespace streamcar::cli

#pragma once
// The definitions of SPEC section 1 on CLI11: every command, subcommand, option and argument with
// its help, once. The parser (args.cc), the shell completion (completion.cc) and the man page
// (man_page.cc) all read this one tree, so none of them can list an option the others lack.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sidecar/cli/args.h"

// CLI11's own namespace, forward-declared so that only the .cc files include CLI11's headers.
namespace CLI {  // NOLINT(readability-identifier-naming)
class App;
class Option;
}  // namespace CLI

namespace streamcar::cli {

// The variables CLI11 writes as it parses: each option's text as given (after its check, which
// may rewrite it, e.g. a time to the entry id it stands for). args.cc turns them into Arguments.
struct Given {
  std::string config;
  bool json = false;
  bool dry_run = false;
  std::string subscription;
  std::string count;
  std::vector<std::string> ids;  // dlq replay --id
  std::string entry_id;          // produce --id
  std::string stream;
  std::vector<std::string> fields;
  std::string idempotency_key;
  std::string key;
  std::string since;
  std::string until;
  std::string max_len;
  std::string max_age;
  std::string min_id;
  std::string shell;
  std::vector<std::string> help_topic;  // `help COMMAND`: never parsed (args.cc rewrites it)
};

// One command or command group ("dlq") of the tree.
struct CommandInfo {
  CLI::App* app = nullptr;
  std::string words;                // "dlq replay"
  std::string synopsis;             // "streamcar dlq replay [-c FILE] --subscription NAME ..."
  std::optional<CommandKind> kind;  // none for a group, for help and for the hidden man
};

class CommandLine {
 public:
  CommandLine();
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  CLI::App& root() { return *root_; }
  const CLI::App& root() const { return *root_; }
  Given& given() { return given_; }
  // Every command and group, in the order of SPEC 1 (groups before their subcommands).
  const std::vector<CommandInfo>& commands() const { return commands_; }
  const CommandInfo* Find(const CLI::App* app) const;
  // The fixed set of words an argument takes (completion's SHELL), or nullptr.
  const std::vector<std::string>* Choices(const CLI::Option* option) const;

 private:
  // A command under parent; its synopsis starts as "streamcar <words>" and the caller appends
  // the rest of SPEC 1's line.
  CLI::App* Add(CLI::App* parent, const std::string& name, const std::string& description,
                std::optional<CommandKind> kind);
  void DefineRunAndCheck();
  void DefineStatusAndDlq();
  void DefineLogCommands();
  void DefineTrimAndRoute();
  void DefineToolCommands();

  std::unique_ptr<CLI::App> root_;
  Given given_;
  std::vector<CommandInfo> commands_;
  std::map<const CLI::Option*, std::vector<std::string>> choices_;
};

}  // namespace streamcar::cli

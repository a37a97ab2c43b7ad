#include "sidecar/cli/completion.h"

#include <CLI/CLI.hpp>
#include <sstream>

namespace streamcar::cli {
namespace {

// What completes after one command's words: its subcommands or its arguments' fixed words, its
// options, and which options take a value (a FILE is completed as a path, the rest not at all).
struct Completes {
  std::string words;  // "dlq list", "" for streamcar itself
  std::vector<std::string> candidates;
  std::vector<std::string> takes_value;
  std::vector<std::string> takes_file;
};

bool Hidden(const CLI::App* app) {
  return app->get_parent() != nullptr && app->get_group().empty();
}

std::vector<std::string> VisibleSubcommands(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    if (!Hidden(sub)) names.push_back(sub->get_name());
  }
  return names;
}

std::vector<Completes> Table(const CommandLine& line) {
  std::vector<Completes> table;
  for (const CommandInfo& info : line.commands()) {
    if (Hidden(info.app)) continue;
    Completes entry{.words = info.words, .candidates = VisibleSubcommands(info.app)};
    if (info.words == "help") {  // help's COMMAND is any command
      entry.candidates = VisibleSubcommands(&line.root());
    }
    for (const CLI::Option* option : info.app->get_options()) {  // the arguments' words first
      if (const auto* choices = line.Choices(option)) {
        entry.candidates.insert(entry.candidates.end(), choices->begin(), choices->end());
      }
    }
    for (const CLI::Option* option : info.app->get_options()) {
      if (!option->nonpositional()) continue;
      std::vector<std::string> names;
      for (const std::string& s : option->get_snames()) names.push_back("-" + s);
      for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
      entry.candidates.insert(entry.candidates.end(), names.begin(), names.end());
      if (option->get_items_expected_max() == 0) continue;
      entry.takes_value.insert(entry.takes_value.end(), names.begin(), names.end());
      if (option->get_type_name() == "FILE") {
        entry.takes_file.insert(entry.takes_file.end(), names.begin(), names.end());
      }
    }
    table.push_back(std::move(entry));
  }
  return table;
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// The `case` pattern list that moves from a command to one of its subcommands: "parent:word".
std::string DescentPatterns(const std::vector<Completes>& table, const char* separator) {
  std::string patterns;
  for (const Completes& entry : table) {
    if (entry.words.empty()) continue;
    const auto space = entry.words.rfind(' ');
    const std::string parent = space == std::string::npos ? "" : entry.words.substr(0, space);
    const std::string word =
        space == std::string::npos ? entry.words : entry.words.substr(space + 1);
    patterns += (patterns.empty() ? "" : separator) + ("\"" + parent + ":" + word + "\"");
  }
  return patterns;
}

std::string BashScript(const std::vector<Completes>& table) {
  std::ostringstream out;
  out << "# bash completion for streamcar, written by `streamcar completion bash` from the\n"
         "# command definitions it parses with. Source it, or install it as\n"
         "# /usr/share/bash-completion/completions/streamcar.\n"
         "_streamcar() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
         "  local command=\"\" word i candidates=\"\" takes_value=\"\" takes_file=\"\"\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    word=${COMP_WORDS[i]}\n"
         "    case \"$command:$word\" in\n"
         "      "
      << DescentPatterns(table, "|") << ") command=${command:+$command }$word ;;\n"
      << "    esac\n"
         "  done\n"
         "  case \"$command\" in\n";
  for (const Completes& entry : table) {
    out << "    \"" << entry.words << "\")\n"
        << "      candidates=\"" << Join(entry.candidates) << "\"\n"
        << "      takes_value=\"" << Join(entry.takes_value) << "\"\n"
        << "      takes_file=\"" << Join(entry.takes_file) << "\" ;;\n";
  }
  out << "  esac\n"
         "  if [[ \" $takes_file \" == *\" $prev \"* ]]; then\n"
         "    compopt -o filenames 2>/dev/null\n"
         "    mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n"
         "  elif [[ \" $takes_value \" == *\" $prev \"* ]]; then\n"
         "    COMPREPLY=()\n"
         "  else\n"
         "    mapfile -t COMPREPLY < <(compgen -W \"$candidates\" -- \"$cur\")\n"
         "  fi\n"
         "}\n"
         "complete -F _streamcar streamcar\n";
  return out.str();
}

std::string ZshArray(const std::vector<std::string>& words) { return "(" + Join(words) + ")"; }

std::string ZshScript(const std::vector<Completes>& table) {
  std::ostringstream out;
  out << "#compdef streamcar\n"
         "# zsh completion for streamcar, written by `streamcar completion zsh` from the command\n"
         "# definitions it parses with. Install it as _streamcar in a directory of $fpath, or\n"
         "# source it after compinit.\n"
         "_streamcar() {\n"
         "  local command=\"\" word i prev=${words[CURRENT-1]}\n"
         "  local -a candidates takes_value takes_file\n"
         "  for ((i = 2; i < CURRENT; i++)); do\n"
         "    word=${words[i]}\n"
         "    case \"$command:$word\" in\n"
         "      ("
      << DescentPatterns(table, "|") << ") command=${command:+$command }$word ;;\n"
      << "    esac\n"
         "  done\n"
         "  case \"$command\" in\n";
  for (const Completes& entry : table) {
    out << "    (\"" << entry.words << "\")\n"
        << "      candidates=" << ZshArray(entry.candidates) << "\n"
        << "      takes_value=" << ZshArray(entry.takes_value) << "\n"
        << "      takes_file=" << ZshArray(entry.takes_file) << " ;;\n";
  }
  out << "  esac\n"
         "  if (( ${takes_file[(Ie)$prev]} )); then\n"
         "    _files\n"
         "  elif (( ${takes_value[(Ie)$prev]} )); then\n"
         "    return 1\n"
         "  else\n"
         "    compadd -- \"${candidates[@]}\"\n"
         "  fi\n"
         "}\n"
         "if [[ ${funcstack[1]} == _streamcar ]]; then\n"
         "  _streamcar \"$@\"\n"
         "else\n"
         "  compdef _streamcar streamcar\n"
         "fi\n";
  return out.str();
}

}  // namespace

std::string CompletionScript(const CommandLine& line, const std::string& shell) {
  const std::vector<Completes> table = Table(line);
  return shell == "zsh" ? ZshScript(table) : BashScript(table);
}

}  // namespace streamcar::cli

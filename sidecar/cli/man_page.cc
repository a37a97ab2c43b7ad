#include "sidecar/cli/man_page.h"

#include <CLI/CLI.hpp>
#include <sstream>

#include "sidecar/common/version.h"

namespace streamcar::cli {
namespace {

// Text as roff shows it literally: backslashes escaped, '-' as a minus (so options can be
// searched and copied), and a line starting with '.' or '\'' not read as a request.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string OptionTerm(const CLI::Option* option) {
  if (!option->nonpositional()) return "\\fI" + Roff(option->get_name(true)) + "\\fR";
  std::string term;
  for (const std::string& s : option->get_snames()) {
    term += (term.empty() ? "" : ", ") + ("\\fB" + Roff("-" + s) + "\\fR");
  }
  for (const std::string& l : option->get_lnames()) {
    term += (term.empty() ? "" : ", ") + ("\\fB" + Roff("--" + l) + "\\fR");
  }
  if (option->get_items_expected_max() > 0)
    term += " \\fI" + Roff(option->get_type_name()) + "\\fR";
  return term;
}

// A command's options and arguments, as a tagged list; the positionals first, as in --help.
void Options(std::ostringstream& out, const CLI::App* app) {
  for (const bool positional : {true, false}) {
    for (const CLI::Option* option : app->get_options()) {
      if (option->nonpositional() == positional || option->get_group().empty()) continue;
      out << ".TP\n" << OptionTerm(option) << "\n" << Roff(option->get_description()) << "\n";
    }
  }
}

void Footer(std::ostringstream& out, const CLI::App* app) {
  if (app->get_footer().empty()) return;
  // Kept as --help prints it: some notes are laid out in columns.
  out << ".PP\n.nf\n" << Roff(app->get_footer()) << "\n.fi\n";
}

}  // namespace

std::string ManPage(const CommandLine& line) {
  std::ostringstream out;
  const CLI::App& root = line.root();
  const std::string date = std::string(kBuildDate).substr(0, 10);
  out << ".\\\" streamcar(1), written by `streamcar man` from its command definitions.\n"
      << ".TH STREAMCAR 1 \"" << date << "\" \"streamcar " << kVersion << "\" \"User Commands\"\n"
      << ".SH NAME\nstreamcar \\- " << Roff(root.get_description()) << "\n"
      << ".SH SYNOPSIS\n.nf\n";
  for (const CommandInfo& info : line.commands()) {
    const bool shown = info.app != &root && !info.app->get_group().empty();
    if (shown && (info.kind || info.words == "help")) out << Roff(info.synopsis) << "\n";
  }
  out << ".fi\n.SH DESCRIPTION\n" << Roff(root.get_description()) << "\n";
  Footer(out, &root);
  out << ".SH OPTIONS\n";
  Options(out, &root);
  out << ".SH COMMANDS\n";
  for (const CommandInfo& info : line.commands()) {
    if (info.app == &root || info.app->get_group().empty()) continue;
    out << ".SS \"" << Roff(info.synopsis) << "\"\n" << Roff(info.app->get_description()) << "\n";
    Footer(out, info.app);
    Options(out, info.app);
  }
  out << ".SH FILES\n.TP\n"
      << Roff(kDefaultConfigPath)
      << "\nthe configuration file when neither \\fB\\-c\\fR nor STREAMCAR_CONFIG is given\n"
      << ".SH SEE ALSO\nThe documentation in the source tree's docs/ (docs/cli.md for this "
         "page's commands).\n";
  return out.str();
}

}  // namespace streamcar::cli

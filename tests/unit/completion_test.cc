// `streamcar completion bash|zsh` and `streamcar man`, written from the command definitions: a real
// bash (and zsh) sources the script and completes, and the man page names every command and
// option the parser takes.

#include "sidecar/cli/completion.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sidecar/cli/man_page.h"

namespace streamcar::cli {
namespace {

// Runs `shell -c program` with the completion script at $SCRIPT; returns its stdout.
std::string RunShell(const std::string& shell, const std::string& script,
                     const std::string& program) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("streamcar-completion-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "script") << script;
  std::ofstream(dir / "program") << program;
  const std::string command = "cd " + dir.string() + " && SCRIPT=" + (dir / "script").string() +
                              " " + shell + " " + (dir / "program").string() + " 2>&1";
  std::string out;
  // A real shell is what this test is about.
  if (FILE* pipe = ::popen(command.c_str(), "r")) {  // NOLINT(bugprone-command-processor)
    std::array<char, 4096> buffer{};
    while (size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe))
      out.append(buffer.data(), n);
    ::pclose(pipe);
  }
  std::filesystem::remove_all(dir);
  return out;
}

// What bash completes for the command line `words` (the last word is the one being completed).
std::string BashCompletes(const std::string& words) {
  return RunShell("bash", CompletionScript(CommandLine(), "bash"),
                  "source \"$SCRIPT\"\n"
                  "complete -p streamcar\n"
                  "COMP_WORDS=(" +
                      words +
                      ")\n"
                      "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
                      "_streamcar\n"
                      "echo \"[${COMPREPLY[*]}]\"\n");
}

TEST(Completion, BashCompletesCommandsSubcommandsAndOptions) {
  const std::string top = BashCompletes("streamcar ''");
  EXPECT_NE(top.find("complete -F _streamcar streamcar"), std::string::npos) << top;
  EXPECT_NE(top.find("[run check status dlq produce read tail route trim completion version help "
                     "-h --help --version]"),
            std::string::npos)
      << top;
  EXPECT_NE(BashCompletes("streamcar st").find("[status]"), std::string::npos);
  EXPECT_NE(BashCompletes("streamcar dlq ''").find("[list replay -h --help]"), std::string::npos);
  EXPECT_NE(BashCompletes("streamcar dlq replay --d").find("[--dry-run]"), std::string::npos);
  EXPECT_NE(BashCompletes("streamcar dlq list --")
                .find("[--help --config --subscription --count "
                      "--json]"),
            std::string::npos)
      << BashCompletes("streamcar dlq list --");
  EXPECT_NE(BashCompletes("streamcar completion ''").find("[bash zsh -h --help]"),
            std::string::npos);
  EXPECT_NE(BashCompletes("streamcar help dl").find("[dlq]"), std::string::npos);
  // An option's value: nothing offered for --count, files for --config.
  EXPECT_NE(BashCompletes("streamcar read feed --count ''").find("[]"), std::string::npos);
  EXPECT_NE(BashCompletes("streamcar check -c scr").find("[script]"), std::string::npos);
  // The hidden man is not offered.
  EXPECT_NE(BashCompletes("streamcar ma").find("[]"), std::string::npos);
}

TEST(Completion, ZshCompletesCommandsAndSubcommands) {
  // NOLINTNEXTLINE(bugprone-command-processor): asks the shell whether zsh is there
  if (std::system("command -v zsh >/dev/null 2>&1") != 0) GTEST_SKIP() << "zsh not installed";
  // compadd and compdef are zsh's completion builtins; outside a completion widget the test
  // stands in for them and prints what they were given.
  auto completes = [](const std::string& words, int current) {
    return RunShell("zsh", CompletionScript(CommandLine(), "zsh"),
                    "compdef() { echo \"compdef $*\"; }\n"
                    "compadd() { shift; echo \"[$*]\"; }\n"
                    "source \"$SCRIPT\"\n"
                    "words=(" +
                        words +
                        ")\n"
                        "CURRENT=" +
                        std::to_string(current) +
                        "\n"
                        "_streamcar\n");
  };
  const std::string top = completes("streamcar ''", 2);
  EXPECT_NE(top.find("compdef _streamcar streamcar"), std::string::npos) << top;
  EXPECT_NE(top.find("[run check status dlq produce"), std::string::npos) << top;
  EXPECT_NE(completes("streamcar dlq ''", 3).find("[list replay -h --help]"), std::string::npos);
  const std::string replay = completes("streamcar dlq replay ''", 4);
  EXPECT_NE(replay.find("--subscription"), std::string::npos) << replay;
  EXPECT_NE(replay.find("--dry-run"), std::string::npos) << replay;
}

TEST(ManPage, NamesEveryCommandAndOption) {
  const std::string page = ManPage(CommandLine());
  EXPECT_EQ(page.find(".\\\""), 0u);
  EXPECT_NE(page.find(".TH STREAMCAR 1"), std::string::npos);
  for (const char* synopsis :
       {R"(streamcar run [\-c FILE])", R"(streamcar dlq list [\-c FILE] \-\-subscription NAME)",
        R"(streamcar dlq replay [\-c FILE] \-\-subscription NAME [\-\-count N] [\-\-id ID ...])",
        R"(streamcar trim [\-c FILE] STREAM [\-\-max\-len N | \-\-max\-age D | \-\-min\-id ID])",
        "streamcar completion bash|zsh"}) {
    EXPECT_NE(page.find(synopsis), std::string::npos) << synopsis;
  }
  for (const char* option :
       {R"(\fB\-\-idempotency\-key\fR \fIK\fR)", R"(\fB\-\-dry\-run\fR)",
        R"(\fB\-c\fR, \fB\-\-config\fR \fIFILE\fR)", R"(\fISTREAM\fR)", R"(\fB\-\-version\fR)"}) {
    EXPECT_NE(page.find(option), std::string::npos) << option;
  }
  EXPECT_EQ(page.find("\nstreamcar man"), std::string::npos) << "the hidden command stays hidden";
  EXPECT_EQ(page.find(".SS \"streamcar man"), std::string::npos);
  EXPECT_EQ(page.find("ARGUMENTS"), std::string::npos) << "the root's hidden positional too";
  // No line starts a roff request by accident: each line starting with '.' is a macro we wrote.
  size_t at = 0;
  while ((at = page.find("\n.", at)) != std::string::npos) {
    ++at;
    const std::string request = page.substr(at + 1, 2);
    EXPECT_TRUE(request == "TH" || request == "SH" || request == "SS" || request == "TP" ||
                request == "PP" || request == "nf" || request == "fi")
        << page.substr(at, 40);
  }
}

}  // namespace
}  // namespace streamcar::cli

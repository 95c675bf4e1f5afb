// CommandWords: whether a command line names commands that exist, and the
// nearest one when it does not (`berth sumbit` -> "did you mean submit?"),
// as kubectl and git answer. CLI11 alone answers a wrong command word with
// "A subcommand is required", and prints the top-level help for
// `berth foo --help`.
#ifndef BERTH_CLIENT_COMMAND_WORDS_H_
#define BERTH_CLIENT_COMMAND_WORDS_H_

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace berth {

// The name among `names` nearest to `word`: the one `word` begins, or the
// one fewest edits away (a swap of neighbours is one edit; at most one edit
// per three letters, at least one), first listed on a tie; nullopt if none
// is near.
std::optional<std::string> NearestName(absl::string_view word,
                                       const std::vector<std::string>& names);

// Follows the command words of `args` (the arguments after the program
// name) down `app`'s subcommands, skipping options and their values. If a
// word is not a subcommand where one is expected (the command has
// subcommands and takes no positional argument), the message to print:
// what is unknown, the nearest command and where to look. Else nullopt, and
// CLI11 parses as usual.
std::optional<std::string> UnknownCommand(const CLI::App& app,
                                          const std::vector<std::string>& args);

// `--wait` takes an optional duration (`--wait`: until the job ends;
// `--wait 300`, `--wait 10m`, `--wait=300`: at most that long), which CLI11
// 2.1 cannot read beside `--`: it takes a `--` after an option whose value
// is optional for the end of that value, not of the flags. So before
// parsing, `--wait DURATION` becomes `--wait=DURATION` and a bare `--wait`
// becomes `--wait=<kWaitUntilEnd>`; words after `--` (the user's command)
// are left alone.
inline constexpr char kWaitUntilEnd[] = "until-end";
std::vector<std::string> WithWaitValues(std::vector<std::string> args);

}  // namespace berth

#endif  // BERTH_CLIENT_COMMAND_WORDS_H_

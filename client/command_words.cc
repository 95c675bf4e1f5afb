#include "client/command_words.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// Edits from `a` to `b`: insertions, deletions, substitutions and swaps of
// two neighbours ("sumbit" is one swap from "submit").
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// "berth pg" for the pg subcommand.
std::string Path(const CLI::App& app) {
  const CLI::App* parent = app.get_parent();
  return parent == nullptr ? app.get_name() : absl::StrCat(Path(*parent), " ", app.get_name());
}

// The option `arg` names, looked up in `app` and the commands above it
// (global options are accepted after the command).
const CLI::Option* FindOption(const CLI::App& app, absl::string_view arg) {
  const std::string name(arg.substr(0, arg.find('=')));
  for (const CLI::App* at = &app; at != nullptr; at = at->get_parent()) {
    if (const CLI::Option* option = at->get_option_no_throw(name)) return option;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> NearestName(absl::string_view word,
                                       const std::vector<std::string>& names) {
  std::optional<std::string> best;
  size_t best_distance = std::max<size_t>(1, word.size() / 3) + 1;
  for (const std::string& name : names) {
    const size_t distance =
        absl::StartsWith(name, word) && !word.empty() ? 0 : EditDistance(word, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::optional<std::string> UnknownCommand(const CLI::App& app,
                                          const std::vector<std::string>& args) {
  const CLI::App* at = &app;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return std::nullopt;
    if (absl::StartsWith(arg, "-")) {
      const CLI::Option* option = FindOption(*at, arg);
      if (option != nullptr && option->get_items_expected_min() > 0 &&
          arg.find('=') == std::string::npos) {
        ++i;  // its value
      }
      continue;
    }
    std::vector<const CLI::App*> subcommands =
        at->get_subcommands([](const CLI::App*) { return true; });
    if (subcommands.empty()) return std::nullopt;
    auto named = std::find_if(subcommands.begin(), subcommands.end(),
                              [&](const CLI::App* sub) { return sub->check_name(arg); });
    if (named != subcommands.end()) {
      at = *named;
      continue;
    }
    // A word where the command takes a positional (`berth job ID`) is one.
    if (!at->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) {
      return std::nullopt;
    }
    std::vector<std::string> names;
    for (const CLI::App* sub : subcommands) names.push_back(sub->get_name());
    std::string message = absl::StrCat("unknown command \"", arg, "\" for \"", Path(*at), "\"");
    if (std::optional<std::string> nearest = NearestName(arg, names)) {
      absl::StrAppend(&message, "\nDid you mean \"", Path(*at), " ", *nearest, "\"?");
    }
    absl::StrAppend(&message, "\nRun '", Path(*at), " --help' for its commands.");
    return message;
  }
  return std::nullopt;
}

std::vector<std::string> WithWaitValues(std::vector<std::string> args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.insert(out.end(), args.begin() + i, args.end());
      break;
    }
    if (args[i] != "--wait") {
      out.push_back(std::move(args[i]));
      continue;
    }
    // A duration starts with a digit; anything else is the next word.
    const bool valued = i + 1 < args.size() && !args[i + 1].empty() &&
                        absl::ascii_isdigit(static_cast<unsigned char>(args[i + 1][0]));
    out.push_back(absl::StrCat("--wait=", valued ? args[++i] : kWaitUntilEnd));
  }
  return out;
}

}  // namespace berth

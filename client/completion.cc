#include "client/completion.h"

#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth {
namespace {

// What completes after each command path ("" is `berth` itself).
struct Words {
  std::vector<std::string> subcommands;
  std::vector<std::string> flags;
};

void Collect(const CLI::App& app, const std::string& path, std::map<std::string, Words>* out) {
  Words& words = (*out)[path];
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) words.flags.push_back("--" + name);
    for (const std::string& name : option->get_snames()) words.flags.push_back("-" + name);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    words.subcommands.push_back(sub->get_name());
    Collect(*sub, path.empty() ? sub->get_name() : absl::StrCat(path, " ", sub->get_name()), out);
  }
}

// A bash `case` over the command path, printing `pick(words)` for each.
template <typename Pick>
std::string CaseOverPaths(const std::map<std::string, Words>& paths, Pick pick) {
  std::string out = "  case \"$1\" in\n";
  for (const auto& [path, words] : paths) {
    absl::StrAppend(&out, "    \"", path, "\") echo \"", absl::StrJoin(pick(words), " "),
                    "\" ;;\n");
  }
  return out + "  esac\n";
}

}  // namespace

std::string BashCompletion(const CLI::App& app) {
  std::map<std::string, Words> paths;
  Collect(app, "", &paths);
  // Commands whose argument is a node id or a job id.
  const std::set<std::string> node_commands = {"drain", "undrain", "node gpu-healthy"};
  const std::set<std::string> job_commands = {"job",     "logs",     "stop",
                                              "job get", "job stop", "job watch"};
  auto quoted = [](const std::set<std::string>& commands) {
    return absl::StrJoin(commands, "|", [](std::string* out, const std::string& c) {
      absl::StrAppend(out, "\"", c, "\"");
    });
  };
  return absl::StrCat(
      "# bash completion for berth (`source <(berth completion bash)`)\n",
      "_berth_subcommands() {\n",
      CaseOverPaths(paths, [](const Words& w) { return w.subcommands; }), "}\n_berth_flags() {\n",
      CaseOverPaths(paths, [](const Words& w) { return w.flags; }),
      "}\n"
      "_berth() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" w\n"
      "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n"
      "    [[ $w == -- ]] && return 0  # the user's own command follows\n"
      "    if [[ \" $(_berth_subcommands \"$path\") \" == *\" $w \"* ]]; then\n"
      "      path=\"${path:+$path }$w\"\n"
      "    fi\n"
      "  done\n"
      "  local words\n"
      "  if [[ $cur == -* ]]; then\n"
      "    words=\"$(_berth_flags \"$path\") $(_berth_flags \"\")\"\n"
      "  else\n"
      "    words=\"$(_berth_subcommands \"$path\")\"\n"
      "    case \"$path\" in\n"
      "      ",
      quoted(node_commands),
      ") words=\"$words $(berth nodes 2>/dev/null | awk 'NR > 1 && !/ drains: | unhealthy since / "
      "{print $1}')\" ;;\n"
      "      ",
      quoted(job_commands),
      ") words=\"$words $(berth jobs 2>/dev/null | awk 'NR > 1 {print $1}')\" ;;\n"
      "    esac\n"
      "  fi\n"
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      "  [[ ${#COMPREPLY[@]} -eq 0 && $cur != -* ]] && COMPREPLY=($(compgen -f -- \"$cur\"))\n"
      "  return 0\n"
      "}\n"
      "complete -F _berth berth\n");
}

}  // namespace berth

// HelpJsonFlag: `--help-json` prints a program's flags as JSON and exits 0,
// so that deploy checks (deploy/k8s/check_manifests.py) ask the binary what
// it accepts instead of reading its sources:
//
//   {"program": "berth-head", "flags": [{"name": "listen", "takes_value": true,
//     "default": "127.0.0.1:6380", "required": false, "env": "", "help": "..."}, ...],
//    "subcommands": {"train": {...}}}
//
// Like --help it is answered before required flags are checked.
#ifndef BERTH_COMMON_HELP_JSON_H_
#define BERTH_COMMON_HELP_JSON_H_

#include <CLI/CLI.hpp>
#include <string>

namespace berth {

// The flags of `app` and of its subcommands, as above.
std::string FlagsJson(const CLI::App& app);

// Adds --help-json to `app`.
void AddHelpJsonFlag(CLI::App& app);

}  // namespace berth

#endif  // BERTH_COMMON_HELP_JSON_H_

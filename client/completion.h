// Shell completion for `berth` (`berth completion bash`), made from the
// command tree itself, so a new command or flag completes without a second
// list to keep: commands and their subcommands, each command's flags, and
// for the commands that take one, the ids of the cluster's nodes or jobs
// (asked of the cluster with `berth nodes` / `berth jobs` as it completes).
#ifndef BERTH_CLIENT_COMPLETION_H_
#define BERTH_CLIENT_COMPLETION_H_

#include <CLI/CLI.hpp>
#include <string>

namespace berth {

// A bash script defining the completion of `app` (the `berth` command) for
// `complete -F`; source it, or put it in bash-completion's folder.
std::string BashCompletion(const CLI::App& app);

}  // namespace berth

#endif  // BERTH_CLIENT_COMPLETION_H_

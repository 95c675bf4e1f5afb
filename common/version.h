// The version every berth binary reports: one constant, raised at each
// release, and the `--version` flag of every main. Apart from the rest of
// common/ so that only the mains include CLI11.
#ifndef BERTH_COMMON_VERSION_H_
#define BERTH_COMMON_VERSION_H_

#include <CLI/CLI.hpp>
#include <string>

namespace berth {

inline constexpr char kBerthVersion[] = "0.1.0";

// `--version`: prints "<program> <version>" and exits 0.
inline void AddVersionFlag(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", program + " " + kBerthVersion, "print the version and exit");
}

}  // namespace berth

#endif  // BERTH_COMMON_VERSION_H_

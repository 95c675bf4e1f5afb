#include "common/help_json.h"

#include <filesystem>
#include <iostream>

#include "nlohmann/json.hpp"

namespace berth {
namespace {

nlohmann::json Describe(const CLI::App& app) {
  nlohmann::json out;
  // The top level is named after argv[0]: the binary, not its path.
  out["program"] = std::filesystem::path(app.get_name()).filename().string();
  out["flags"] = nlohmann::json::array();
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_positional() || option == app.get_help_ptr() || option->get_lnames().empty())
      continue;
    for (const std::string& name : option->get_lnames()) {
      out["flags"].push_back({{"name", name},
                              {"takes_value", option->get_items_expected_min() > 0},
                              {"default", option->get_default_str()},
                              {"required", option->get_required()},
                              {"env", option->get_envname()},
                              {"help", option->get_description()}});
    }
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    out["subcommands"][sub->get_name()] = Describe(*sub);
  }
  return out;
}

}  // namespace

std::string FlagsJson(const CLI::App& app) { return Describe(app).dump(2); }

void AddHelpJsonFlag(CLI::App& app) {
  app.add_flag_callback(
      "--help-json",
      [&app] {
        std::cout << FlagsJson(app) << "\n";
        throw CLI::Success();
      },
      "print the flags as JSON and exit");
}

}  // namespace berth

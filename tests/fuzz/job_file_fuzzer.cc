// Fuzzes the client's job file parser (client/job_file.h) with arbitrary
// bytes: it must never crash, throw or hang, and must return either a spec
// within the documented bounds or INVALID_ARGUMENT starting "<name>:<line>: ".
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "client/job_file.h"
#include "google/protobuf/util/message_differencer.h"
#include "placement/placement_group_spec.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckAmounts(const berth::v1::ResourceSet& set) {
  for (const auto& [name, amount] : set.amounts()) {
    FUZZ_CHECK_MSG(!name.empty() && std::isfinite(amount) && amount >= 0, name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string name = "fuzz.yaml";
  absl::StatusOr<berth::v1::TrainJobSpec> spec = berth::ParseJobFile(text, name);
  if (!spec.ok()) {
    const std::string message(spec.status().message());
    FUZZ_CHECK_MSG(spec.status().code() == absl::StatusCode::kInvalidArgument, message);
    // "fuzz.yaml:<line>: ..." with a line number >= 1.
    FUZZ_CHECK_MSG(absl::StartsWith(message, name + ":"), message);
    const size_t digits_end = message.find(": ", name.size() + 1);
    FUZZ_CHECK_MSG(digits_end != std::string::npos && digits_end > name.size() + 1, message);
    for (size_t i = name.size() + 1; i < digits_end; ++i) {
      FUZZ_CHECK_MSG(absl::ascii_isdigit(static_cast<unsigned char>(message[i])), message);
    }
    FUZZ_CHECK_MSG(message.substr(name.size() + 1, 2) != "0:", message);
    return 0;
  }
  const berth::v1::ScalingConfig& scaling = spec->scaling_config();
  FUZZ_CHECK(scaling.num_workers() >= 1 &&
             scaling.num_workers() <= berth::PlacementGroupSpec::kMaxBundles);
  FUZZ_CHECK(scaling.placement_strategy() != berth::v1::PLACEMENT_STRATEGY_UNSPECIFIED);
  CheckAmounts(scaling.resources_per_worker());
  CheckAmounts(scaling.trainer_resources());
  FUZZ_CHECK(spec->entrypoint().kind_case() != berth::v1::Entrypoint::KIND_NOT_SET);
  if (spec->entrypoint().has_command()) {
    FUZZ_CHECK(spec->entrypoint().command().argv_size() >= 1);
    FUZZ_CHECK(!absl::StripAsciiWhitespace(spec->entrypoint().command().argv(0)).empty());
  } else {
    const auto& builtin = spec->entrypoint().builtin_trainer();
    FUZZ_CHECK(builtin.steps() >= 1);
    FUZZ_CHECK(std::isfinite(builtin.learning_rate()) && builtin.learning_rate() >= 0);
  }
  FUZZ_CHECK(spec->has_failure_config() && spec->failure_config().max_failures() >= -1);
  // Parsing is a function of the text.
  absl::StatusOr<berth::v1::TrainJobSpec> again = berth::ParseJobFile(text, name);
  FUZZ_CHECK(again.ok() && google::protobuf::util::MessageDifferencer::Equals(*again, *spec));
  return 0;
}

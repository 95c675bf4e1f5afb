#include "placement/placement_scorer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth {

const std::vector<std::string>& ScorerKindNames() {
  static const std::vector<std::string>* names = new std::vector<std::string>{
      "fragmentation", "builtin", "first-fit", "best-fit", "worst-fit", "random"};
  return *names;
}

absl::string_view ScorerKindName(ScorerKind kind) {
  return ScorerKindNames()[static_cast<size_t>(kind)];
}

absl::StatusOr<ScorerKind> ParseScorerKind(absl::string_view name, absl::string_view field) {
  const std::vector<std::string>& names = ScorerKindNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<ScorerKind>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown scorer '", name, "'; one of ", absl::StrJoin(names, ", ")));
}

PlacementScorer::PlacementScorer(ScorerKind kind, PlacementScorerOptions options)
    : name_(ScorerKindName(kind)), options_(options) {
  switch (kind) {
    case ScorerKind::kFragmentation:
      window_.emplace(options_.window);
      break;
    case ScorerKind::kBuiltIn:
      break;
    case ScorerKind::kFirstFit:
      current_ = std::make_unique<FirstFitScorer>();
      break;
    case ScorerKind::kBestFit:
      current_ = std::make_unique<BestFitScorer>();
      break;
    case ScorerKind::kWorstFit:
      current_ = std::make_unique<WorstFitScorer>();
      break;
    case ScorerKind::kRandom:
      current_ = std::make_unique<RandomScorer>(options_.seed);
      break;
  }
}

PlacementScorer::PlacementScorer(std::string name, std::unique_ptr<NodeScorer> scorer)
    : name_(std::move(name)), current_(std::move(scorer)) {}

void PlacementScorer::Observe(const PlacementGroupSpec& spec) {
  if (!window_) return;
  window_->Add(spec);
  const uint64_t added = window_->added();
  if (window_->size() < options_.min_tasks) return;
  if (current_ == nullptr) {
    Rebuild();
    next_look_ = NextLook(added);
    return;
  }
  // A young window's estimate sharpens fastest: it is looked at each time
  // it has grown by young_growth (rebuilt if it moved at all), then on drift.
  if (added == next_look_ && added <= options_.window.capacity) {
    next_look_ = NextLook(added);
    if (window_->DistanceFrom(built_from_) > 0) {
      Rebuild();
      return;
    }
  }
  if (added - checked_at_ < options_.check_every) return;
  checked_at_ = added;
  if (window_->DistanceFrom(built_from_) > options_.drift) Rebuild();
}

absl::Status PlacementScorer::Restore(const WorkloadWindow::Contents& contents) {
  if (!window_) {
    return absl::FailedPreconditionError(
        absl::StrCat("scorer '", name_, "' learns no distribution"));
  }
  if (absl::Status s = window_->Restore(contents); !s.ok()) return s;
  current_.reset();
  if (window_->size() >= options_.min_tasks) {
    Rebuild();
    next_look_ = NextLook(window_->added());
  }
  return absl::OkStatus();
}

uint64_t PlacementScorer::NextLook(uint64_t added) const {
  return std::max(added + 1, static_cast<uint64_t>(
                                 std::ceil(static_cast<double>(added) * options_.young_growth)));
}

void PlacementScorer::Rebuild() {
  FragmentationOptions fragmentation = options_.fragmentation;
  const double seen = static_cast<double>(window_->size());
  if (options_.uncertain_tasks > 0) {
    fragmentation.scarcity_weight *=
        1 + options_.uncertain_scarcity_boost *
                std::max(0.0, 1 - seen / static_cast<double>(options_.uncertain_tasks));
  }
  absl::StatusOr<std::unique_ptr<FragmentationScorer>> scorer =
      FragmentationScorer::Create(window_->Shapes(), fragmentation);
  // The window only holds valid shapes (GPU tasks, whole above one GPU) and
  // the options are fixed, so this fails only on a bug; keep the old scorer.
  if (!scorer.ok()) return;
  current_ = *std::move(scorer);
  built_from_ = window_->Take();
  checked_at_ = window_->added();
  ++builds_;
}

}  // namespace berth

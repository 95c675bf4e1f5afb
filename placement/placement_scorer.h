// PlacementScorer: the NodeScorer a head places with, chosen by name
// (berth-head --placement-scorer), and for the default, learned from the
// groups that arrive.
//
// "fragmentation", the default, is a FragmentationScorer (FGD plus the
// scarcity and stranding terms) measured against the task distribution of
// a WorkloadWindow over the groups Observe()d. Until `min_tasks` GPU tasks
// have arrived there is nothing to measure against, and BundlePlacer's
// built-in ranking places; then a scorer is built from the window (after a
// handful: groups placed by the built-in ranking while the scorer waits
// keep their places for as long as they run). It
// is rebuilt each time the window has grown by `young_growth` while it is
// filling (the estimate sharpens fastest then) if it moved at all, and
// whenever it has moved more than `drift` (total variation,
// checked every `check_every` tasks) from the one it was built from; while
// it has seen few tasks its scarcity term weighs more (uncertain_tasks). So
// a cluster that runs no GPU tasks keeps the built-in ranking. "builtin" is
// that ranking always; "first-fit", "best-fit", "worst-fit" and "random" are
// the scorers of node_scorer.h, which need no distribution.
//
// Promises: current() changes only inside Observe() and is owned by this
// object (valid until the next Observe()). Pure and deterministic: no I/O,
// threads or clocks.
#ifndef BERTH_PLACEMENT_PLACEMENT_SCORER_H_
#define BERTH_PLACEMENT_PLACEMENT_SCORER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/fragmentation_scorer.h"
#include "placement/node_scorer.h"
#include "placement/placement_group_spec.h"
#include "placement/workload_window.h"

namespace berth {

enum class ScorerKind { kFragmentation, kBuiltIn, kFirstFit, kBestFit, kWorstFit, kRandom };

// "fragmentation", "builtin", ... in ScorerKind's order.
const std::vector<std::string>& ScorerKindNames();
absl::string_view ScorerKindName(ScorerKind kind);
// INVALID_ARGUMENT naming `field` and the accepted names for anything else.
absl::StatusOr<ScorerKind> ParseScorerKind(absl::string_view name, absl::string_view field);

struct PlacementScorerOptions {
  WorkloadWindowOptions window;
  size_t min_tasks = 5;
  // While the window fills, it is looked at again each time it has grown by
  // this factor (> 1).
  double young_growth = 1.25;
  // While fewer than `uncertain_tasks` GPU tasks have been seen, the
  // scarcity weight is raised by up to `uncertain_scarcity_boost` times
  // (fading linearly to none): a model-restricted task that finds its
  // models taken fails, a task kept off them goes elsewhere, so while the
  // restricted demand is known from few tasks the scorer errs toward
  // keeping scarce models free. 0 tasks: off.
  size_t uncertain_tasks = 3000;
  double uncertain_scarcity_boost = 3;
  size_t check_every = 100;
  double drift = 0.1;
  // The scarcity and stranding terms weigh as much as FGD's own.
  FragmentationOptions fragmentation{/*scarcity_weight=*/1, /*stranding_weight=*/1};
  uint64_t seed = 1;  // for "random"
};

class PlacementScorer {
 public:
  explicit PlacementScorer(ScorerKind kind, PlacementScorerOptions options = {});
  // Always `scorer` (null: the built-in ranking), shown as `name`: for
  // benchmarks that build a scorer themselves.
  PlacementScorer(std::string name, std::unique_ptr<NodeScorer> scorer);

  // A group arrived: its tasks join the window (learning kinds only).
  void Observe(const PlacementGroupSpec& spec);
  // What an earlier head's window held (WorkloadWindow::Export): the window
  // takes it and the scorer is built from it, as if those tasks had been
  // observed. FAILED_PRECONDITION for kinds that learn nothing; the
  // window's errors otherwise, with no change.
  absl::Status Restore(const WorkloadWindow::Contents& contents);
  // What to place the next decision with; null: BundlePlacer's built-in ranking.
  NodeScorer* current() const { return current_.get(); }

  absl::string_view name() const { return name_; }
  // Times the learned scorer was (re)built.
  uint64_t builds() const { return builds_; }
  // The learned distribution; null for kinds that learn none.
  const WorkloadWindow* window() const { return window_ ? &*window_ : nullptr; }

 private:
  void Rebuild();
  // When a young window of `added` tasks is looked at next.
  uint64_t NextLook(uint64_t added) const;

  std::string name_;
  PlacementScorerOptions options_;
  std::optional<WorkloadWindow> window_;
  WorkloadWindow::Snapshot built_from_;
  uint64_t checked_at_ = 0;  // window_->added() at the last drift check
  uint64_t next_look_ = 0;   // window_->added() at which a young window is looked at again
  uint64_t builds_ = 0;
  std::unique_ptr<NodeScorer> current_;
};

}  // namespace berth

#endif  // BERTH_PLACEMENT_PLACEMENT_SCORER_H_

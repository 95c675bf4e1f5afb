#include "queueing/placer_capacity.h"

#include <algorithm>
#include <utility>

#include "absl/hash/hash.h"
#include "absl/strings/strip.h"
#include "placement/node_filters.h"
#include "queueing/queue_config.h"

namespace berth {
namespace {

// A failed decision's reason, to share (a spec the placer refused: its error).
PlacementReasonPtr ReasonOf(absl::StatusOr<PlacementDecision>* d) {
  auto reason = std::make_shared<PlacementReason>();
  if (d->ok()) {
    *reason = std::move((*d)->reason);
  } else {
    reason->why = PlacementWhy::kRefused;
    reason->text = std::string(d->status().message());
  }
  return reason;
}

PlacementReasonPtr UnknownGang(CapacityModel::GangRef gang) {
  auto reason = std::make_shared<PlacementReason>();
  reason->why = PlacementWhy::kUnknownGang;
  if (gang.id != nullptr) reason->gang = *gang.id;
  return reason;
}

}  // namespace

std::vector<std::pair<std::vector<std::string>, int64_t>> PlacerCapacity::TypedGpus(
    const PlacementGroupSpec& spec) {
  std::vector<std::pair<std::vector<std::string>, int64_t>> typed_gpus;
  for (uint32_t b = 0; b < spec.bundles().size(); ++b) {
    const int64_t gpus = spec.bundles()[b].resources.Get(kGpu).units();
    std::optional<std::vector<std::string>> types = AllowedAcceleratorTypes(spec.bundles(), {b});
    if (gpus == 0 || !types) continue;
    auto same = std::find_if(typed_gpus.begin(), typed_gpus.end(),
                             [&](const auto& typed) { return typed.first == *types; });
    if (same == typed_gpus.end()) {
      typed_gpus.emplace_back(*std::move(types), gpus);
    } else {
      same->second += gpus;
    }
  }
  return typed_gpus;
}

std::unique_ptr<CapacityModel::Gang> PlacerCapacity::Add(
    std::shared_ptr<const PlacementGroupSpec> shared, bool learn) {
  const PlacementGroupSpec& spec = *shared;
  if (scorer_ != nullptr && learn) scorer_->Observe(spec);
  ShapeKey key{std::string(PlacementStrategyName(spec.strategy())), {}};
  for (const Bundle& b : spec.bundles()) {
    absl::StrAppend(&key.first, "|", b.selector.ToString(), ":");
    for (const auto& [name, amount] : b.resources.entries()) {
      absl::StrAppend(&key.first, name.str(), ",");
      key.second.push_back(amount.units());
    }
  }
  auto [shape, fresh] = shapes_.try_emplace(std::move(key));
  if (fresh) {
    shape->second.spec = shared;
    shape->second.structure_hash = absl::HashOf(shape->first.first);
    shape->second.typed_gpus = TypedGpus(spec);
  } else if (*shape->second.spec == spec) {
    shared = shape->second.spec;  // `spec` may be gone now
  }
  ++shape->second.gangs;
  auto g = std::make_unique<Gang>(this, std::move(shared), shape);
  g->next = gangs_;
  if (gangs_ != nullptr) gangs_->prev = g.get();
  gangs_ = g.get();
  if (spare_ && few_version_ == table_->alive_version()) CountFewPlaces(*g, 1);
  return g;
}

std::shared_ptr<const PlacementGroupSpec> PlacerCapacity::SpecOf(GangRef gang) {
  return gang.record == nullptr ? nullptr : Of(gang)->spec;
}

bool PlacerCapacity::AsksAtLeast(const std::vector<int64_t>& amounts,
                                 const std::vector<int64_t>& unfit) {
  for (size_t i = 0; i < amounts.size(); ++i) {
    if (amounts[i] < unfit[i]) return false;
  }
  return true;
}

void PlacerCapacity::Forget(Gang& g) {
  ReleaseHeld(g);
  unfit_.clear();  // it may key a spec of this gang
  CountFewPlaces(g, -1);
  if (--g.shape->second.gangs == 0) shapes_.erase(g.shape);
  (g.prev != nullptr ? g.prev->next : gangs_) = g.next;
  if (g.next != nullptr) g.next->prev = g.prev;
}

void PlacerCapacity::CountFewPlaces(Gang& g, int sign) {
  Shape& shape = g.shape->second;
  if (sign > 0) {
    if (!shape.few_known) {
      std::vector<NodeIndex> nodes;
      for (NodeIndex i = 0; i < table_->slot_count() && nodes.size() < kFewPlaces; ++i) {
        if (CouldHoldSpec(*g.spec, i)) nodes.push_back(i);
      }
      shape.few_nodes.reset();
      if (nodes.size() < kFewPlaces && nodes.size() * 8 <= table_->alive_count()) {
        shape.few_nodes = std::move(nodes);
      }
      shape.few_known = true;
    }
    g.counted_few = true;
  } else if (!g.counted_few) {
    return;
  }
  if (shape.few_nodes) {
    for (NodeIndex n : *shape.few_nodes) {
      auto [count, fresh] = few_gangs_on_.try_emplace(n, 0);
      count->second += sign;
      if (fresh) spared_stale_ = true;
      if (count->second == 0) {
        few_gangs_on_.erase(count);
        spared_stale_ = true;
      }
    }
  }
  if (sign < 0) g.counted_few = false;
}

void PlacerCapacity::RefreshFewPlaces() {
  if (few_version_ == table_->alive_version()) return;
  few_version_ = table_->alive_version();
  few_gangs_on_.clear();
  spared_stale_ = true;
  for (auto& [key, shape] : shapes_) shape.few_known = false;
  for (Gang* g = gangs_; g != nullptr; g = g->next) {
    g->counted_few = false;
    CountFewPlaces(*g, 1);
  }
}

const absl::flat_hash_set<NodeIndex>* PlacerCapacity::SparedFor(const Gang& g) {
  if (!spare_ || g.few() || few_gangs_on_.empty()) return nullptr;
  if (spared_stale_) {
    spared_.clear();
    for (const auto& [node, gangs] : few_gangs_on_) spared_.insert(node);
    spared_stale_ = false;
  }
  return spared_.size() * 4 > table_->alive_count() ? nullptr : &spared_;
}

bool PlacerCapacity::FitsFewPlaces(GangRef gang) const {
  return spare_ && gang.record != nullptr && Of(gang)->few();
}

bool PlacerCapacity::HoldsPlacesSparedFor(GangRef holder, GangRef gang) const {
  const Gang* g = Of(gang);
  const Gang* h = Of(holder);
  if (!spare_ || g == nullptr || h == nullptr || !g->few() || h->few()) return false;
  const std::vector<NodeIndex>& few = *g->shape->second.few_nodes;
  for (const BundlePlacement& p : h->held) {
    if (std::find(few.begin(), few.end(), p.allocation.node) != few.end()) return true;
  }
  return false;
}

absl::Span<const BundlePlacement> PlacerCapacity::Held(GangRef gang) {
  if (gang.record == nullptr) return {};
  return Of(gang)->held;
}

ResourceSet PlacerCapacity::ChargeOf(absl::Span<const BundlePlacement> placements) const {
  ResourceSet charge;
  for (const BundlePlacement& p : placements) {
    charge.Add(p.allocation.resources).IgnoreError();
    const std::string& type = table_->node(p.allocation.node).accelerator_type;
    const Quantity gpus = p.allocation.resources.Get(kGpu);
    if (!type.empty() && !gpus.IsZero()) {
      ResourceSet typed;
      typed.Set(GpuOfTypeResource(type), gpus);
      charge.Add(typed).IgnoreError();
    }
  }
  return charge;
}

namespace {

constexpr absl::string_view kSummed[] = {kCpu, kGpu, kMemory};

PlacerCapacity::Sums SumsOf(const ResourceSet& set) {
  PlacerCapacity::Sums out;
  for (size_t r = 0; r < out.size(); ++r) out[r] = set.Get(kSummed[r]).units();
  return out;
}

void AddTo(PlacerCapacity::Sums& sums, const PlacerCapacity::Sums& more, int sign) {
  for (size_t r = 0; r < sums.size(); ++r) sums[r] += sign * more[r];
}

}  // namespace

void PlacerCapacity::SyncFree() {
  if (table_->change_count() == free_synced_at_) return;
  free_ = {};
  free_gpus_of_type_.clear();
  for (NodeIndex i = 0; i < table_->slot_count(); ++i) {
    const NodeResourceTable::Node& n = table_->node(i);
    if (n.removed || n.state != NodeState::kAlive) continue;
    AddTo(free_, SumsOf(n.available), 1);
    if (!n.accelerator_type.empty())
      free_gpus_of_type_[n.accelerator_type] += n.available.Get(kGpu).units();
  }
  free_synced_at_ = table_->change_count();
}

void PlacerCapacity::AfterChange(const ResourceSet& taken, const ResourceSet& given) {
  AddTo(free_, SumsOf(taken), -1);
  AddTo(free_, SumsOf(given), 1);
  // Charges name the GPUs taken on nodes of type T as `GPU:<T>`.
  for (const auto& [set, sign] : {std::pair{&taken, -1}, std::pair{&given, 1}}) {
    for (const auto& [name, amount] : set->entries()) {
      absl::string_view type = name;
      if (absl::ConsumePrefix(&type, kGpuOfTypePrefix))
        free_gpus_of_type_[type] += sign * amount.units();
    }
  }
  free_synced_at_ = table_->change_count();
}

bool PlacerCapacity::FreeCovers(const ResourceSet& demand, const Sums& extra,
                                PlacementReason* why) const {
  for (size_t r = 0; r < free_.size(); ++r) {
    const Wide free = free_[r] + extra[r];
    const Quantity asked = demand.Get(kSummed[r]);
    if (asked.units() <= free) continue;
    if (why != nullptr) {
      why->why = PlacementWhy::kClusterFree;
      why->waiting = true;
      why->amount = {ResourceName(kSummed[r]), asked,
                     Quantity::FromUnits(static_cast<int64_t>(
                         std::min<Wide>(std::max<Wide>(free, 0), Quantity::kMaxUnits)))};
    }
    return false;
  }
  return true;
}

bool PlacerCapacity::FreeCoversGang(const Gang& g, PlacementReason* why) const {
  if (!FreeCovers(g.spec->total(), {}, why)) return false;
  for (const auto& [types, gpus] : g.shape->second.typed_gpus) {
    Wide free = 0;
    for (const std::string& type : types) {
      if (auto it = free_gpus_of_type_.find(type); it != free_gpus_of_type_.end())
        free += it->second;
    }
    if (gpus <= free) continue;
    if (why != nullptr) {
      why->why = PlacementWhy::kTypedGpusFree;
      why->waiting = true;
      why->types = types;
      why->amount = {ResourceName(kGpu), Quantity::FromUnits(gpus),
                     Quantity::FromUnits(static_cast<int64_t>(std::max<Wide>(free, 0)))};
    }
    return false;
  }
  return true;
}

const PlacerCapacity::Unfit* PlacerCapacity::KnownUnfit(const Gang& g) {
  auto found = unfit_.find(g.shape->second.structure_hash);
  if (found == unfit_.end()) return nullptr;
  std::vector<Unfit>& alike = found->second;
  for (auto u = alike.begin(); u != alike.end(); ++u) {
    if (u->amounts->size() == g.amounts().size() && AsksAtLeast(g.amounts(), *u->amounts) &&
        *u->structure == g.structure()) {
      // To the front: the gangs that follow are often of the same spec.
      std::rotate(alike.begin(), u, u + 1);
      return &alike.front();
    }
  }
  return nullptr;
}

std::optional<ResourceSet> PlacerCapacity::Decide(Gang& g,
                                                  const absl::flat_hash_set<NodeIndex>* avoid,
                                                  PlacementReasonPtr* reason) {
  ++decisions_;
  if (observer_ != nullptr) observer_->BeforeDecision();
  BundlePlacer placer(table_, ranking());
  if (avoid != nullptr) placer.WithoutExplanations().Avoiding(avoid);
  absl::StatusOr<PlacementDecision> d = placer.Place(*g.spec);
  if (observer_ != nullptr && d.ok()) observer_->AfterDecision(*d);
  if (!d.ok() || d->outcome != PlacementOutcome::kPlaced) {
    if (reason != nullptr) *reason = ReasonOf(&d);
    if (avoid == nullptr) g.infeasible = d.ok() && d->outcome == PlacementOutcome::kInfeasible;
    return std::nullopt;
  }
  g.held.assign(std::make_move_iterator(d->placements.begin()),
                std::make_move_iterator(d->placements.end()));
  g.placed_by = ++placements_;
  ResourceSet charge = ChargeOf(g.held);
  AfterChange(charge, ResourceSet());
  return charge;
}

std::optional<ResourceSet> PlacerCapacity::Place(GangRef gang, PlacementReasonPtr* reason) {
  if (gang.record == nullptr) {
    *reason = UnknownGang(gang);
    return std::nullopt;
  }
  Gang& g = *Of(gang);
  if (!g.held.empty()) return ChargeOf(g.held);
  if (const Unfit* u = KnownUnfit(g)) {
    *reason = *u->amounts == g.amounts() ? u->reason : u->reason_for_larger;
    g.infeasible = u->infeasible;
    return std::nullopt;
  }
  auto remember = [&] {
    std::vector<Unfit>& alike = unfit_[g.shape->second.structure_hash];
    if (alike.size() >= kUnfitPerStructure) return;
    auto larger = std::make_shared<PlacementReason>();
    larger->why = PlacementWhy::kAsksAtLeast;
    larger->waiting = (*reason)->waiting;
    larger->gang = *gang.id;
    larger->like = *reason;
    alike.push_back(
        {&g.structure(), &g.amounts(), *reason, std::move(larger), g.infeasible, placements_});
  };
  SyncFree();
  if (g.decided) {
    if (PlacementReason why; !FreeCoversGang(g, &why)) {
      *reason = std::make_shared<const PlacementReason>(std::move(why));
      remember();
      return std::nullopt;
    }
  }
  g.decided = true;
  g.infeasible = false;
  std::optional<ResourceSet> charge;
  if (spare_) RefreshFewPlaces();
  if (const absl::flat_hash_set<NodeIndex>* spared = SparedFor(g)) {
    charge = Decide(g, spared, nullptr);
  }
  if (!charge) charge = Decide(g, nullptr, reason);
  if (!charge) remember();
  return charge;
}

std::optional<ResourceSet> PlacerCapacity::PlaceAvoiding(GangRef gang,
                                                         const std::vector<uint64_t>& avoid) {
  if (gang.record == nullptr) return std::nullopt;
  Gang& g = *Of(gang);
  if (!g.held.empty()) return ChargeOf(g.held);
  if (KnownUnfit(g) != nullptr) return std::nullopt;  // not even on every node
  SyncFree();
  if (!FreeCoversGang(g, nullptr)) return std::nullopt;
  const absl::flat_hash_set<NodeIndex> nodes(avoid.begin(), avoid.end());
  return Decide(g, &nodes, nullptr);
}

void PlacerCapacity::Release(GangRef gang) {
  if (gang.record != nullptr) ReleaseHeld(*Of(gang));
}

void PlacerCapacity::ReleaseHeld(Gang& g) {
  if (g.held.empty()) return;
  SyncFree();
  const ResourceSet charge = ChargeOf(g.held);
  for (const BundlePlacement& p : g.held) table_->Release(p.allocation).IgnoreError();
  g.held.clear();
  AfterChange(ResourceSet(), charge);
  // Before the gang was placed at least the room now was free.
  const uint64_t placed_by = std::exchange(g.placed_by, 0);
  for (auto& [structure, specs] : unfit_) {
    specs.erase(std::remove_if(specs.begin(), specs.end(),
                               [&](const Unfit& u) { return u.after_placements >= placed_by; }),
                specs.end());
  }
  absl::erase_if(unfit_, [](const auto& alike) { return alike.second.empty(); });
}

void PlacerCapacity::NodesChanged() {
  unfit_.clear();
  for (Gang* g = gangs_; g != nullptr; g = g->next) g->decided = false;
}

void PlacerCapacity::Hold(GangRef gang, BundlePlacement placement) {
  if (gang.record == nullptr) return;
  Gang& g = *Of(gang);
  g.held.push_back(std::move(placement));
  g.placed_by = 0;  // reserved by the caller, at a time unknown here
}

absl::StatusOr<PlacementDecision> PlacerCapacity::DecideRemainder(Gang& g) {
  std::vector<BundlePlacement> kept(g.held.begin(), g.held.end());
  std::sort(kept.begin(), kept.end(), [](const BundlePlacement& a, const BundlePlacement& b) {
    return a.bundle_index < b.bundle_index;
  });
  ++decisions_;
  if (observer_ != nullptr) observer_->BeforeDecision();
  absl::StatusOr<PlacementDecision> d = BundlePlacer(table_, ranking()).Place(*g.spec, kept);
  if (observer_ != nullptr && d.ok()) observer_->AfterDecision(*d);
  return d;
}

RemainderPlacement PlacerCapacity::PlaceRemainder(GangRef gang) {
  RemainderPlacement out;
  if (gang.record == nullptr) {
    out.reason = UnknownGang(gang);
    return out;
  }
  Gang& g = *Of(gang);
  absl::StatusOr<PlacementDecision> d = DecideRemainder(g);
  if (d.ok() && d->outcome == PlacementOutcome::kInfeasible && !g.held.empty() &&
      !g.spec->topology().required.empty()) {
    // Its domain can never take its lost bundles back: the gang moves whole.
    out.let_go.assign(g.held.begin(), g.held.end());
    std::sort(out.let_go.begin(), out.let_go.end(),
              [](const BundlePlacement& a, const BundlePlacement& b) {
                return a.bundle_index < b.bundle_index;
              });
    std::vector<uint32_t> bundles;
    for (const BundlePlacement& p : out.let_go) bundles.push_back(p.bundle_index);
    ReleaseBundles(gang, bundles);
    d = DecideRemainder(g);
  }
  if (!d.ok()) {  // cannot happen for a validated gang: it waits
    out.outcome = PlacementOutcome::kRetryLater;
    out.reason = ReasonOf(&d);
    return out;
  }
  out.outcome = d->outcome;
  if (d->outcome != PlacementOutcome::kPlaced) out.reason = ReasonOf(&d);
  if (d->outcome == PlacementOutcome::kPlaced) {
    for (const BundlePlacement& p : d->placements) Hold(gang, p);
    out.placed = std::move(d->placements);
  }
  return out;
}

void PlacerCapacity::ReleaseBundles(GangRef gang, const std::vector<uint32_t>& bundle_indices) {
  if (gang.record == nullptr) return;
  absl::InlinedVector<BundlePlacement, 1>& held = Of(gang)->held;
  auto released = std::remove_if(held.begin(), held.end(), [&](const BundlePlacement& p) {
    if (std::find(bundle_indices.begin(), bundle_indices.end(), p.bundle_index) ==
        bundle_indices.end())
      return false;
    // A node removed after it died took its reservations with it.
    table_->Release(p.allocation).IgnoreError();
    return true;
  });
  if (released == held.end()) return;
  held.erase(released, held.end());
  unfit_.clear();
}

bool PlacerCapacity::Infeasible(GangRef gang) const {
  return gang.record != nullptr && Of(gang)->infeasible;
}

std::optional<std::vector<uint64_t>> PlacerCapacity::PlacesWithout(
    GangRef gang, const std::vector<GangRef>& freed) {
  const Gang* g = Of(gang);
  if (g == nullptr) return std::nullopt;
  SyncFree();
  std::vector<const Gang*> freed_gangs;
  Sums freed_sum{};
  for (GangRef ref : freed) {
    const Gang* f = Of(ref);
    if (f == nullptr || f == g || f->held.empty()) continue;
    freed_gangs.push_back(f);
    for (const BundlePlacement& p : f->held) AddTo(freed_sum, SumsOf(p.allocation.resources), 1);
  }
  if (!FreeCovers(g->spec->total(), freed_sum, nullptr)) return std::nullopt;
  std::vector<const Allocation*> given_back;
  for (const Gang* f : freed_gangs) {
    for (const BundlePlacement& p : f->held) {
      if (table_->Release(p.allocation).ok()) given_back.push_back(&p.allocation);
    }
  }
  ++decisions_;
  absl::StatusOr<PlacementDecision> d =
      BundlePlacer(table_, ranking()).WithoutExplanations().Place(*g->spec);
  std::optional<std::vector<uint64_t>> places;
  if (d->outcome == PlacementOutcome::kPlaced) {
    places = NodesOf(d->placements);
    for (const BundlePlacement& p : d->placements) table_->Release(p.allocation).IgnoreError();
  }
  // Exactly what was there before: the same GPU instances included.
  for (const Allocation* a : given_back) table_->Reserve(*a).IgnoreError();
  AfterChange(ResourceSet(), ResourceSet());
  return places;
}

std::optional<std::vector<uint64_t>> PlacerCapacity::PlacesWhenIdle(GangRef gang) {
  if (gang.record == nullptr) return std::nullopt;
  if (!idle_ || idle_version_ != table_->alive_version()) {
    idle_ = *table_;
    for (const Gang* h = gangs_; h != nullptr; h = h->next) {
      for (const BundlePlacement& p : h->held) idle_->Release(p.allocation).IgnoreError();
    }
    idle_version_ = table_->alive_version();
    idle_places_.clear();
  }
  const Gang& g = *Of(gang);
  auto [known, fresh] = idle_places_.try_emplace(g.shape->first);
  if (!fresh) return known->second;
  ++decisions_;
  absl::StatusOr<PlacementDecision> d =
      BundlePlacer(&*idle_, nullptr).WithoutExplanations().Place(*g.spec);
  if (!d.ok() || d->outcome != PlacementOutcome::kPlaced) return known->second = std::nullopt;
  for (const BundlePlacement& p : d->placements) idle_->Release(p.allocation).IgnoreError();
  return known->second = NodesOf(d->placements);
}

std::vector<uint64_t> PlacerCapacity::NodesOf(absl::Span<const BundlePlacement> placements) {
  std::vector<uint64_t> nodes;
  for (const BundlePlacement& p : placements) nodes.push_back(p.allocation.node);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

std::vector<uint64_t> PlacerCapacity::PlacesOf(GangRef gang) const { return NodesOf(Held(gang)); }

bool PlacerCapacity::CouldHold(GangRef gang, uint64_t place) const {
  if (gang.record == nullptr || place >= table_->slot_count()) return false;
  return CouldHoldSpec(*Of(gang)->spec, static_cast<NodeIndex>(place));
}

bool PlacerCapacity::CouldHoldSpec(const PlacementGroupSpec& spec, NodeIndex node) const {
  const NodeResourceTable::Node& n = table_->node(node);
  if (n.removed || n.state != NodeState::kAlive) return false;
  const std::vector<const NodeFilter*>& filters = NodeFilters();
  for (uint32_t b = 0; b < spec.bundles().size(); ++b) {
    const std::vector<uint32_t> one{b};
    const FilterInput in{*table_, spec, one, spec.bundles()[b].resources, /*against_total=*/true};
    if (std::all_of(filters.begin(), filters.end(),
                    [&](const NodeFilter* f) { return f->Passes(in, node); })) {
      return true;
    }
  }
  return false;
}

ResourceSet PlacerCapacity::Capacity() const {
  if (capacity_ && capacity_->first == table_->alive_version()) return capacity_->second;
  ResourceSet totals;
  for (NodeIndex i = 0; i < table_->slot_count(); ++i) {
    const NodeResourceTable::Node& n = table_->node(i);
    if (n.removed || n.state != NodeState::kAlive) continue;
    ResourceSet node;
    for (absl::string_view r : {kCpu, kGpu, kMemory}) node.Set(r, n.total.Get(r));
    if (!n.accelerator_type.empty() && !n.total.Get(kGpu).IsZero())
      node.Set(GpuOfTypeResource(n.accelerator_type), n.total.Get(kGpu));
    totals.Add(node).IgnoreError();
  }
  capacity_.emplace(table_->alive_version(), totals);
  return totals;
}

}  // namespace berth

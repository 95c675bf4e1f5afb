#include "queueing/victim_search.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "queueing/preemption_rules.h"

namespace berth {
namespace {

using Candidate = PreemptionCandidate;

// Pruning a set to a minimal one costs a trial placement per victim: a
// larger set keeps its shortest sufficient prefix.
constexpr size_t kMostVictimsToPrune = 16;

// Places (nodes) are freed whole. A victim is on each of its places (a
// multi-node gang's end frees every node it holds, and a node it shares
// can be emptied only with it); one without places (a model that does not
// say) is a place of its own, after the nodes.
struct Place {
  int32_t priority = std::numeric_limits<int32_t>::min();  // the highest among its victims
  double cost = 0;
  std::optional<uint64_t> node;
  std::vector<const Candidate*> victims;
};

// One search, for one waiting gang, over the candidates its rules allow.
class VictimSearch {
 public:
  VictimSearch(const QueuedGang& g, PassState& pass, const PreemptionRules& rules,
               std::vector<Candidate> candidates)
      : g_(g), pass_(pass), rules_(rules), candidates_(std::move(candidates)) {
    GroupByPlace();
    SortByCost();
  }
  VictimSearch(const VictimSearch&) = delete;
  VictimSearch& operator=(const VictimSearch&) = delete;

  std::optional<Victims> Run(const QueueSchedulerOptions& options);

 private:
  void GroupByPlace();
  void SortByCost();
  // Places that preemption can empty, and where a bundle of `g` would fit
  // then: every gang held there is a candidate.
  std::set<const Place*> Emptiable() const;
  // Whether candidate `c` counts: a reclaim candidate only while its queue,
  // at its usage in *left (without the candidates before it), still borrows
  // (PreemptionRules::StillReclaims).
  bool Counts(const Candidate& c, std::map<std::string, ResourceSet>* left) const;
  // The candidates that count, a place at a time in cost order, at most
  // `max_victims`. With `only` given, a place counts only if it is one of
  // them and all of its victims count (a gang that needs empty places
  // gains nothing from half-emptied ones).
  std::vector<const Candidate*> EligibleOf(const std::set<const Place*>* only,
                                           size_t max_victims) const;
  // Whether preempting `set` makes room for `g` (quota and placement).
  bool Enough(const std::vector<const Candidate*>& set);
  // The shortest sufficient prefix of `eligible` (more victims only free more).
  std::vector<const Candidate*> ShortestPrefix(const std::vector<const Candidate*>& eligible);
  // Drops the victims off the places `g` took in the chosen set's trial, and
  // then, newest choice first, any victim not needed.
  void Prune(std::vector<const Candidate*>* chosen);
  std::vector<Preemption> ToPreemptions(const std::vector<const Candidate*>& chosen,
                                        const QueueSchedulerOptions& options) const;

  const QueuedGang& g_;
  PassState& pass_;
  const PreemptionRules& rules_;
  const std::vector<Candidate> candidates_;
  std::vector<Place> places_;  // reserved up front: Place* stay valid
  std::vector<Place*> by_cost_;
  // Where `g` goes without the last set that was enough: every set tried
  // after it that is enough replaces it, so it is the chosen set's.
  std::optional<std::vector<uint64_t>> fit_places_;
};

std::optional<Victims> VictimSearch::Run(const QueueSchedulerOptions& options) {
  // The cheapest places first; failing that (a gang that needs empty
  // places), the places that can be emptied, cheapest first: at once for a
  // gang within its nominal quota (the room is its own queue's), else once
  // it has waited empty_places_after_ms.
  std::vector<const Candidate*> eligible = EligibleOf(nullptr, options.max_victims_considered);
  if (eligible.empty() || !Enough(eligible)) {
    if (!rules_.within_nominal() &&
        pass_.now_ms - g_.view.waiting_since_ms < options.empty_places_after_ms) {
      return std::nullopt;
    }
    const std::set<const Place*> whole = Emptiable();
    eligible = EligibleOf(&whole, options.max_victims_to_empty_places);
    if (eligible.empty() || !Enough(eligible)) return std::nullopt;
  }
  std::vector<const Candidate*> chosen = ShortestPrefix(eligible);
  Prune(&chosen);
  std::vector<CapacityModel::GangRef> freed;
  for (const Candidate* c : chosen) freed.push_back(c->gang->ref());
  return Victims{ToPreemptions(chosen, options), std::move(freed), std::move(fit_places_)};
}

void VictimSearch::GroupByPlace() {
  size_t most_places = 0;
  for (const Candidate& c : candidates_) {
    most_places += std::max<size_t>(1, pass_.PlacesOf(c.gang).size());
  }
  places_.reserve(most_places);  // Place* stay valid
  absl::flat_hash_map<uint64_t, Place*> place_of_node;
  for (const Candidate& c : candidates_) {
    auto put_on = [&c](Place* place) {
      place->priority = std::max(place->priority, c.gang->request.priority);
      place->cost += c.cost;
      place->victims.push_back(&c);
    };
    const std::vector<uint64_t>& where = pass_.PlacesOf(c.gang);
    if (where.empty()) put_on(&places_.emplace_back());
    for (uint64_t node : where) {
      auto [it, fresh] = place_of_node.try_emplace(node, nullptr);
      if (fresh) {
        it->second = &places_.emplace_back();
        it->second->node = node;
      }
      put_on(it->second);
    }
  }
}

void VictimSearch::SortByCost() {
  // The lowest priority among their victims first, then the fewest
  // GPU-hours, then the node.
  for (Place& place : places_) by_cost_.push_back(&place);
  // Ties: nodes by index, then placeless ones in candidate order (their
  // index in `places_`).
  auto key = [&](const Place* p) {
    return std::make_tuple(p->priority, p->cost, !p->node.has_value(),
                           p->node ? *p->node : static_cast<uint64_t>(p - places_.data()));
  };
  std::sort(by_cost_.begin(), by_cost_.end(),
            [&](const Place* a, const Place* b) { return key(a) < key(b); });
}

std::set<const Place*> VictimSearch::Emptiable() const {
  absl::flat_hash_set<const QueuedGang*> ids;
  for (const Candidate& c : candidates_) ids.insert(c.gang);
  std::set<const Place*> out;
  for (const Place& place : places_) {
    if (!place.node || !pass_.capacity.CouldHold(g_.ref(), *place.node)) continue;
    bool all = true;
    for (const QueuedGang* holder : pass_.HoldersOf(*place.node)) {
      all = all && ids.contains(holder);
    }
    if (all) out.insert(&place);
  }
  return out;
}

bool VictimSearch::Counts(const Candidate& c, std::map<std::string, ResourceSet>* left) const {
  if (c.rule != PreemptionRule::kReclaim) return true;
  const std::string& owner_name = c.gang->request.queue;
  auto [usage, fresh] = left->try_emplace(owner_name);
  if (fresh) usage->second = pass_.quota.GangUsage(owner_name);
  return rules_.StillReclaims(c, usage->second);
}

std::vector<const Candidate*> VictimSearch::EligibleOf(const std::set<const Place*>* only,
                                                       size_t max_victims) const {
  std::vector<const Candidate*> eligible;
  absl::flat_hash_set<const Candidate*> taken;  // of `eligible`: a victim is on several places
  std::map<std::string, ResourceSet> left;      // usage without the eligible ones so far
  for (const Place* place : by_cost_) {
    if (only != nullptr && only->count(place) == 0) continue;
    std::vector<const Candidate*> here;
    size_t already = 0;  // victims of this place taken with an earlier one
    for (const Candidate* c : place->victims) {
      if (taken.contains(c)) {
        ++already;
        continue;
      }
      if (!Counts(*c, &left)) continue;
      here.push_back(c);
      if (auto it = left.find(c->gang->request.queue); it != left.end())
        it->second.Subtract(c->gang->view.charge).IgnoreError();
      if (only == nullptr && eligible.size() + here.size() == max_victims) break;
    }
    if (only != nullptr && (here.size() + already != place->victims.size() ||
                            eligible.size() + here.size() > max_victims)) {
      // The place stays: its victims' usage counts again.
      for (const Candidate* c : here) {
        if (auto it = left.find(c->gang->request.queue); it != left.end())
          it->second.Add(c->gang->view.charge).IgnoreError();
      }
      continue;
    }
    eligible.insert(eligible.end(), here.begin(), here.end());
    taken.insert(here.begin(), here.end());
    if (eligible.size() == max_victims) break;
  }
  return eligible;
}

bool VictimSearch::Enough(const std::vector<const Candidate*>& set) {
  std::vector<std::pair<std::string, ResourceSet>> released;
  std::vector<CapacityModel::GangRef> freed;
  for (const Candidate* c : set) {
    released.emplace_back(c->gang->request.queue, c->gang->view.charge);
    freed.push_back(c->gang->ref());
  }
  if (!pass_.quota.Check(g_.request.queue, g_.request.demand, released).fits) return false;
  std::optional<std::vector<uint64_t>> places = pass_.capacity.PlacesWithout(g_.ref(), freed);
  if (!places) return false;
  fit_places_ = std::move(places);
  return true;
}

std::vector<const Candidate*> VictimSearch::ShortestPrefix(
    const std::vector<const Candidate*>& eligible) {
  size_t lo = 1, hi = eligible.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (Enough({eligible.begin(), eligible.begin() + mid})) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return {eligible.begin(), eligible.begin() + lo};
}

void VictimSearch::Prune(std::vector<const Candidate*>* chosen) {
  // Victims off the places `g` took in the chosen set's trial did not make
  // its room (a cheap place too small on its own comes before the one that
  // was enough): dropped together, with one trial to confirm.
  if (fit_places_) {
    std::vector<const Candidate*> on;
    for (const Candidate* c : *chosen) {
      const std::vector<uint64_t>& where = pass_.PlacesOf(c->gang);
      if (where.empty() || std::any_of(where.begin(), where.end(), [&](uint64_t p) {
            return std::binary_search(fit_places_->begin(), fit_places_->end(), p);
          })) {
        on.push_back(c);
      }
    }
    if (!on.empty() && on.size() < chosen->size() && Enough(on)) *chosen = std::move(on);
  }
  for (size_t i = chosen->size();
       i-- > 0 && chosen->size() > 1 && chosen->size() <= kMostVictimsToPrune;) {
    std::vector<const Candidate*> without = *chosen;
    without.erase(without.begin() + i);
    if (Enough(without)) *chosen = std::move(without);
  }
}

std::vector<Preemption> VictimSearch::ToPreemptions(const std::vector<const Candidate*>& chosen,
                                                    const QueueSchedulerOptions& options) const {
  const GangRequest& by = g_.request;
  const std::string name = options.gang_name ? options.gang_name(by.id) : by.id;
  std::vector<Preemption> out;
  for (const Candidate* c : chosen) {
    out.push_back({c->gang->request.id, by.id, c->rule, name, by.queue});
  }
  return out;
}

}  // namespace

std::optional<Victims> ChooseVictims(const QueuedGang& g, PassState& pass,
                                     const QuotaLedger& ledger,
                                     const QueueSchedulerOptions& options, bool spends_budget,
                                     bool* over_budget) {
  PreemptionRules rules(g, pass, ledger);
  std::vector<Candidate> candidates = rules.Candidates();
  if (candidates.empty()) return std::nullopt;
  // What follows tries placements: it is what the budget bounds.
  if (spends_budget) {
    if (pass.searches == options.max_preemption_searches) {
      *over_budget = true;
      return std::nullopt;
    }
    ++pass.searches;
  }
  VictimSearch search(g, pass, rules, std::move(candidates));
  return search.Run(options);
}

}  // namespace berth

// Victim search: the running gangs a QueueScheduler pass preempts to make
// room for a waiting gang, to lose the fewest GPU-hours of work. Internal
// to queueing/.
//
// Victims are taken a place (node) at a time, cheapest first (the lowest
// priority among its candidates, then the fewest GPU-hours they lose): a
// multi-node gang is on each of its nodes, and a node it shares is emptied
// only with it. When the cheapest places do not make room (a gang of
// whole-node bundles gains nothing from half-emptied nodes), the places
// whose every gang is a candidate and where a bundle of the waiting gang
// fits are emptied, cheapest first. The set found is cut to the shortest
// sufficient prefix and then pruned to a minimal one.
//
// Promises: the set returned fits the waiting gang's quota (with the
// victims' charges given back) and its placement (a trial placement says
// so); nothing in the capacity model changes. The trial placements it
// makes are bounded by the options' max_victims_considered and
// max_victims_to_empty_places.
#ifndef BERTH_QUEUEING_VICTIM_SEARCH_H_
#define BERTH_QUEUEING_VICTIM_SEARCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "queueing/capacity_model.h"
#include "queueing/pass_state.h"
#include "queueing/queued_gang.h"
#include "queueing/quota_ledger.h"

namespace berth {

struct Victims {
  std::vector<Preemption> preemptions;
  std::vector<CapacityModel::GangRef> freed;    // the victims, as the capacity model names them
  std::optional<std::vector<uint64_t>> places;  // where the gang goes once they stop
};

// The minimal set of running gangs whose end makes room for `g`, or none.
// Gangs admitted in this pass or holding a reservation are not victims,
// nor gangs on none of the nodes `g` could use. Finding none such ends the search for free; else,
// with `spends_budget`, it spends one of the pass's
// max_preemption_searches, and none left ends it with *over_budget set.
std::optional<Victims> ChooseVictims(const QueuedGang& g, PassState& pass,
                                     const QuotaLedger& ledger,
                                     const QueueSchedulerOptions& options, bool spends_budget,
                                     bool* over_budget);

}  // namespace berth

#endif  // BERTH_QUEUEING_VICTIM_SEARCH_H_

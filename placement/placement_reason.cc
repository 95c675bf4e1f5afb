#include "placement/placement_reason.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace berth {
namespace {

constexpr absl::string_view kWaitingForResources = "waiting for resources: ";

std::string FormatAmount(absl::string_view name, Quantity q) {
  return absl::StrCat(name, ": ", name == kMemory ? FormatMemory(q) : q.ToString());
}

// The accelerator types a resource set pins (via `accelerator_type:<T>`).
std::vector<std::string> PinnedAcceleratorTypes(const ResourceSet& set) {
  std::vector<std::string> types;
  for (const auto& [name, amount] : set.entries()) {
    if (std::optional<absl::string_view> type = PinnedAcceleratorType(name)) {
      types.emplace_back(*type);
    }
  }
  return types;
}

std::string DemandText(const PlacementReason::Demand& d) {
  const ResourceSet shown = WithoutAcceleratorTypes(d.sum);
  std::string text = d.bundles.size() == 1
                         ? absl::StrCat("bundle ", d.bundles[0], " needs ")
                         : absl::StrCat(d.bundles.size(), " bundles need, on one node, ");
  absl::StrAppend(&text, absl::StrJoin(shown.entries(), ", ",
                                       [](std::string* out, const ResourceSet::Entry& e) {
                                         out->append(FormatAmount(e.first, e.second));
                                       }));
  std::vector<std::string> types = PinnedAcceleratorTypes(d.sum);
  if (!types.empty()) absl::StrAppend(&text, " with accelerator_type ", absl::StrJoin(types, "+"));
  for (const LabelSelector& s : d.selectors) {
    absl::StrAppend(&text, " on nodes matching '", s.ToString(), "'");
  }
  return text;
}

// The demand, then how it misses every node (over totals or free room).
std::string ShortfallText(const PlacementReason& r, bool total) {
  std::vector<std::string> types = PinnedAcceleratorTypes(r.demand.sum);
  const std::string scope = types.size() == 1 ? absl::StrCat(types[0], " ") : "";
  const std::string text = DemandText(r.demand);
  switch (r.gap) {
    case PlacementReason::Gap::kNoMatchingNode:
      return absl::StrCat(text, "; no ALIVE ", scope, "node",
                          r.demand.sum.Get(kGpu).IsZero() ? "" : " with GPUs", " matches");
    case PlacementReason::Gap::kTooLittle:
      return absl::StrCat(text, "; the ", total ? "largest " : "most free ", scope, "node has ",
                          FormatAmount(r.amount.resource, r.amount.have), total ? "" : " free");
    case PlacementReason::Gap::kNotAtOnce:
      break;
  }
  return absl::StrCat(text, "; no ", scope, "node has all of it ", total ? "in total" : "free",
                      " at once");
}

// What the domain lacks, in its free room (`free`) or its totals.
std::string DomainLackText(const PlacementReason::Domain& d, bool free) {
  if (!d.lacks) {
    return free ? " (enough in all, but not on nodes that each take their bundles)" : "";
  }
  return absl::StrCat(" (", FormatAmount(d.lacks->resource, d.lacks->need), " needed; ", d.key, "=",
                      d.value, " has ", FormatAmount(d.lacks->resource, d.lacks->have),
                      free ? " free)" : " in all)");
}

std::string TopologyText(const PlacementReason& r) {
  const std::string what = absl::StrCat("topology.required ", r.domain.key, ": ");
  const bool free = r.waiting;
  switch (r.why) {
    case PlacementWhy::kDomainSplit:
      return absl::StrCat(what, "the group's placed bundles no longer share one domain");
    case PlacementWhy::kDomainLost:
      return free ? absl::StrCat(what, r.count, " lost bundles wait for room in the group's domain",
                                 DomainLackText(r.domain, free))
                  : absl::StrCat(what, "the group's domain can no longer hold its ", r.count,
                                 " lost bundles beside the ones it holds",
                                 DomainLackText(r.domain, free));
    case PlacementWhy::kNoDomainLabel:
      return absl::StrCat(what, "no ALIVE node carries the label");
    default:
      break;
  }
  return free ? absl::StrCat(what, "no domain has room for the group's ", r.count, " bundles now",
                             DomainLackText(r.domain, free))
              : absl::StrCat(what, "no domain can ever hold the group's ", r.count, " bundles",
                             DomainLackText(r.domain, free));
}

// The reason without "waiting for resources: ".
std::string BodyText(const PlacementReason& r) {
  switch (r.why) {
    case PlacementWhy::kNone:
      return "";
    case PlacementWhy::kRefused:
      return r.text;
    case PlacementWhy::kUnknownGang:
      return absl::StrCat("unknown gang ", r.gang);
    case PlacementWhy::kNoAliveNodes:
      return "no ALIVE nodes in the cluster";
    case PlacementWhy::kShortfall:
      return ShortfallText(r, !r.waiting);
    case PlacementWhy::kPackShortfall:
      return absl::StrCat("STRICT_PACK: ", ShortfallText(r, true));
    case PlacementWhy::kSpreadOwnNode:
      return absl::StrCat("STRICT_SPREAD: ", DemandText(r.demand),
                          " on a node of its own; every ALIVE node that could hold it "
                          "already holds one of the group's bundles");
    case PlacementWhy::kTooFewDistinctNodes:
      return absl::StrCat("STRICT_SPREAD: needs ", r.count,
                          " distinct nodes that each hold a bundle; only ", r.found,
                          r.besides_own ? " (besides the group's own nodes)" : "",
                          " can be found among the ALIVE nodes");
    case PlacementWhy::kClusterTotal:
      return absl::StrCat("the group needs ", FormatAmount(r.amount.resource, r.amount.need),
                          " in all; the ALIVE nodes have ",
                          FormatAmount(r.amount.resource, r.amount.have), " in all");
    case PlacementWhy::kNotTogether:
      return absl::StrCat(r.count, " bundles (", PlacementStrategyName(r.strategy), ", ",
                          r.demand.sum.ToString(),
                          " in all) do not fit the free capacity together");
    case PlacementWhy::kDomainSplit:
    case PlacementWhy::kDomainLost:
    case PlacementWhy::kNoDomainLabel:
    case PlacementWhy::kNoDomain:
      return TopologyText(r);
    case PlacementWhy::kClusterFree:
      return absl::StrCat("the gang asks ", r.amount.resource.str(), " ", r.amount.need.ToString(),
                          "; the cluster has ", r.amount.have.ToString(), " free");
    case PlacementWhy::kTypedGpusFree:
      return absl::StrCat("the gang asks ", r.amount.need.ToString(), " GPUs of type ",
                          absl::StrJoin(r.types, " or "), "; the cluster has ",
                          r.amount.have.ToString(), " free");
    case PlacementWhy::kAsksAtLeast:
      return absl::StrCat("it asks at least what ", r.gang, " asks, bundle by bundle, which ",
                          r.waiting ? "does not fit (" : "cannot be placed (",
                          r.like ? BodyText(*r.like) : "", ")");
  }
  return "";
}

}  // namespace

ResourceName PlacementReason::NoResource() {
  static const ResourceName kNone("");
  return kNone;
}

bool SamePlacementReason(const PlacementReasonPtr& a, const PlacementReasonPtr& b) {
  return a == b || (a != nullptr && b != nullptr && *a == *b);
}

bool operator==(const PlacementReason& a, const PlacementReason& b) {
  const bool same_like = SamePlacementReason(a.like, b.like);
  return a.why == b.why && a.waiting == b.waiting && a.gap == b.gap && a.strategy == b.strategy &&
         a.count == b.count && a.found == b.found && a.besides_own == b.besides_own &&
         a.demand == b.demand && a.amount == b.amount && a.domain == b.domain &&
         a.types == b.types && a.gang == b.gang && a.text == b.text && same_like;
}

std::string PlacementReasonText(const PlacementReason& reason) {
  return reason.waiting ? absl::StrCat(kWaitingForResources, BodyText(reason)) : BodyText(reason);
}

std::ostream& operator<<(std::ostream& out, const PlacementReason& reason) {
  return out << PlacementReasonText(reason);
}

}  // namespace berth

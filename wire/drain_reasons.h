// Who drained a node, as its drain reason (NodeInfo.drain_reason) starts,
// for the daemons that act on it: the autoscaler removes, once empty, the
// nodes it drained itself and those the head drained as unhealthy (a
// failing health check, too many sick GPUs), which pending demand or
// min_nodes then replace. An operator's drain is the operator's.
#ifndef BERTH_WIRE_DRAIN_REASONS_H_
#define BERTH_WIRE_DRAIN_REASONS_H_

namespace berth {

inline constexpr char kAutoscalerDrainPrefix[] = "berth-autoscaler:";
inline constexpr char kHealthDrainPrefix[] = "unhealthy:";

}  // namespace berth

#endif  // BERTH_WIRE_DRAIN_REASONS_H_

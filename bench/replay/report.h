// Report: the small helpers both replays (berth-replay, berth-queue-replay)
// write their Markdown tables and figures with.
#ifndef BERTH_BENCH_REPLAY_REPORT_H_
#define BERTH_BENCH_REPLAY_REPORT_H_

#include <string>
#include <vector>

namespace berth {

// The q-quantile of `values` (nearest rank); `if_empty` when there are none.
double Quantile(std::vector<double> values, double q, double if_empty);
// One Markdown table row, "| a | b |\n".
std::string MarkdownRow(const std::vector<std::string>& cells);

}  // namespace berth

#endif  // BERTH_BENCH_REPLAY_REPORT_H_

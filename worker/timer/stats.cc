#include "worker/timer/stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace forge::timer {
namespace {

double SortedPercentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double position = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

}  // namespace

double Percentile(absl::Span<const double> values, double q) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return SortedPercentile(sorted, q);
}

Summary Summarize(absl::Span<const double> values) {
  Summary summary;
  if (values.empty()) return summary;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  summary.count = static_cast<int>(sorted.size());
  summary.min = sorted.front();
  summary.max = sorted.back();
  double sum = 0;
  for (double value : sorted) sum += value;
  summary.mean = sum / static_cast<double>(sorted.size());
  summary.median = SortedPercentile(sorted, 0.5);
  summary.p25 = SortedPercentile(sorted, 0.25);
  summary.p75 = SortedPercentile(sorted, 0.75);
  summary.spread = summary.median > 0 ? (summary.p75 - summary.p25) / summary.median : 0;
  return summary;
}

}  // namespace forge::timer

// Summary statistics of repeated timings, pure CPU.
#ifndef FORGE_WORKER_TIMER_STATS_H_
#define FORGE_WORKER_TIMER_STATS_H_

#include "absl/types/span.h"

namespace forge::timer {

struct Summary {
  int count = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double p25 = 0;
  double p75 = 0;
  // Interquartile range over the median (0.02 = 2%): the spread forge.v1.Measurement reports.
  double spread = 0;
};

// The q-th quantile (0 <= q <= 1) of `values`, interpolating linearly between the two nearest
// ranks; 0 for no values.
double Percentile(absl::Span<const double> values, double q);
// All of Summary; zeros for no values.
Summary Summarize(absl::Span<const double> values);

}  // namespace forge::timer

#endif  // FORGE_WORKER_TIMER_STATS_H_

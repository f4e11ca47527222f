// Error measures of a performance model against measured times, as the benchmarks and the
// trainer report them: mean and median absolute percentage error, and Spearman's rank correlation
// (what the search's ranking of candidates needs).
#ifndef FORGE_COMPILER_COST_LEARNED_EVALUATION_H_
#define FORGE_COMPILER_COST_LEARNED_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace forge::cost {

// Ranks 1..n of `values`, ties given their average rank.
std::vector<double> Ranks(absl::Span<const double> values);

// Pearson correlation of the ranks of `a` and `b` (same size); NaN for fewer than two values or
// when either is constant.
double Spearman(absl::Span<const double> a, absl::Span<const double> b);

// Mean of |predicted - measured| / measured, in percent; NaN when empty.
double MeanAbsolutePercentError(absl::Span<const double> predicted,
                                absl::Span<const double> measured);

// Median of |predicted - measured| / measured, in percent; NaN when empty.
double MedianAbsolutePercentError(absl::Span<const double> predicted,
                                  absl::Span<const double> measured);

// The scores of predictions against measurements of candidates grouped by task (`tasks[i]` names
// row i's task): the errors over every row, and Spearman within each task, since the search ranks
// candidates of one task.
struct GroupedScores {
  int64_t rows = 0;
  int64_t tasks = 0;
  double mean_ape = 0;        // percent; NaN when empty
  double median_ape = 0;      // percent; NaN when empty
  double spearman = 0;        // mean over the tasks with a defined Spearman; NaN when none
  double worst_spearman = 0;  // the lowest of those; NaN when none
};
// The three spans have the same size (rows beyond the shortest are ignored).
GroupedScores ScoreByTask(absl::Span<const double> predicted, absl::Span<const double> measured,
                          absl::Span<const std::string> tasks);

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_EVALUATION_H_

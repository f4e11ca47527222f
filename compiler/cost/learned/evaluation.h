// Error measures of a performance model against measured times, as the benchmarks and the
// trainer report them: mean and median absolute percentage error, and Spearman's rank correlation
// (what the search's ranking of candidates needs).
#ifndef FORGE_COMPILER_COST_LEARNED_EVALUATION_H_
#define FORGE_COMPILER_COST_LEARNED_EVALUATION_H_

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

}  // namespace forge::cost

#endif  // FORGE_COMPILER_COST_LEARNED_EVALUATION_H_

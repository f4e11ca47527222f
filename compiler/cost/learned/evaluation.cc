#include "compiler/cost/learned/evaluation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

namespace forge::cost {
namespace {

std::vector<double> AbsolutePercentErrors(absl::Span<const double> predicted,
                                          absl::Span<const double> measured) {
  std::vector<double> errors;
  for (size_t i = 0; i < std::min(predicted.size(), measured.size()); ++i) {
    errors.push_back(100 * std::abs(predicted[i] - measured[i]) / measured[i]);
  }
  return errors;
}

}  // namespace

std::vector<double> Ranks(absl::Span<const double> values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = (i + j) / 2.0 + 1;
    i = j + 1;
  }
  return ranks;
}

double Spearman(absl::Span<const double> a, absl::Span<const double> b) {
  if (a.size() != b.size() || a.size() < 2) return std::nan("");
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double mean = (static_cast<double>(ra.size()) + 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : std::nan("");
}

double MeanAbsolutePercentError(absl::Span<const double> predicted,
                                absl::Span<const double> measured) {
  const std::vector<double> errors = AbsolutePercentErrors(predicted, measured);
  if (errors.empty()) return std::nan("");
  return std::accumulate(errors.begin(), errors.end(), 0.0) / static_cast<double>(errors.size());
}

double MedianAbsolutePercentError(absl::Span<const double> predicted,
                                  absl::Span<const double> measured) {
  std::vector<double> errors = AbsolutePercentErrors(predicted, measured);
  if (errors.empty()) return std::nan("");
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  return n % 2 == 1 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
}

GroupedScores ScoreByTask(absl::Span<const double> predicted, absl::Span<const double> measured,
                          absl::Span<const std::string> tasks) {
  const size_t n = std::min({predicted.size(), measured.size(), tasks.size()});
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_task;
  for (size_t i = 0; i < n; ++i) {
    by_task[tasks[i]].first.push_back(predicted[i]);
    by_task[tasks[i]].second.push_back(measured[i]);
  }
  GroupedScores scores{.rows = static_cast<int64_t>(n),
                       .tasks = static_cast<int64_t>(by_task.size()),
                       .mean_ape = MeanAbsolutePercentError(predicted.first(n), measured.first(n)),
                       .median_ape =
                           MedianAbsolutePercentError(predicted.first(n), measured.first(n)),
                       .spearman = 0,
                       .worst_spearman = 1};
  int ranked = 0;
  for (const auto& [task, values] : by_task) {
    const double rho = Spearman(values.first, values.second);
    if (std::isnan(rho)) continue;
    scores.spearman += rho;
    scores.worst_spearman = std::min(scores.worst_spearman, rho);
    ++ranked;
  }
  if (ranked == 0) {
    scores.spearman = scores.worst_spearman = std::nan("");
  } else {
    scores.spearman /= ranked;
  }
  return scores;
}

}  // namespace forge::cost

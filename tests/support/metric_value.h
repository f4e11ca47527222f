// Test support: one series' value from a metrics registry (common/metrics), for tests that check
// what a component counted.
#ifndef FORGE_TESTS_SUPPORT_METRIC_VALUE_H_
#define FORGE_TESTS_SUPPORT_METRIC_VALUE_H_

#include "absl/strings/string_view.h"
#include "common/metrics/metrics.h"

namespace forge::testing {

// The value of the counter or gauge `name` whose labels are exactly `labels`; 0 when the registry
// has no such series (a counter never incremented).
double MetricValue(const metrics::Registry& registry, absl::string_view name,
                   const metrics::Labels& labels);

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_METRIC_VALUE_H_

#include "tests/support/metric_value.h"

namespace forge::testing {

double MetricValue(const metrics::Registry& registry, absl::string_view name,
                   const metrics::Labels& labels) {
  for (const metrics::FamilySnapshot& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const metrics::SeriesSnapshot& series : family.series) {
      if (series.labels == labels) return series.value;
    }
  }
  return 0;
}

}  // namespace forge::testing

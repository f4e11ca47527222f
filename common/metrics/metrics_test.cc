#include "common/metrics/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::metrics {
namespace {

using ::testing::HasSubstr;

std::string Serialize(const Registry& registry) {
  absl::StatusOr<std::string> text = SerializeText(registry.Collect());
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

TEST(MetricsTest, SerializesASmallRegistryExactly) {
  Registry registry;
  // Registered and filled out of order: the output is ordered by family name, then labels.
  absl::StatusOr<Family<Counter>*> requests = registry.AddCounter(
      {"forge_requests_total", "Requests served.", {{"service", "coordinator"}}});
  absl::StatusOr<Family<Gauge>*> queue =
      registry.AddGauge({"forge_queue_depth", "Candidates waiting.", {}});
  absl::StatusOr<Family<Histogram>*> compile =
      registry.AddHistogram({"forge_compile_seconds", "Compile time.", {}}, {0.5, 1, 2.5});
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_TRUE(queue.ok()) << queue.status();
  ASSERT_TRUE(compile.ok()) << compile.status();
  (*requests)->Add({{"method", "submit"}}).Increment(3);
  (*requests)->Add({{"method", "cancel"}}).Increment();
  (*queue)->Add({}).Set(7.5);
  Histogram& sm90 = (*compile)->Add({{"arch", "sm_90"}});
  sm90.Observe(0.25);
  sm90.Observe(1);  // a bound is inclusive: le="1"
  sm90.Observe(3);

  EXPECT_EQ(Serialize(registry),
            "# HELP forge_compile_seconds Compile time.\n"
            "# TYPE forge_compile_seconds histogram\n"
            "forge_compile_seconds_bucket{arch=\"sm_90\",le=\"0.5\"} 1\n"
            "forge_compile_seconds_bucket{arch=\"sm_90\",le=\"1\"} 2\n"
            "forge_compile_seconds_bucket{arch=\"sm_90\",le=\"2.5\"} 2\n"
            "forge_compile_seconds_bucket{arch=\"sm_90\",le=\"+Inf\"} 3\n"
            "forge_compile_seconds_sum{arch=\"sm_90\"} 4.25\n"
            "forge_compile_seconds_count{arch=\"sm_90\"} 3\n"
            "# HELP forge_queue_depth Candidates waiting.\n"
            "# TYPE forge_queue_depth gauge\n"
            "forge_queue_depth 7.5\n"
            "# HELP forge_requests_total Requests served.\n"
            "# TYPE forge_requests_total counter\n"
            "forge_requests_total{method=\"cancel\",service=\"coordinator\"} 1\n"
            "forge_requests_total{method=\"submit\",service=\"coordinator\"} 3\n");
}

TEST(MetricsTest, EscapesHelpAndLabelValues) {
  Registry registry;
  absl::StatusOr<Family<Gauge>*> family =
      registry.AddGauge({"forge_escapes", "Back\\slash and\nnewline, \"quotes\" kept.", {}});
  ASSERT_TRUE(family.ok()) << family.status();
  (*family)->Add({{"path", "C:\\tmp\n\"x\""}}).Set(1);
  (*family)->Add({{"model", "caf\xC3\xA9 \xFF\xC3"}}).Set(2);  // é is kept; bad bytes are not

  EXPECT_EQ(Serialize(registry),
            "# HELP forge_escapes Back\\\\slash and\\nnewline, \"quotes\" kept.\n"
            "# TYPE forge_escapes gauge\n"
            "forge_escapes{model=\"caf\xC3\xA9 \xEF\xBF\xBD\xEF\xBF\xBD\"} 2\n"
            "forge_escapes{path=\"C:\\\\tmp\\n\\\"x\\\"\"} 1\n");
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Registry registry;
  absl::StatusOr<Family<Histogram>*> family =
      registry.AddHistogram({"forge_sizes", "Sizes.", {}}, ExponentialBuckets(1, 10, 3));
  ASSERT_TRUE(family.ok()) << family.status();
  Histogram& sizes = (*family)->Add({});
  for (double value : {-5.0, 0.5, 1.0, 5.0, 10.0, 50.0, 99.0, 1000.0}) sizes.Observe(value);

  EXPECT_EQ(Serialize(registry),
            "# HELP forge_sizes Sizes.\n"
            "# TYPE forge_sizes histogram\n"
            "forge_sizes_bucket{le=\"1\"} 3\n"
            "forge_sizes_bucket{le=\"10\"} 5\n"
            "forge_sizes_bucket{le=\"100\"} 7\n"
            "forge_sizes_bucket{le=\"+Inf\"} 8\n"
            "forge_sizes_sum 1160.5\n"
            "forge_sizes_count 8\n");
}

TEST(MetricsTest, FormatsSpecialAndSmallValuesSoPrometheusParsesThem) {
  Registry registry;
  absl::StatusOr<Family<Gauge>*> family = registry.AddGauge({"forge_values", "Values.", {}});
  ASSERT_TRUE(family.ok()) << family.status();
  (*family)->Add({{"v", "a"}}).Set(std::numeric_limits<double>::infinity());
  (*family)->Add({{"v", "b"}}).Set(-std::numeric_limits<double>::infinity());
  (*family)->Add({{"v", "c"}}).Set(std::nan(""));
  (*family)->Add({{"v", "d"}}).Set(0.1);
  (*family)->Add({{"v", "e"}}).Set(-1.5e-7);
  (*family)->Add({{"v", "f"}}).Set(1e21);

  EXPECT_EQ(Serialize(registry),
            "# HELP forge_values Values.\n"
            "# TYPE forge_values gauge\n"
            "forge_values{v=\"a\"} +Inf\n"
            "forge_values{v=\"b\"} -Inf\n"
            "forge_values{v=\"c\"} NaN\n"
            "forge_values{v=\"d\"} 0.1\n"
            "forge_values{v=\"e\"} -1.5e-07\n"
            "forge_values{v=\"f\"} 1e+21\n");
}

TEST(MetricsTest, SameLabelsGiveTheSameChild) {
  Registry registry;
  absl::StatusOr<Family<Counter>*> family = registry.AddCounter({"forge_hits_total", "Hits.", {}});
  ASSERT_TRUE(family.ok()) << family.status();
  Counter& first = (*family)->Add({{"a", "1"}, {"b", "2"}});
  Counter& again = (*family)->Add({{"b", "2"}, {"a", "1"}});
  Counter& other = (*family)->Add({{"a", "1"}, {"b", "3"}});
  EXPECT_EQ(&first, &again);
  EXPECT_NE(&first, &other);
}

TEST(MetricsTest, GaugeGoesUpAndDown) {
  Registry registry;
  absl::StatusOr<Family<Gauge>*> family = registry.AddGauge({"forge_level", "Level.", {}});
  ASSERT_TRUE(family.ok()) << family.status();
  Gauge& level = (*family)->Add({});
  level.Set(10);
  level.Increment(2.5);
  level.Decrement();
  EXPECT_EQ(level.Value(), 11.5);
}

TEST(MetricsTest, CounterIgnoresNegativeAndNanIncrements) {
  Registry registry;
  absl::StatusOr<Family<Counter>*> family = registry.AddCounter({"forge_done_total", "Done.", {}});
  ASSERT_TRUE(family.ok()) << family.status();
  Counter& done = (*family)->Add({});
  done.Increment(2);
  done.Increment(-1);
  done.Increment(std::nan(""));
  EXPECT_EQ(done.Value(), 2);
}

TEST(MetricsTest, ConcurrentUpdatesAreExact) {
  Registry registry;
  absl::StatusOr<Family<Counter>*> counters = registry.AddCounter({"forge_ops_total", "Ops.", {}});
  absl::StatusOr<Family<Gauge>*> gauges = registry.AddGauge({"forge_balance", "Balance.", {}});
  absl::StatusOr<Family<Histogram>*> histograms =
      registry.AddHistogram({"forge_latency_seconds", "Latency.", {}}, {1, 2});
  ASSERT_TRUE(counters.ok() && gauges.ok() && histograms.ok());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50000;
  std::vector<Counter*> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Every thread creates-or-finds the child itself, racing on Family::Add.
      Counter& ops = (*counters)->Add({{"kind", "x"}});
      seen[t] = &ops;
      Gauge& balance = (*gauges)->Add({});
      Histogram& latency = (*histograms)->Add({});
      for (int i = 0; i < kPerThread; ++i) {
        ops.Increment();
        balance.Increment(3);
        balance.Decrement(1);
        latency.Observe(i % 3);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (Counter* counter : seen) EXPECT_EQ(counter, seen[0]);
  EXPECT_EQ(seen[0]->Value(), kThreads * kPerThread);
  EXPECT_EQ((*gauges)->Add({}).Value(), 2.0 * kThreads * kPerThread);
  const std::vector<FamilySnapshot> snapshot = registry.Collect();
  ASSERT_EQ(snapshot.size(), 3u);
  ASSERT_EQ(snapshot[1].name, "forge_latency_seconds");
  EXPECT_EQ(snapshot[1].series.at(0).cumulative_counts.back(),
            static_cast<uint64_t>(kThreads) * kPerThread);
}

TEST(MetricsTest, RejectsInvalidFamilies) {
  Registry registry;
  const auto rejected = [](const absl::Status& status, absl::string_view needle) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr(needle));
  };
  rejected(registry.AddGauge({"1forge", "x", {}}).status(), "\"1forge\" does not match");
  rejected(registry.AddGauge({"forge-jobs", "x", {}}).status(), "\"forge-jobs\" does not match");
  rejected(registry.AddGauge({"", "x", {}}).status(), "does not match");
  rejected(registry.AddCounter({"forge_jobs", "x", {}}).status(), "must end in \"_total\"");
  rejected(registry.AddGauge({"forge_jobs_total", "x", {}}).status(), "\"_total\" is reserved");
  rejected(registry.AddGauge({"forge_jobs_count", "x", {}}).status(), "\"_count\" is reserved");
  rejected(registry.AddHistogram({"forge_x_bucket", "x", {}}, {}).status(),
           "\"_bucket\" is reserved");
  rejected(registry.AddGauge({"forge_jobs", "", {}}).status(), "help text is empty");
  rejected(registry.AddGauge({"forge_jobs", "x", {{"bad-label", "v"}}}).status(),
           "label name \"bad-label\" does not match");
  rejected(registry.AddGauge({"forge_jobs", "x", {{"__name", "v"}}}).status(),
           "\"__name\" is reserved");
  rejected(registry.AddGauge({"forge_jobs", "x", {{"le", "v"}}}).status(), "\"le\" is reserved");
  rejected(registry.AddHistogram({"forge_h", "x", {}}, {1, 1}).status(), "must increase strictly");
  rejected(registry.AddHistogram({"forge_h", "x", {}}, {2, 1}).status(), "must increase strictly");
  rejected(registry.AddHistogram({"forge_h", "x", {}}, {1, std::nan("")}).status(), "not finite");
  rejected(registry.AddHistogram({"forge_h", "x", {}}, ExponentialBuckets(0, 2, 3)).status(),
           "must increase strictly");
  // Colons are legal in metric names.
  EXPECT_TRUE(registry.AddGauge({"forge:jobs", "x", {}}).ok());
}

TEST(MetricsTest, RejectsDuplicateFamilyNames) {
  Registry registry;
  ASSERT_TRUE(registry.AddGauge({"forge_jobs", "Jobs.", {}}).ok());
  absl::Status status = registry.AddHistogram({"forge_jobs", "Jobs.", {}}, {1}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(status.message(), HasSubstr("\"forge_jobs\""));
}

TEST(MetricsTest, SerializeRejectsTheSameNameFromTwoRegistries) {
  Registry first;
  Registry second;
  (*first.AddGauge({"forge_jobs", "Jobs.", {}}))->Add({}).Set(1);
  (*second.AddGauge({"forge_jobs", "Jobs.", {}}))->Add({}).Set(2);
  std::vector<FamilySnapshot> families = first.Collect();
  for (FamilySnapshot& family : second.Collect()) families.push_back(std::move(family));
  absl::StatusOr<std::string> text = SerializeText(std::move(families));
  EXPECT_EQ(text.status().code(), absl::StatusCode::kAlreadyExists) << text.status();
}

TEST(MetricsTest, FamiliesWithoutChildrenAreLeftOut) {
  Registry registry;
  ASSERT_TRUE(registry.AddCounter({"forge_unused_total", "Unused.", {}}).ok());
  EXPECT_EQ(Serialize(registry), "");
}

TEST(MetricsTest, ExponentialBuckets) {
  EXPECT_EQ(ExponentialBuckets(0.001, 2, 4), (std::vector<double>{0.001, 0.002, 0.004, 0.008}));
  EXPECT_TRUE(ExponentialBuckets(1, 2, 0).empty());
}

TEST(MetricsDeathTest, AddAbortsOnInvalidLabelNames) {
  Registry registry;
  absl::StatusOr<Family<Counter>*> family =
      registry.AddCounter({"forge_jobs_total", "Jobs.", {{"service", "worker"}}});
  ASSERT_TRUE(family.ok()) << family.status();
  EXPECT_DEATH((*family)->Add({{"bad-name", "x"}}), "forge_jobs_total.*label name \"bad-name\"");
  EXPECT_DEATH((*family)->Add({{"le", "x"}}), "label name \"le\" is reserved");
  EXPECT_DEATH((*family)->Add({{"service", "x"}}), "\"service\" is already a constant label");
}

}  // namespace
}  // namespace forge::metrics

// Metrics registry shaped like prometheus-cpp, and its Prometheus text serializer (format 0.0.4).
//
//   Registry registry;
//   absl::StatusOr<Family<Counter>*> jobs =
//       registry.AddCounter({"forge_jobs_total", "Jobs submitted.", {}});
//   Counter& cuda_jobs = (*jobs)->Add({{"backend", "cuda"}});  // keep it: the reference is stable
//   cuda_jobs.Increment();
//   absl::StatusOr<std::string> text = SerializeText(registry.Collect());
//
// Errors: registering a family returns a Status (bad name, help, labels or buckets; duplicate
// name). Family::Add aborts on an invalid label name instead: label names are literals in the
// calling code, so a bad one is a programming error, and Add must stay cheap to call on a hot path.
//
// Cost: Increment/Set/Observe are lock-free atomics. Family::Add takes the family's mutex (shared
// unless it creates the child); Collect takes it shared, briefly, to list the children.
#ifndef FORGE_COMMON_METRICS_METRICS_H_
#define FORGE_COMMON_METRICS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace forge::metrics {

template <typename Metric>
class Family;
class Registry;

// Label name -> value. Ordered, so a label set has one spelling and series sort deterministically.
using Labels = std::map<std::string, std::string>;

// The Content-Type of SerializeText's output.
inline constexpr absl::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

struct SeriesSnapshot;

// A value that only goes up.
class Counter {
 public:
  // Negative and NaN amounts are ignored: a counter never goes down (prometheus-cpp does the same).
  void Increment(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  template <typename Metric>
  friend class Family;
  Counter() = default;
  void CollectInto(SeriesSnapshot* series) const;

  std::atomic<double> value_{0.0};
};

// A value that goes up and down.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Decrement(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  friend class Registry;
  template <typename Metric>
  friend class Family;
  Gauge() = default;
  void CollectInto(SeriesSnapshot* series) const;

  std::atomic<double> value_{0.0};
};

// Counts observations into buckets with fixed upper bounds, shared by every child of a family so
// that the children can be aggregated.
class Histogram {
 public:
  // Counts value in the first bucket whose upper bound is >= value (+Inf: larger values, NaN).
  void Observe(double value);

 private:
  friend class Registry;
  template <typename Metric>
  friend class Family;
  explicit Histogram(std::shared_ptr<const std::vector<double>> upper_bounds);
  void CollectInto(SeriesSnapshot* series) const;

  std::shared_ptr<const std::vector<double>> upper_bounds_;  // strictly increasing, finite
  // Per-bucket (not cumulative) counts; the last one is the +Inf bucket.
  std::unique_ptr<std::atomic<uint64_t>[]> bucket_counts_;
  std::atomic<double> sum_{0.0};
};

// Upper bounds start, start*factor, ..., count of them. Registration rejects what is not strictly
// increasing, so start <= 0 or factor <= 1 fail there.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// What names a family: the metric name (counters must end in "_total", other types must not),
// the help text (required), and labels every child carries.
struct FamilyOptions {
  std::string name;
  std::string help;
  Labels constant_labels;
};

// Point-in-time values, the serializer's input.
struct SeriesSnapshot {
  Labels labels;                            // constant and child labels together
  double value = 0;                         // counter, gauge
  std::vector<uint64_t> cumulative_counts;  // histogram: one per upper bound, then +Inf
  double sum = 0;                           // histogram
};
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<double> upper_bounds;    // histogram only, without +Inf
  std::vector<SeriesSnapshot> series;  // ordered by the child's own labels
};

namespace internal {
// The registry's view of a family of any metric type.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  virtual FamilySnapshot Collect() const = 0;
};
}  // namespace internal

// The metrics of one name: one child metric per label set. Owned by its Registry.
template <typename Metric>
class Family final : public internal::FamilyBase {
 public:
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  // The child for labels, created on first use; the same labels give the same child. The
  // reference stays valid as long as the Registry. Aborts, naming the family and label, when a
  // label name is invalid, reserved ("le", "quantile", "__" prefix) or also a constant label.
  Metric& Add(const Labels& labels);

  FamilySnapshot Collect() const override;

 private:
  friend class Registry;
  Family(FamilyOptions options, MetricType type, std::vector<double> upper_bounds,
         std::function<std::unique_ptr<Metric>()> make_child);

  const FamilyOptions options_;
  const MetricType type_;
  const std::vector<double> upper_bounds_;
  const std::function<std::unique_ptr<Metric>()> make_child_;
  mutable absl::Mutex mutex_;
  std::map<Labels, std::unique_ptr<Metric>> children_ ABSL_GUARDED_BY(mutex_);
};

// Defined in metrics.cc for these three types only.
extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// Owns metric families. Thread-safe.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // InvalidArgument for a bad name, empty help or bad constant label; AlreadyExists for a name
  // this registry already has. The family lives as long as the registry.
  absl::StatusOr<Family<Counter>*> AddCounter(FamilyOptions options);
  absl::StatusOr<Family<Gauge>*> AddGauge(FamilyOptions options);
  // upper_bounds: finite and strictly increasing; the +Inf bucket is implicit.
  absl::StatusOr<Family<Histogram>*> AddHistogram(FamilyOptions options,
                                                  std::vector<double> upper_bounds);

  // Every family that has at least one child, ordered by name.
  std::vector<FamilySnapshot> Collect() const;

 private:
  template <typename Metric>
  absl::StatusOr<Family<Metric>*> Register(FamilyOptions options, MetricType type,
                                           std::vector<double> upper_bounds,
                                           std::function<std::unique_ptr<Metric>()> make_child);

  mutable absl::Mutex mutex_;
  std::map<std::string, std::unique_ptr<internal::FamilyBase>> families_ ABSL_GUARDED_BY(mutex_);
};

// The text exposition format 0.0.4, families ordered by name. Families may come from several
// registries; two with the same name are an error (AlreadyExists), since the output would be
// ambiguous. Label values that are not valid UTF-8 get U+FFFD in place of the bad bytes, because
// Prometheus rejects the whole scrape otherwise.
absl::StatusOr<std::string> SerializeText(std::vector<FamilySnapshot> families);

}  // namespace forge::metrics

#endif  // FORGE_COMMON_METRICS_METRICS_H_

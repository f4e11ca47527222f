#include "common/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/text/utf8.h"

namespace forge::metrics {
namespace {

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(absl::string_view name) {
  if (name.empty() || IsAsciiDigit(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return IsAsciiLetter(c) || IsAsciiDigit(c) || c == '_' || c == ':';
  });
}

// [a-zA-Z_][a-zA-Z0-9_]*
bool IsValidLabelName(absl::string_view name) {
  if (name.empty() || IsAsciiDigit(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAsciiLetter(c) || IsAsciiDigit(c) || c == '_'; });
}

absl::Status ValidateLabelNames(absl::string_view metric, const Labels& labels) {
  for (const auto& [name, value] : labels) {
    if (!IsValidLabelName(name)) {
      return absl::InvalidArgumentError(absl::StrCat("metric \"", metric, "\": label name \"", name,
                                                     "\" does not match [a-zA-Z_][a-zA-Z0-9_]*"));
    }
    // "__" is Prometheus's own prefix; "le" names histogram buckets and "quantile" summary
    // quantiles, and promtool rejects either on any other type.
    if (absl::StartsWith(name, "__") || name == "le" || name == "quantile") {
      return absl::InvalidArgumentError(
          absl::StrCat("metric \"", metric, "\": label name \"", name, "\" is reserved"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChildLabels(const FamilyOptions& options, const Labels& labels) {
  if (absl::Status status = ValidateLabelNames(options.name, labels); !status.ok()) return status;
  for (const auto& [name, value] : labels) {
    if (options.constant_labels.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("metric \"", options.name, "\": label \"",
                                                     name, "\" is already a constant label"));
    }
  }
  return absl::OkStatus();
}

// The suffixes the exposition format gives meaning to: counters end in "_total", and a histogram
// "x" emits x_bucket, x_sum and x_count. Requiring them exactly where they belong keeps promtool's
// lint quiet and makes sample names of different families unable to collide.
absl::Status ValidateFamily(const FamilyOptions& options, MetricType type) {
  const std::string& name = options.name;
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name \"", name, "\" does not match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (type == MetricType::kCounter) {
    if (!absl::EndsWith(name, "_total")) {
      return absl::InvalidArgumentError(
          absl::StrCat("counter \"", name, "\": counter names must end in \"_total\""));
    }
  } else {
    for (absl::string_view suffix : {"_total", "_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(name, suffix)) {
        return absl::InvalidArgumentError(
            absl::StrCat("metric \"", name, "\": the suffix \"", suffix,
                         "\" is reserved (counters end in _total; histograms add _bucket, _sum "
                         "and _count)"));
      }
    }
  }
  if (options.help.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metric \"", name, "\": help text is empty"));
  }
  return ValidateLabelNames(name, options.constant_labels);
}

absl::Status ValidateUpperBounds(absl::string_view metric, const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram \"", metric, "\": bucket bound ", i,
                                                     " is not finite (+Inf is implicit)"));
    }
    if (i > 0 && bounds[i] <= bounds[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram \"", metric, "\": bucket bounds must increase strictly, but bound ", i, " (",
          bounds[i], ") follows ", bounds[i - 1]));
    }
  }
  return absl::OkStatus();
}

[[noreturn]] void DieOnInvalidLabels(const absl::Status& status) {
  std::fprintf(stderr, "forge::metrics: Family::Add: %s\n", status.ToString().c_str());
  std::abort();
}

// The text format's number syntax, which Prometheus parses with Go's ParseFloat: shortest
// round-trip decimal, and +Inf, -Inf, NaN spelled its way.
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void AppendEscapedHelp(std::string* out, absl::string_view help) {
  for (char c : help) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

void AppendEscapedLabelValue(std::string* out, absl::string_view value) {
  while (!value.empty()) {
    const size_t length = Utf8SequenceLength(value);
    if (length == 0) {
      out->append(kUtf8ReplacementCharacter.data(), kUtf8ReplacementCharacter.size());
      value.remove_prefix(1);
      continue;
    }
    if (value[0] == '\\') {
      out->append("\\\\");
    } else if (value[0] == '"') {
      out->append("\\\"");
    } else if (value[0] == '\n') {
      out->append("\\n");
    } else {
      out->append(value.data(), length);
    }
    value.remove_prefix(length);
  }
}

void AppendLabel(std::string* out, absl::string_view name, absl::string_view value) {
  absl::StrAppend(out, name, "=\"");
  AppendEscapedLabelValue(out, value);
  out->push_back('"');
}

// name{labels[,le="bound"]} value
void AppendSample(std::string* out, absl::string_view name, const Labels& labels,
                  const std::string* bucket_bound, absl::string_view value) {
  out->append(name.data(), name.size());
  if (!labels.empty() || bucket_bound != nullptr) {
    out->push_back('{');
    bool first = true;
    for (const auto& [label, label_value] : labels) {
      if (!first) out->push_back(',');
      first = false;
      AppendLabel(out, label, label_value);
    }
    if (bucket_bound != nullptr) {
      if (!first) out->push_back(',');
      AppendLabel(out, "le", *bucket_bound);
    }
    out->push_back('}');
  }
  absl::StrAppend(out, " ", value, "\n");
}

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

void AppendHistogramSeries(std::string* out, const FamilySnapshot& family,
                           const SeriesSnapshot& series) {
  const std::string bucket_name = absl::StrCat(family.name, "_bucket");
  for (size_t i = 0; i <= family.upper_bounds.size(); ++i) {
    const std::string bound =
        i < family.upper_bounds.size() ? FormatValue(family.upper_bounds[i]) : "+Inf";
    AppendSample(out, bucket_name, series.labels, &bound,
                 absl::StrCat(series.cumulative_counts[i]));
  }
  AppendSample(out, absl::StrCat(family.name, "_sum"), series.labels, nullptr,
               FormatValue(series.sum));
  AppendSample(out, absl::StrCat(family.name, "_count"), series.labels, nullptr,
               absl::StrCat(series.cumulative_counts.back()));
}

}  // namespace

void Counter::Increment(double amount) {
  if (!(amount >= 0)) return;  // also false for NaN
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Counter::CollectInto(SeriesSnapshot* series) const { series->value = Value(); }

void Gauge::CollectInto(SeriesSnapshot* series) const { series->value = Value(); }

Histogram::Histogram(std::shared_ptr<const std::vector<double>> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      bucket_counts_(std::make_unique<std::atomic<uint64_t>[]>(upper_bounds_->size() + 1)) {}

void Histogram::Observe(double value) {
  const std::vector<double>& bounds = *upper_bounds_;
  const size_t bucket =
      std::isnan(value) ? bounds.size()
                        : std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin();
  bucket_counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

void Histogram::CollectInto(SeriesSnapshot* series) const {
  // _count is taken from the same reads as the buckets, so it always equals the +Inf bucket even
  // while other threads observe.
  uint64_t cumulative = 0;
  series->cumulative_counts.reserve(upper_bounds_->size() + 1);
  for (size_t i = 0; i <= upper_bounds_->size(); ++i) {
    cumulative += bucket_counts_[i].load(std::memory_order_relaxed);
    series->cumulative_counts.push_back(cumulative);
  }
  series->sum = sum_.load(std::memory_order_relaxed);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i) {
    bounds.push_back(bound);
    bound *= factor;
  }
  return bounds;
}

template <typename Metric>
Family<Metric>::Family(FamilyOptions options, MetricType type, std::vector<double> upper_bounds,
                       std::function<std::unique_ptr<Metric>()> make_child)
    : options_(std::move(options)),
      type_(type),
      upper_bounds_(std::move(upper_bounds)),
      make_child_(std::move(make_child)) {}

template <typename Metric>
Metric& Family<Metric>::Add(const Labels& labels) {
  {
    absl::ReaderMutexLock lock(&mutex_);
    auto it = children_.find(labels);
    if (it != children_.end()) return *it->second;
  }
  if (absl::Status status = ValidateChildLabels(options_, labels); !status.ok()) {
    DieOnInvalidLabels(status);
  }
  absl::MutexLock lock(&mutex_);
  auto [it, inserted] = children_.try_emplace(labels);
  if (inserted) it->second = make_child_();
  return *it->second;
}

template <typename Metric>
FamilySnapshot Family<Metric>::Collect() const {
  FamilySnapshot snapshot{options_.name, options_.help, type_, upper_bounds_, {}};
  absl::ReaderMutexLock lock(&mutex_);
  snapshot.series.reserve(children_.size());
  for (const auto& [labels, child] : children_) {
    SeriesSnapshot& series = snapshot.series.emplace_back();
    series.labels = options_.constant_labels;
    series.labels.insert(labels.begin(), labels.end());
    child->CollectInto(&series);
  }
  return snapshot;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

template <typename Metric>
absl::StatusOr<Family<Metric>*> Registry::Register(
    FamilyOptions options, MetricType type, std::vector<double> upper_bounds,
    std::function<std::unique_ptr<Metric>()> make_child) {
  if (absl::Status status = ValidateFamily(options, type); !status.ok()) return status;
  absl::MutexLock lock(&mutex_);
  if (families_.contains(options.name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("metric \"", options.name, "\" is already registered"));
  }
  const std::string name = options.name;
  auto* family =
      new Family<Metric>(std::move(options), type, std::move(upper_bounds), std::move(make_child));
  families_.emplace(name, std::unique_ptr<internal::FamilyBase>(family));
  return family;
}

absl::StatusOr<Family<Counter>*> Registry::AddCounter(FamilyOptions options) {
  return Register<Counter>(std::move(options), MetricType::kCounter, {},
                           [] { return std::unique_ptr<Counter>(new Counter()); });
}

absl::StatusOr<Family<Gauge>*> Registry::AddGauge(FamilyOptions options) {
  return Register<Gauge>(std::move(options), MetricType::kGauge, {},
                         [] { return std::unique_ptr<Gauge>(new Gauge()); });
}

absl::StatusOr<Family<Histogram>*> Registry::AddHistogram(FamilyOptions options,
                                                          std::vector<double> upper_bounds) {
  if (absl::Status status = ValidateUpperBounds(options.name, upper_bounds); !status.ok()) {
    return status;
  }
  auto shared_bounds = std::make_shared<const std::vector<double>>(upper_bounds);
  return Register<Histogram>(
      std::move(options), MetricType::kHistogram, std::move(upper_bounds),
      [shared_bounds] { return std::unique_ptr<Histogram>(new Histogram(shared_bounds)); });
}

std::vector<FamilySnapshot> Registry::Collect() const {
  std::vector<FamilySnapshot> snapshots;
  absl::ReaderMutexLock lock(&mutex_);
  for (const auto& [name, family] : families_) {
    FamilySnapshot snapshot = family->Collect();
    if (!snapshot.series.empty()) snapshots.push_back(std::move(snapshot));
  }
  return snapshots;
}

absl::StatusOr<std::string> SerializeText(std::vector<FamilySnapshot> families) {
  std::sort(families.begin(), families.end(),
            [](const FamilySnapshot& a, const FamilySnapshot& b) { return a.name < b.name; });
  for (size_t i = 1; i < families.size(); ++i) {
    if (families[i].name == families[i - 1].name) {
      return absl::AlreadyExistsError(
          absl::StrCat("two metric families are named \"", families[i].name, "\""));
    }
  }
  std::string out;
  for (const FamilySnapshot& family : families) {
    absl::StrAppend(&out, "# HELP ", family.name, " ");
    AppendEscapedHelp(&out, family.help);
    absl::StrAppend(&out, "\n# TYPE ", family.name, " ", TypeName(family.type), "\n");
    for (const SeriesSnapshot& series : family.series) {
      if (family.type == MetricType::kHistogram) {
        AppendHistogramSeries(&out, family, series);
      } else {
        AppendSample(&out, family.name, series.labels, nullptr, FormatValue(series.value));
      }
    }
  }
  return out;
}

}  // namespace forge::metrics

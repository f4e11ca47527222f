#include "compiler/cost/learned/learned_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status/status_macros.h"
#include "compiler/cost/learned/features.h"
#include "xgboost/c_api.h"

namespace forge::cost {

// The booster handle, freed with the last model that shares it; XGBoost calls on one handle are
// serialized by the mutex (prediction caches per-handle state).
struct LearnedModel::Booster {
  BoosterHandle handle = nullptr;
  std::mutex mutex;
  ~Booster() {
    if (handle != nullptr) XGBoosterFree(handle);
  }
};

namespace {

constexpr char kAttributeTarget[] = "forge_target";
constexpr char kAttributeSchema[] = "forge_feature_schema";
constexpr char kAttributeRows[] = "forge_training_rows";
constexpr char kAttributeGroups[] = "forge_training_groups";
constexpr char kAttributeFamilyRows[] = "forge_family_rows";  // "family=rows;..."

std::string FormatFamilyRows(const std::map<int, int64_t>& rows) {
  std::vector<std::string> parts;
  for (const auto& [family, count] : rows) parts.push_back(absl::StrCat(family, "=", count));
  return absl::StrJoin(parts, ";");
}

absl::StatusOr<std::map<int, int64_t>> ParseFamilyRows(absl::string_view text) {
  std::map<int, int64_t> rows;
  for (const absl::string_view part : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    const std::pair<absl::string_view, absl::string_view> pair = absl::StrSplit(part, '=');
    int family = 0;
    int64_t count = 0;
    if (!absl::SimpleAtoi(pair.first, &family) || !absl::SimpleAtoi(pair.second, &count)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the performance model's rows per family are malformed: '", text, "'"));
    }
    rows[family] = count;
  }
  return rows;
}

absl::Status Check(int rc, absl::string_view what) {
  if (rc == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("XGBoost ", what, ": ", XGBGetLastError()));
}

// A DMatrix freed at scope end.
class Matrix {
 public:
  ~Matrix() {
    if (handle_ != nullptr) XGDMatrixFree(handle_);
  }
  static absl::StatusOr<std::unique_ptr<Matrix>> Dense(
      absl::Span<const std::vector<float>> rows) {
    const std::size_t columns = FeatureNames().size();
    std::vector<float> data;
    data.reserve(rows.size() * columns);
    for (const std::vector<float>& row : rows) {
      if (row.size() != columns) {
        return absl::InvalidArgumentError(absl::StrCat("a feature row has ", row.size(),
                                                       " values; the schema has ", columns));
      }
      data.insert(data.end(), row.begin(), row.end());
    }
    auto matrix = std::unique_ptr<Matrix>(new Matrix());
    FORGE_RETURN_IF_ERROR(Check(XGDMatrixCreateFromMat(data.data(), rows.size(), columns,
                                                       std::numeric_limits<float>::quiet_NaN(),
                                                       &matrix->handle_),
                                "DMatrix"));
    return matrix;
  }
  DMatrixHandle handle() const { return handle_; }

 private:
  Matrix() = default;
  DMatrixHandle handle_ = nullptr;
};

double TargetOf(Target target, double measured, double analytic) {
  return target == Target::kLogSeconds ? std::log(measured) : std::log(measured / analytic);
}

double SecondsOf(Target target, double predicted, double analytic) {
  return target == Target::kLogSeconds ? std::exp(predicted) : analytic * std::exp(predicted);
}

// XGBoosterPredictFromDMatrix's "type": the values, or pred_contribs (SHAP: one value per
// feature, then the bias).
constexpr int kPredictValues = 0;
constexpr int kPredictContributions = 2;

// The predictions of `type` for `matrix`, all rows flattened; valid until the next call on
// `handle` (the caller holds the booster's mutex).
absl::StatusOr<absl::Span<const float>> PredictLocked(BoosterHandle handle, DMatrixHandle matrix,
                                                      int type) {
  const bst_ulong* shape = nullptr;
  bst_ulong dimensions = 0;
  const float* values = nullptr;
  const std::string config = absl::StrCat(
      R"({"type": )", type,
      R"(, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false})");
  FORGE_RETURN_IF_ERROR(Check(
      XGBoosterPredictFromDMatrix(handle, matrix, config.c_str(), &shape, &dimensions, &values),
      type == kPredictValues ? "predict" : "contributions"));
  size_t total = 1;
  for (bst_ulong i = 0; i < dimensions; ++i) total *= shape[i];
  return absl::MakeConstSpan(values, total);
}

absl::StatusOr<std::string> Attribute(BoosterHandle handle, const char* key) {
  const char* value = nullptr;
  int found = 0;
  FORGE_RETURN_IF_ERROR(Check(XGBoosterGetAttr(handle, key, &value, &found), "attribute"));
  if (found == 0 || value == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a Forge performance model: no '", key, "' attribute"));
  }
  return std::string(value);
}

}  // namespace

absl::string_view TargetName(Target target) {
  switch (target) {
    case Target::kLogSeconds: return "log_seconds";
    case Target::kLogRatioToAnalytic: return "log_ratio_to_analytic";
  }
  return "unknown";
}

absl::StatusOr<Target> ParseTarget(absl::string_view name) {
  for (const Target target : {Target::kLogSeconds, Target::kLogRatioToAnalytic}) {
    if (name == TargetName(target)) return target;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown performance model target '", name, "' (log_seconds or log_ratio_to_analytic)"));
}

absl::StatusOr<LearnedModel> LearnedModel::Train(absl::Span<const TrainingRow> rows,
                                                 const TrainOptions& options) {
  if (rows.empty()) return absl::InvalidArgumentError("no training rows");
  if (options.rounds <= 0) return absl::InvalidArgumentError("training needs rounds > 0");
  std::vector<std::vector<float>> features;
  std::vector<float> labels;
  std::set<std::string> groups;
  std::map<int, int64_t> family_rows;
  for (const TrainingRow& row : rows) {
    if (!(row.measured_seconds > 0) || !(row.analytic_seconds > 0) ||
        !std::isfinite(row.measured_seconds) || !std::isfinite(row.analytic_seconds)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a training row needs positive finite times: measured ", row.measured_seconds,
          " s, analytic ", row.analytic_seconds, " s"));
    }
    features.push_back(row.features);
    if (const int family = TaskFamilyOf(row.features); family != 0) ++family_rows[family];
    labels.push_back(static_cast<float>(
        TargetOf(options.target, row.measured_seconds, row.analytic_seconds)));
    groups.insert(row.group);
  }
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<Matrix> matrix, Matrix::Dense(features));
  FORGE_RETURN_IF_ERROR(Check(
      XGDMatrixSetFloatInfo(matrix->handle(), "label", labels.data(), labels.size()), "labels"));

  auto booster = std::make_shared<Booster>();
  DMatrixHandle train[] = {matrix->handle()};
  FORGE_RETURN_IF_ERROR(Check(XGBoosterCreate(train, 1, &booster->handle), "create"));
  const std::vector<std::pair<std::string, std::string>> parameters = {
      {"objective", "reg:squarederror"},
      {"tree_method", "hist"},
      {"max_depth", absl::StrCat(options.max_depth)},
      {"eta", absl::StrFormat("%g", options.learning_rate)},
      {"subsample", absl::StrFormat("%g", options.subsample)},
      {"min_child_weight", absl::StrFormat("%g", options.min_child_weight)},
      {"nthread", absl::StrCat(std::max(1, options.threads))},
      {"seed", absl::StrCat(options.seed)},
      {"verbosity", "0"},
  };
  for (const auto& [name, value] : parameters) {
    FORGE_RETURN_IF_ERROR(Check(XGBoosterSetParam(booster->handle, name.c_str(), value.c_str()),
                                absl::StrCat("parameter ", name)));
  }
  for (int round = 0; round < options.rounds; ++round) {
    FORGE_RETURN_IF_ERROR(
        Check(XGBoosterUpdateOneIter(booster->handle, round, matrix->handle()), "training"));
  }
  const std::string target(TargetName(options.target));
  const std::string row_count = absl::StrCat(rows.size());
  const std::string group_count = absl::StrCat(groups.size());
  const std::string family_counts = FormatFamilyRows(family_rows);
  for (const auto& [key, value] :
       std::vector<std::pair<const char*, const std::string*>>{
           {kAttributeTarget, &target},
           {kAttributeSchema, &FeatureSchemaDigest()},
           {kAttributeRows, &row_count},
           {kAttributeGroups, &group_count},
           {kAttributeFamilyRows, &family_counts}}) {
    FORGE_RETURN_IF_ERROR(
        Check(XGBoosterSetAttr(booster->handle, key, value->c_str()), "attribute"));
  }
  return LearnedModel(std::move(booster), options.target, static_cast<int64_t>(rows.size()),
                      static_cast<int64_t>(groups.size()), std::move(family_rows));
}

absl::StatusOr<LearnedModel> LearnedModel::Deserialize(absl::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("empty performance model bytes");
  auto booster = std::make_shared<Booster>();
  FORGE_RETURN_IF_ERROR(Check(XGBoosterCreate(nullptr, 0, &booster->handle), "create"));
  if (XGBoosterLoadModelFromBuffer(booster->handle, bytes.data(), bytes.size()) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an XGBoost model: ", XGBGetLastError()));
  }
  FORGE_ASSIGN_OR_RETURN(const std::string schema, Attribute(booster->handle, kAttributeSchema));
  if (schema != FeatureSchemaDigest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the performance model was trained on feature schema ", schema,
                     "; this build's is ", FeatureSchemaDigest(), " (retrain it)"));
  }
  FORGE_ASSIGN_OR_RETURN(const std::string target_name,
                         Attribute(booster->handle, kAttributeTarget));
  FORGE_ASSIGN_OR_RETURN(const Target target, ParseTarget(target_name));
  FORGE_ASSIGN_OR_RETURN(const std::string rows_text, Attribute(booster->handle, kAttributeRows));
  FORGE_ASSIGN_OR_RETURN(const std::string groups_text,
                         Attribute(booster->handle, kAttributeGroups));
  int64_t rows = 0;
  int64_t groups = 0;
  if (!absl::SimpleAtoi(rows_text, &rows) || !absl::SimpleAtoi(groups_text, &groups)) {
    return absl::InvalidArgumentError("the performance model's training counts are not numbers");
  }
  FORGE_ASSIGN_OR_RETURN(const std::string family_text,
                         Attribute(booster->handle, kAttributeFamilyRows));
  using FamilyRows = std::map<int, int64_t>;
  FORGE_ASSIGN_OR_RETURN(FamilyRows family_rows, ParseFamilyRows(family_text));
  return LearnedModel(std::move(booster), target, rows, groups, std::move(family_rows));
}

int64_t LearnedModel::family_rows(int family) const {
  const auto it = family_rows_.find(family);
  return it == family_rows_.end() ? 0 : it->second;
}

absl::StatusOr<std::string> LearnedModel::Serialize() const {
  std::lock_guard<std::mutex> lock(booster_->mutex);
  bst_ulong length = 0;
  const char* data = nullptr;
  FORGE_RETURN_IF_ERROR(Check(
      XGBoosterSaveModelToBuffer(booster_->handle, R"({"format": "ubj"})", &length, &data),
      "save"));
  return std::string(data, length);
}

absl::StatusOr<std::vector<double>> LearnedModel::PredictSeconds(
    absl::Span<const std::vector<float>> features,
    absl::Span<const double> analytic_seconds) const {
  if (features.size() != analytic_seconds.size()) {
    return absl::InvalidArgumentError(absl::StrCat(features.size(), " feature rows but ",
                                                   analytic_seconds.size(),
                                                   " analytic predictions"));
  }
  if (features.empty()) return std::vector<double>();
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<Matrix> matrix, Matrix::Dense(features));
  std::vector<double> seconds;
  seconds.reserve(features.size());
  std::lock_guard<std::mutex> lock(booster_->mutex);
  FORGE_ASSIGN_OR_RETURN(const absl::Span<const float> predicted,
                         PredictLocked(booster_->handle, matrix->handle(), kPredictValues));
  if (predicted.size() != features.size()) {
    return absl::InternalError(absl::StrCat("XGBoost gave ", predicted.size(),
                                            " predictions for ", features.size(), " rows"));
  }
  for (std::size_t i = 0; i < features.size(); ++i) {
    seconds.push_back(SecondsOf(target_, predicted[i], analytic_seconds[i]));
  }
  return seconds;
}

absl::StatusOr<double> LearnedModel::PredictSeconds(const std::vector<float>& features,
                                                    double analytic_seconds) const {
  FORGE_ASSIGN_OR_RETURN(
      const std::vector<double> seconds,
      PredictSeconds(absl::MakeConstSpan(&features, 1), absl::MakeConstSpan(&analytic_seconds, 1)));
  return seconds.front();
}

absl::StatusOr<LearnedModel::Contributions> LearnedModel::Explain(
    const std::vector<float>& features) const {
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<Matrix> matrix,
                         Matrix::Dense(absl::MakeConstSpan(&features, 1)));
  std::lock_guard<std::mutex> lock(booster_->mutex);
  FORGE_ASSIGN_OR_RETURN(const absl::Span<const float> values,
                         PredictLocked(booster_->handle, matrix->handle(), kPredictContributions));
  const size_t columns = FeatureNames().size();
  if (values.size() != columns + 1) {
    return absl::InternalError(absl::StrCat("XGBoost gave ", values.size(), " contributions for ",
                                            columns, " features and the bias"));
  }
  Contributions out;
  out.bias = values[columns];
  for (size_t i = 0; i < columns; ++i) {
    if (values[i] != 0) out.features.emplace_back(FeatureNames()[i], values[i]);
  }
  std::sort(out.features.begin(), out.features.end(), [](const auto& a, const auto& b) {
    return std::abs(a.second) > std::abs(b.second);
  });
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, double>>> LearnedModel::Importance() const {
  std::lock_guard<std::mutex> lock(booster_->mutex);
  bst_ulong count = 0;
  const char** names = nullptr;
  bst_ulong dimensions = 0;
  const bst_ulong* shape = nullptr;
  const float* scores = nullptr;
  FORGE_RETURN_IF_ERROR(Check(XGBoosterFeatureScore(booster_->handle,
                                                    R"({"importance_type": "total_gain"})",
                                                    &count, &names, &dimensions, &shape, &scores),
                              "feature importance"));
  std::vector<std::pair<std::string, double>> importance;
  for (bst_ulong i = 0; i < count; ++i) {
    // Unnamed features are "f<index>".
    std::string name = names[i];
    std::size_t index = 0;
    if (name.size() > 1 && name[0] == 'f' && absl::SimpleAtoi(name.substr(1), &index) &&
        index < FeatureNames().size()) {
      name = FeatureNames()[index];
    }
    importance.emplace_back(std::move(name), scores[i]);
  }
  std::sort(importance.begin(), importance.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  return importance;
}

}  // namespace forge::cost

// MCTS against uniform random sampling at equal budget, on the tasks of exported models, with the
// emulated backend as the oracle (README.md beside this file).
//
//   forge_search_bench [--gpu=H200] [--seeds=10] [--batch=4] [--threads=2] [--exploration=1]
//                      [--cache=DIR] [--out=PREFIX] MODEL_DIR...
//
// Every MODEL_DIR holds a graph.pb (tests/fixtures/make_models.py or benchmarks/gpu/problems.py
// export). Each graph is partitioned; every distinct task with a search space is benchmarked.
// The oracle predicts every valid point of the space and the task's ATen baseline once (NVRTC
// compile + perf model, EmulatedBackend::Predict; predictions cached per candidate digest); a
// candidate's reward is its predicted speedup over the baseline, a compile failure reward none.
// Then, per searcher and seed, the search proposes `batch` candidates at a time, records their
// rewards, and goes on until it has made 64 trials and found the space's best predicted time, or
// exhausted the space. Results: PREFIX.md (tables) and PREFIX.json (raw).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/arch/arch.h"
#include "common/status/status_macros.h"
#include "common/text/json.h"
#include "compiler/graph/partition.h"
#include "compiler/search/candidate.h"
#include "compiler/search/prior.h"
#include "compiler/search/searcher.h"
#include "forge/v1/graph.pb.h"
#include "worker/compile/compile_pool.h"
#include "worker/emulated/emulated_backend.h"

namespace forge::search {
namespace {

constexpr int kBudgets[] = {8, 16, 32, 64};
constexpr double kNearBest = 1.05;  // "within 5% of the space's best predicted time"
constexpr double kAtBest = 1.001;   // the best itself, up to rounding of the predictions

struct BenchOptions {
  std::string gpu = "H200";
  int seeds = 10;
  int batch = 4;
  int threads = 2;
  double exploration = SearchOptions().exploration;
  std::string cache_dir;
  std::string out_prefix = "search-bench";
  std::vector<std::string> model_dirs;
};

struct SearcherConfig {
  std::string name;
  bool mcts = true;
  bool prior = true;
};

const std::vector<SearcherConfig>& Configs() {
  static const auto* configs = new std::vector<SearcherConfig>{
      {"mcts", true, true}, {"mcts-no-prior", true, false}, {"random", false, false}};
  return *configs;
}

// One search run: the oracle's time of every trial, in proposal order.
struct Run {
  std::vector<double> trial_us;  // +infinity for a failed candidate
};

struct TaskBench {
  std::string label;  // "<model>/<task index>"
  forge::v1::KernelTask task;
  std::vector<forge::v1::Candidate> space;
  std::string templates;
  double baseline_us = 0;
  absl::flat_hash_map<std::string, double> predicted_us;  // digest -> us; +inf: failed
  double best_us = 0;
  int failed = 0;
  std::optional<double> prior_spearman;  // unset when the prior or the oracle is flat
  std::map<std::string, std::vector<Run>> runs;  // by searcher name, one per seed
};

absl::StatusOr<BenchOptions> ParseArgs(int argc, char** argv) {
  BenchOptions options;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    const auto value = [&](absl::string_view flag) -> std::optional<std::string> {
      if (!absl::StartsWith(arg, flag)) return std::nullopt;
      return std::string(arg.substr(flag.size()));
    };
    const auto number = [&](absl::string_view flag, int& out) -> absl::Status {
      if (!absl::SimpleAtoi(*value(flag), &out) || out < 1) {
        return absl::InvalidArgumentError(absl::StrCat(arg, ": expected a positive integer"));
      }
      return absl::OkStatus();
    };
    if (value("--gpu=")) {
      options.gpu = *value("--gpu=");
    } else if (value("--seeds=")) {
      FORGE_RETURN_IF_ERROR(number("--seeds=", options.seeds));
    } else if (value("--batch=")) {
      FORGE_RETURN_IF_ERROR(number("--batch=", options.batch));
    } else if (value("--threads=")) {
      FORGE_RETURN_IF_ERROR(number("--threads=", options.threads));
    } else if (value("--exploration=")) {
      if (!absl::SimpleAtod(*value("--exploration="), &options.exploration) ||
          options.exploration < 0) {
        return absl::InvalidArgumentError(absl::StrCat(arg, ": expected a number >= 0"));
      }
    } else if (value("--cache=")) {
      options.cache_dir = *value("--cache=");
    } else if (value("--out=")) {
      options.out_prefix = *value("--out=");
    } else if (absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    } else {
      options.model_dirs.emplace_back(arg);
    }
  }
  if (options.model_dirs.empty()) {
    return absl::InvalidArgumentError(
        "usage: forge_search_bench [--gpu=H200] [--seeds=10] [--batch=4] [--threads=2] "
        "[--exploration=1] [--cache=DIR] [--out=PREFIX] MODEL_DIR...");
  }
  return options;
}

absl::StatusOr<std::vector<TaskBench>> LoadTasks(const BenchOptions& options,
                                                 const std::string& arch) {
  std::vector<TaskBench> tasks;
  absl::flat_hash_set<std::string> seen;
  for (const std::string& directory : options.model_dirs) {
    const std::string path = directory + "/graph.pb";
    forge::v1::Graph graph;
    std::ifstream file(path, std::ios::binary);
    if (!file || !graph.ParseFromIstream(&file)) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read a Graph from ", path));
    }
    FORGE_ASSIGN_OR_RETURN(const graph::PartitionResult partition, graph::Partition(graph));
    const std::string model = directory.substr(directory.find_last_of('/') + 1);
    for (size_t t = 0; t < partition.tasks.size(); ++t) {
      const forge::v1::KernelTask& task = partition.tasks[t];
      if (!seen.insert(task.digest()).second) continue;
      TaskBench bench;
      bench.label = absl::StrCat(model, "/", t);
      bench.task = task;
      FORGE_ASSIGN_OR_RETURN(std::unique_ptr<Searcher> drain,
                             CreateRandomSearcher(task, arch, SearchOptions()));
      bench.space = drain->Propose(1 << 30);
      if (bench.space.empty()) continue;  // ATen only: nothing to search
      std::vector<std::string> templates;
      for (const forge::v1::Candidate& candidate : bench.space) {
        if (std::find(templates.begin(), templates.end(), candidate.template_name()) ==
            templates.end()) {
          templates.push_back(candidate.template_name());
        }
      }
      bench.templates = absl::StrJoin(templates, "+");
      tasks.push_back(std::move(bench));
    }
  }
  return tasks;
}

// Predicts every candidate of every task and every baseline, `threads` at a time.
absl::Status PredictAll(const BenchOptions& options, const GpuArch& gpu,
                        std::vector<TaskBench>& tasks) {
  compile::CompilePoolOptions pool_options;
  pool_options.threads = options.threads;
  pool_options.disk_cache_dir = options.cache_dir;
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<compile::CompilePool> pool,
                         compile::CompilePool::Create(pool_options));
  const emulated::EmulatedBackend backend(pool.get());

  struct Job {
    TaskBench* task;
    forge::v1::Candidate candidate;
    bool baseline;
  };
  std::vector<Job> jobs;
  for (TaskBench& task : tasks) {
    for (const forge::v1::Candidate& candidate : task.space) {
      jobs.push_back({&task, candidate, false});
    }
    FORGE_ASSIGN_OR_RETURN(forge::v1::Candidate baseline, BaselineCandidate(task.task, gpu.arch));
    jobs.push_back({&task, std::move(baseline), true});
  }
  std::atomic<size_t> next{0};
  std::mutex mutex;
  absl::Status first_error;
  const auto work = [&] {
    for (size_t i; (i = next++) < jobs.size();) {
      const Job& job = jobs[i];
      absl::StatusOr<emulated::EmulatedResult> predicted = [&]() -> decltype(predicted) {
        FORGE_ASSIGN_OR_RETURN(const codegen::GeneratedKernel kernel,
                               GenerateCandidate(job.task->task, job.candidate));
        return backend.Predict(job.task->task, kernel, options.gpu, job.candidate.digest());
      }();
      std::lock_guard<std::mutex> lock(mutex);
      if (!predicted.ok()) {
        if (first_error.ok()) first_error = Annotate(predicted.status(), job.task->label);
        continue;
      }
      const double us = predicted->result.has_measurement()
                            ? predicted->result.measurement().median_us()
                            : std::numeric_limits<double>::infinity();
      if (job.baseline) {
        job.task->baseline_us = us;
      } else {
        job.task->predicted_us[job.candidate.digest()] = us;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) threads.emplace_back(work);
  for (std::thread& thread : threads) thread.join();
  const compile::CompilePoolStats stats = pool->stats();
  std::cerr << absl::StrFormat("oracle: %d predictions, %d NVRTC compiles (%.0f s), %d disk hits\n",
                               jobs.size(), stats.compiles, stats.compile_seconds,
                               stats.disk_hits);
  return first_error;
}

// Spearman's rank correlation, ties given their mean rank; nullopt when either side is constant.
std::optional<double> Spearman(const std::vector<double>& x, const std::vector<double>& y) {
  const auto ranks = [](const std::vector<double>& values) {
    std::vector<size_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
    std::vector<double> rank(values.size());
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j < order.size() && values[order[j]] == values[order[i]]) ++j;
      for (size_t k = i; k < j; ++k) rank[order[k]] = (i + j - 1) / 2.0;
      i = j;
    }
    return rank;
  };
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double mean = (static_cast<double>(x.size()) - 1) / 2;
  double covariance = 0, var_x = 0, var_y = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    covariance += (rx[i] - mean) * (ry[i] - mean);
    var_x += (rx[i] - mean) * (rx[i] - mean);
    var_y += (ry[i] - mean) * (ry[i] - mean);
  }
  if (var_x == 0 || var_y == 0) return std::nullopt;
  return covariance / std::sqrt(var_x * var_y);
}

absl::Status Summarize(const BenchOptions& options, TaskBench& task) {
  task.best_us = std::numeric_limits<double>::infinity();
  for (const auto& [digest, us] : task.predicted_us) {
    task.best_us = std::min(task.best_us, us);
    task.failed += std::isinf(us);
  }
  FORGE_ASSIGN_OR_RETURN(const CostModelPrior prior, CostModelPrior::ForGpu(options.gpu));
  std::vector<double> prior_seconds, oracle_us;
  for (const forge::v1::Candidate& candidate : task.space) {
    const double us = task.predicted_us.at(candidate.digest());
    if (std::isinf(us)) continue;
    FORGE_ASSIGN_OR_RETURN(const codegen::GeneratedKernel kernel,
                           GenerateCandidate(task.task, candidate));
    absl::StatusOr<double> seconds = prior.PredictSeconds(task.task, kernel);
    prior_seconds.push_back(seconds.ok() ? *seconds : std::numeric_limits<double>::infinity());
    oracle_us.push_back(us);
  }
  task.prior_spearman = Spearman(prior_seconds, oracle_us);
  return absl::OkStatus();
}

absl::StatusOr<Run> Search(const BenchOptions& options, const GpuArch& gpu,
                           const SearcherConfig& config, uint64_t seed, const TaskBench& task) {
  SearchOptions search_options;
  search_options.seed = seed;
  search_options.prior_gpu = options.gpu;
  search_options.use_cost_model_prior = config.prior;
  search_options.exploration = options.exploration;
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<Searcher> searcher,
                         config.mcts ? CreateMctsSearcher(task.task, gpu.arch, search_options)
                                     : CreateRandomSearcher(task.task, gpu.arch, search_options));
  Run run;
  bool found_best = false;
  while (static_cast<int>(run.trial_us.size()) < kBudgets[std::size(kBudgets) - 1] ||
         !found_best) {
    const std::vector<forge::v1::Candidate> proposed = searcher->Propose(options.batch);
    if (proposed.empty()) break;
    for (const forge::v1::Candidate& candidate : proposed) {
      const double us = task.predicted_us.at(candidate.digest());
      run.trial_us.push_back(us);
      found_best |= us <= kAtBest * task.best_us;
      FORGE_RETURN_IF_ERROR(searcher->Record(
          candidate.digest(),
          std::isinf(us) ? std::nullopt : std::optional<double>(task.baseline_us / us)));
    }
  }
  return run;
}

// Best time among the first `budget` trials over the space's best (1 = found the best).
double BestRatio(const Run& run, int budget, double best_us) {
  const size_t trials = std::min(run.trial_us.size(), static_cast<size_t>(budget));
  return *std::min_element(run.trial_us.begin(), run.trial_us.begin() + trials) / best_us;
}

// Trials until the first within `factor` of the space's best.
int TrialsToWithin(const Run& run, double best_us, double factor) {
  for (size_t i = 0; i < run.trial_us.size(); ++i) {
    if (run.trial_us[i] <= factor * best_us) return static_cast<int>(i) + 1;
  }
  return static_cast<int>(run.trial_us.size());  // the whole space was tried
}

// Share of the space's points within 5% of its best: what one uniform draw hits.
double NearBestShare(const TaskBench& task) {
  int near = 0;
  for (const auto& [digest, us] : task.predicted_us) near += us <= kNearBest * task.best_us;
  return static_cast<double>(near) / static_cast<double>(task.predicted_us.size());
}

double Mean(const std::vector<double>& values) {
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double GeometricMean(const std::vector<double>& values) {
  double log_sum = 0;
  for (double value : values) log_sum += std::log(value);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

// A task the budgets can tell searchers apart on: more points than the smallest budget, and not
// every point within 5% of the best.
bool Discriminating(const TaskBench& task) {
  if (static_cast<int>(task.space.size()) <= kBudgets[0]) return false;
  for (const auto& [digest, us] : task.predicted_us) {
    if (us > kNearBest * task.best_us) return true;
  }
  return false;
}

// Mean over the runs of `task` by `searcher` of `metric`.
template <typename Metric>
double MeanOverSeeds(const TaskBench& task, const std::string& searcher, Metric metric) {
  std::vector<double> values;
  for (const Run& run : task.runs.at(searcher)) values.push_back(metric(run));
  return Mean(values);
}

std::string Markdown(const BenchOptions& options, const std::vector<TaskBench>& tasks,
                     const std::string& command) {
  std::vector<const TaskBench*> discriminating;
  for (const TaskBench& task : tasks) {
    if (Discriminating(task)) discriminating.push_back(&task);
  }
  std::string out = absl::StrCat(
      "# Search: MCTS vs uniform random at equal budget (", options.gpu, ", predicted)\n\n",
      "**The oracle is the emulated backend's performance model** (worker/emulated: real NVRTC "
      "compiles for ", options.gpu, "'s architecture, ptxas' figures, the analytic model): every "
      "time below is PREDICTED, not measured on a GPU. A candidate's reward is its predicted "
      "speedup over the task's predicted ATen baseline; a candidate that fails to compile or fit "
      "gets none.\n\n",
      "Command: `", command, "`\n\n",
      absl::StrFormat("%d tasks with a search space, %d of them discriminating (more than %d "
                      "valid points, not all within 5%% of the best); %d seeds; batches of %d "
                      "proposals (virtual loss in play); exploration %.2f. Searchers: `mcts` "
                      "(cost-model prior), `mcts-no-prior` (ablation: expansion in seeded random "
                      "order), `random` (uniform without replacement). Identical tasks (one "
                      "digest) are benchmarked once, under the first model that has them; tasks "
                      "with only the ATen fallback have no space and are left out.\n\n",
                      tasks.size(), discriminating.size(), kBudgets[0], options.seeds,
                      options.batch, options.exploration));

  absl::StrAppend(&out, "## Summary over the ", discriminating.size(),
                  " discriminating tasks\n\n"
                  "`best/space best @B`: the best predicted time among the first B trials over "
                  "the best of the whole space (geometric mean over tasks of the mean over seeds; "
                  "1.000 = found it). `within 5% @B`: share of (task, seed) runs with a trial "
                  "within 5% of the best by B trials. `trials to 5%` / `trials to best`: trials "
                  "until the first within 5% / the best itself (mean over tasks and seeds).\n\n"
                  "| searcher |");
  for (int budget : kBudgets) absl::StrAppend(&out, " best/space best @", budget, " |");
  for (int budget : kBudgets) absl::StrAppend(&out, " within 5% @", budget, " |");
  absl::StrAppend(&out, " trials to 5% | trials to best |\n|---|");
  for (size_t i = 0; i < 2 * std::size(kBudgets) + 2; ++i) absl::StrAppend(&out, "---:|");
  absl::StrAppend(&out, "\n");
  for (const SearcherConfig& config : Configs()) {
    std::vector<std::string> ratio_cells, within_cells;
    for (int budget : kBudgets) {
      std::vector<double> ratios, within;
      for (const TaskBench* task : discriminating) {
        ratios.push_back(MeanOverSeeds(*task, config.name, [&](const Run& run) {
          return BestRatio(run, budget, task->best_us);
        }));
        within.push_back(MeanOverSeeds(*task, config.name, [&](const Run& run) {
          return BestRatio(run, budget, task->best_us) <= kNearBest ? 1.0 : 0.0;
        }));
      }
      ratio_cells.push_back(absl::StrFormat(" %.3f |", GeometricMean(ratios)));
      within_cells.push_back(absl::StrFormat(" %.0f%% |", 100 * Mean(within)));
    }
    std::vector<double> to_near, to_best;
    for (const TaskBench* task : discriminating) {
      to_near.push_back(MeanOverSeeds(*task, config.name, [&](const Run& run) {
        return TrialsToWithin(run, task->best_us, kNearBest);
      }));
      to_best.push_back(MeanOverSeeds(*task, config.name, [&](const Run& run) {
        return TrialsToWithin(run, task->best_us, kAtBest);
      }));
    }
    absl::StrAppend(&out, "| ", config.name, " |", absl::StrJoin(ratio_cells, ""),
                    absl::StrJoin(within_cells, ""),
                    absl::StrFormat(" %.1f | %.1f |\n", Mean(to_near), Mean(to_best)));
  }

  absl::StrAppend(&out,
                  "\n## Per task\n\n"
                  "Valid points, compile failures, share of the points within 5% of the best "
                  "(what one uniform draw hits), the prior's Spearman rank correlation with the "
                  "oracle (flat: one of them predicts every point alike), the space's best "
                  "predicted time and its speedup over the ATen baseline; then per searcher: best/space best at 8 trials, and trials to 5% / "
                  "to the best (means over seeds). Tasks marked * cannot discriminate.\n\n"
                  "| task | template | points | failed | near share | prior rho | best us | "
                  "speedup |");
  for (const SearcherConfig& config : Configs()) {
    absl::StrAppend(&out, " ", config.name, " @8 | to 5% | to best |");
  }
  absl::StrAppend(&out, "\n|---|---|---:|---:|---:|---:|---:|---:|");
  for (size_t i = 0; i < Configs().size(); ++i) absl::StrAppend(&out, "---:|---:|---:|");
  absl::StrAppend(&out, "\n");
  for (const TaskBench& task : tasks) {
    absl::StrAppend(
        &out, absl::StrFormat("| %s%s | %s | %d | %d | %.2f | %s | %.2f | %.2f |", task.label,
                              Discriminating(task) ? "" : " *", task.templates, task.space.size(),
                              task.failed, NearBestShare(task),
                              task.prior_spearman ? absl::StrFormat("%.2f", *task.prior_spearman)
                                                  : "flat",
                              task.best_us, task.baseline_us / task.best_us));
    for (const SearcherConfig& config : Configs()) {
      absl::StrAppend(
          &out, absl::StrFormat(
                    " %.3f | %.1f | %.1f |",
                    MeanOverSeeds(task, config.name,
                                  [&](const Run& run) { return BestRatio(run, 8, task.best_us); }),
                    MeanOverSeeds(task, config.name,
                                  [&](const Run& run) {
                                    return TrialsToWithin(run, task.best_us, kNearBest);
                                  }),
                    MeanOverSeeds(task, config.name, [&](const Run& run) {
                      return TrialsToWithin(run, task.best_us, kAtBest);
                    })));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string JsonNumber(double value) {
  return std::isinf(value) ? "null" : absl::StrFormat("%.6g", value);
}

std::string Json(const BenchOptions& options, const std::vector<TaskBench>& tasks) {
  std::vector<std::string> task_objects;
  for (const TaskBench& task : tasks) {
    std::vector<std::string> points;
    for (const forge::v1::Candidate& candidate : task.space) {
      std::vector<std::string> parameters;
      for (const auto& [name, value] : std::map<std::string, int64_t>(
               candidate.parameters().begin(), candidate.parameters().end())) {
        parameters.push_back(absl::StrCat(JsonString(name), ":", value));
      }
      points.push_back(absl::StrCat("{\"template\":", JsonString(candidate.template_name()),
                                    ",\"parameters\":{", absl::StrJoin(parameters, ","),
                                    "},\"predicted_us\":",
                                    JsonNumber(task.predicted_us.at(candidate.digest())), "}"));
    }
    std::vector<std::string> searchers;
    for (const SearcherConfig& config : Configs()) {
      std::vector<std::string> runs;
      for (const Run& run : task.runs.at(config.name)) {
        std::vector<std::string> trials;
        for (double us : run.trial_us) trials.push_back(JsonNumber(us));
        runs.push_back(absl::StrCat("[", absl::StrJoin(trials, ","), "]"));
      }
      searchers.push_back(absl::StrCat(JsonString(config.name), ":[", absl::StrJoin(runs, ","),
                                       "]"));
    }
    task_objects.push_back(absl::StrCat(
        "{\"task\":", JsonString(task.label), ",\"digest\":", JsonString(task.task.digest()),
        ",\"templates\":", JsonString(task.templates), ",\"baseline_us\":",
        JsonNumber(task.baseline_us), ",\"best_us\":", JsonNumber(task.best_us),
        ",\"prior_spearman\":",
        task.prior_spearman ? absl::StrFormat("%.4f", *task.prior_spearman) : "null",
        ",\"discriminating\":", Discriminating(task) ? "true" : "false", ",\"points\":[",
        absl::StrJoin(points, ","), "],\"trial_us_by_searcher_and_seed\":{",
        absl::StrJoin(searchers, ","), "}}"));
  }
  return absl::StrCat("{\"oracle\":\"emulated backend (predicted, not measured)\",\"gpu\":",
                      JsonString(options.gpu), ",\"seeds\":", options.seeds,
                      ",\"batch\":", options.batch, ",\"tasks\":[\n",
                      absl::StrJoin(task_objects, ",\n"), "\n]}\n");
}

absl::Status Main(int argc, char** argv) {
  FORGE_ASSIGN_OR_RETURN(const BenchOptions options, ParseArgs(argc, argv));
  FORGE_ASSIGN_OR_RETURN(const GpuArch gpu, FindGpu(options.gpu));
  FORGE_ASSIGN_OR_RETURN(std::vector<TaskBench> tasks, LoadTasks(options, gpu.arch));
  FORGE_RETURN_IF_ERROR(PredictAll(options, gpu, tasks));
  for (TaskBench& task : tasks) {
    FORGE_RETURN_IF_ERROR(Summarize(options, task));
    if (std::isinf(task.best_us)) {
      return absl::InternalError(absl::StrCat(task.label, ": every candidate failed"));
    }
    for (const SearcherConfig& config : Configs()) {
      for (int seed = 1; seed <= options.seeds; ++seed) {
        FORGE_ASSIGN_OR_RETURN(Run run, Search(options, gpu, config, seed, task));
        task.runs[config.name].push_back(std::move(run));
      }
    }
    std::cerr << task.label << " (" << task.space.size() << " points) searched\n";
  }
  std::vector<std::string> args(argv, argv + argc);
  args[0] = "forge_search_bench";
  const std::string command = absl::StrJoin(args, " ");
  std::ofstream(options.out_prefix + ".md") << Markdown(options, tasks, command);
  std::ofstream(options.out_prefix + ".json") << Json(options, tasks);
  std::cerr << "wrote " << options.out_prefix << ".md and .json\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace forge::search

int main(int argc, char** argv) {
  const absl::Status status = forge::search::Main(argc, argv);
  if (!status.ok()) {
    std::cerr << "forge_search_bench: " << status << "\n";
    return 1;
  }
  return 0;
}

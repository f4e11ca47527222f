// The judge's host passes over one large output, on one thread against the pool: CompareOutput
// (the candidate's output against its float64 reference) and FirstChangedElement (the check that
// an input came back unchanged). Prints one line per pass with the median of the repetitions:
//   forge_judge_compare_bench [--elements=16777216] [--threads=N] [--reps=5] [--dtype=float32]
// --threads defaults to ThreadPool::Default()'s ($FORGE_JUDGE_THREADS, else the hardware's, at
// most 16). The output passes the comparison, so every element is looked at.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "worker/judge/compare.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {
namespace {

struct Options {
  int64_t elements = int64_t{1} << 24;
  int threads = 0;  // 0: ThreadPool::Default()
  int reps = 5;
  forge::v1::DType dtype = forge::v1::DTYPE_FLOAT32;
};

bool ParseDType(absl::string_view name, forge::v1::DType& dtype) {
  for (forge::v1::DType candidate : {forge::v1::DTYPE_FLOAT32, forge::v1::DTYPE_BFLOAT16,
                                     forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_FLOAT64}) {
    if (DTypeName(candidate) == name) {
      dtype = candidate;
      return true;
    }
  }
  return false;
}

bool ParseArguments(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view value = argv[i];
    bool parsed = false;
    if (absl::ConsumePrefix(&value, "--elements=")) {
      parsed = absl::SimpleAtoi(value, &options.elements) && options.elements > 0;
    } else if (absl::ConsumePrefix(&value, "--threads=")) {
      parsed = absl::SimpleAtoi(value, &options.threads) && options.threads > 0;
    } else if (absl::ConsumePrefix(&value, "--reps=")) {
      parsed = absl::SimpleAtoi(value, &options.reps) && options.reps > 0;
    } else if (absl::ConsumePrefix(&value, "--dtype=")) {
      parsed = ParseDType(value, options.dtype);
    }
    if (!parsed) {
      fprintf(stderr, "forge_judge_compare_bench: unknown or malformed argument '%s'\n", argv[i]);
      return false;
    }
  }
  return true;
}

// Median milliseconds of `reps` runs of `pass`.
double MedianMilliseconds(int reps, const std::function<void()>& pass) {
  std::vector<double> milliseconds;
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pass();
    milliseconds.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(milliseconds.begin(), milliseconds.end());
  return milliseconds[milliseconds.size() / 2];
}

void PrintLine(absl::string_view pass, const Options& options, int threads, double serial_ms,
               double parallel_ms) {
  printf("%s\n", absl::StrFormat("compare_bench pass=%s dtype=%s elements=%d threads=%d "
                                 "serial_ms=%.2f parallel_ms=%.2f speedup=%.2f",
                                 pass, DTypeName(options.dtype), options.elements, threads,
                                 serial_ms, parallel_ms, serial_ms / parallel_ms)
                     .c_str());
}

int Run(const Options& options) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(options.dtype);
  spec.add_shape(options.elements);
  absl::StatusOr<HostTensor> candidate = HostTensor::Allocate(spec);
  if (!candidate.ok()) {
    fprintf(stderr, "forge_judge_compare_bench: %s\n", candidate.status().ToString().c_str());
    return 1;
  }
  std::vector<double> reference(options.elements);
  std::mt19937_64 generator(1);
  std::normal_distribution<double> normal;
  for (int64_t i = 0; i < options.elements; ++i) {
    reference[i] = normal(generator);
    candidate->Set(i, reference[i]);
  }
  const std::vector<std::byte> unchanged = candidate->storage;

  ThreadPool serial(1);
  std::unique_ptr<ThreadPool> owned =
      options.threads > 0 ? std::make_unique<ThreadPool>(options.threads) : nullptr;
  ThreadPool& parallel = owned != nullptr ? *owned : ThreadPool::Default();
  const Tolerances tolerances = DefaultTolerances(options.dtype);
  bool passed = true;
  auto compare = [&](ThreadPool& pool) {
    return [&] { passed &= CompareOutput(*candidate, reference, tolerances, {}, pool).passed; };
  };
  PrintLine("CompareOutput", options, parallel.threads(),
            MedianMilliseconds(options.reps, compare(serial)),
            MedianMilliseconds(options.reps, compare(parallel)));
  auto first_changed = [&](ThreadPool& pool) {
    return [&] { passed &= !FirstChangedElement(spec, candidate->storage, unchanged, pool); };
  };
  PrintLine("FirstChangedElement", options, parallel.threads(),
            MedianMilliseconds(options.reps, first_changed(serial)),
            MedianMilliseconds(options.reps, first_changed(parallel)));
  if (!passed) {
    fprintf(stderr, "forge_judge_compare_bench: the output should have passed every pass\n");
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace forge::judge

int main(int argc, char** argv) {
  forge::judge::Options options;
  if (!forge::judge::ParseArguments(argc, argv, options)) return 2;
  return forge::judge::Run(options);
}

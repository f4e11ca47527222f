// forge-sandbox-child: the process a worker's sandbox (sandbox.h) starts per GPU to run candidates
// (generated kernels, cuBLASLt calls, cuDNN graphs and, when built with LibTorch's CUDA
// libraries, the ATen fallback; with those, the judge's float64 reference runs on the GPU too).
// Started by the sandbox, never by hand:
//   forge-sandbox-child --socket-fd=N [--gpu=N] [--draw-cache-mib=N] [--device-draws-mib=N]
//                       [--allow-test-behaviours]
//   forge-sandbox-child [--gpu=N] --sanitize-request=FILE --sanitize-answer=FILE
// --draw-cache-mib bounds the host memory that keeps the judge's draws across candidates (0: no
// cache); without it, $FORGE_SANDBOX_DRAW_CACHE_MIB, else 4096. --device-draws-mib bounds the GPU
// memory that keeps them resident for the judge's device path (0: the judge runs on the host);
// without it, $FORGE_SANDBOX_DEVICE_DRAWS_MIB, else a quarter of the GPU's free memory.
// The second form is the one-shot run compute-sanitizer watches (sandbox/sanitize.h): the
// candidate of the request file launched once on the judge's first draw, its outcome written to
// the answer file.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "aten/aten.h"
#include "worker/judge/judge.h"
#include "worker/sandbox/sandbox_child.h"

namespace {

// Parses a memory bound in MiB into `bytes`; false for anything else, or a bound so large that it
// is surely a mistake (and would overflow).
bool ParseMib(absl::string_view mib, int64_t& bytes) {
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(mib, &parsed) || parsed < 0 || parsed > (int64_t{1} << 30)) return false;
  bytes = parsed << 20;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  forge::sandbox::ChildOptions options;
  if (const char* mib = std::getenv("FORGE_SANDBOX_DRAW_CACHE_MIB"); mib != nullptr) {
    if (!ParseMib(mib, options.draw_cache_bytes)) {
      fprintf(stderr,
              "forge-sandbox-child: FORGE_SANDBOX_DRAW_CACHE_MIB='%s' is not a size in MiB\n", mib);
      return 2;
    }
  }
  int64_t device_draws_bytes = 0;
  if (const char* mib = std::getenv("FORGE_SANDBOX_DEVICE_DRAWS_MIB"); mib != nullptr) {
    if (!ParseMib(mib, device_draws_bytes)) {
      fprintf(stderr,
              "forge-sandbox-child: FORGE_SANDBOX_DEVICE_DRAWS_MIB='%s' is not a size in MiB\n",
              mib);
      return 2;
    }
    options.device_draws_bytes = device_draws_bytes;
  }
  std::string sanitize_request;
  std::string sanitize_answer;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    absl::string_view value = arg;
    bool parsed = false;
    if (absl::ConsumePrefix(&value, "--socket-fd=")) {
      parsed = absl::SimpleAtoi(value, &options.socket_fd);
    } else if (absl::ConsumePrefix(&value, "--gpu=")) {
      parsed = absl::SimpleAtoi(value, &options.gpu_ordinal);
    } else if (absl::ConsumePrefix(&value, "--draw-cache-mib=")) {
      parsed = ParseMib(value, options.draw_cache_bytes);
    } else if (absl::ConsumePrefix(&value, "--device-draws-mib=")) {
      parsed = ParseMib(value, device_draws_bytes);
      options.device_draws_bytes = device_draws_bytes;
    } else if (absl::ConsumePrefix(&value, "--sanitize-request=")) {
      sanitize_request = std::string(value);
      parsed = !sanitize_request.empty();
    } else if (absl::ConsumePrefix(&value, "--sanitize-answer=")) {
      sanitize_answer = std::string(value);
      parsed = !sanitize_answer.empty();
    } else if (arg == "--allow-test-behaviours") {
      options.allow_test_behaviours = true;
      parsed = true;
    }
    if (!parsed) {
      fprintf(stderr, "forge-sandbox-child: unknown or malformed argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (sanitize_request.empty() != sanitize_answer.empty()) {
    fprintf(stderr, "forge-sandbox-child: --sanitize-request and --sanitize-answer go together\n");
    return 2;
  }
  if (!sanitize_request.empty()) {
    // Nothing but the candidate runs: no draws kept, no comparison kernels, no ATen reference.
    options.draw_cache_bytes = 0;
    options.device_draws_bytes = 0;
    return forge::sandbox::RunSanitizeTarget(options, sanitize_request, sanitize_answer);
  }
  if (options.socket_fd < 0) {
    fprintf(stderr, "forge-sandbox-child: --socket-fd=N is required (the sandbox passes it)\n");
    return 2;
  }
#if FORGE_SANDBOX_CHILD_WITH_ATEN
  options.reference =
      forge::aten::Float64Reference(forge::aten::CudaGroupRunner(options.gpu_ordinal),
                                    forge::aten::CudaDeviceReferenceRunner(options.gpu_ordinal));
  options.load_aten_fallback = forge::aten::LoadFallback;
#else
  options.reference = forge::aten::Float64Reference();
#endif
  return forge::sandbox::RunSandboxChild(options);
}

// forge-sandbox-child: the process a worker's sandbox (sandbox.h) starts per GPU to run candidate
// kernels. Started by the sandbox, never by hand:
//   forge-sandbox-child --socket-fd=N [--gpu=N] [--allow-test-behaviours]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "worker/judge/aten_reference.h"
#include "worker/sandbox/sandbox_child.h"

int main(int argc, char** argv) {
  forge::sandbox::ChildOptions options;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    absl::string_view value = arg;
    bool parsed = false;
    if (absl::ConsumePrefix(&value, "--socket-fd=")) {
      parsed = absl::SimpleAtoi(value, &options.socket_fd);
    } else if (absl::ConsumePrefix(&value, "--gpu=")) {
      parsed = absl::SimpleAtoi(value, &options.gpu_ordinal);
    } else if (arg == "--allow-test-behaviours") {
      options.allow_test_behaviours = true;
      parsed = true;
    }
    if (!parsed) {
      fprintf(stderr, "forge-sandbox-child: unknown or malformed argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (options.socket_fd < 0) {
    fprintf(stderr, "forge-sandbox-child: --socket-fd=N is required (the sandbox passes it)\n");
    return 2;
  }
  options.reference = forge::judge::AtenFloat64Reference();
  return forge::sandbox::RunSandboxChild(options);
}

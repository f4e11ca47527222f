// nvcc as a child process, for the compile stage's shared objects (host-launched candidates,
// compiler/codegen/host_launch_abi.h): a CUTLASS 3.x kernel needs host code to launch it (TMA
// descriptors, tile-scheduler parameters), which NVRTC cannot compile, so such a candidate's whole
// translation unit is built by the toolkit's nvcc into a shared object that the sandbox child
// dlopens (worker/library/host_launched.h).
//
// Everything here runs without a GPU or driver. Tools are started with posix_spawn (no shell), in
// their own process group, so that a timeout kills nvcc together with the cicc, ptxas and host
// compiler it started.
#ifndef FORGE_WORKER_COMPILE_NVCC_H_
#define FORGE_WORKER_COMPILE_NVCC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace forge::compile {

// What one run of a tool came to. A tool that started always gives a ToolRun, whatever its exit.
struct ToolRun {
  int exit_code = -1;      // the tool's exit status; -1 when a signal ended it
  bool timed_out = false;  // killed (with its process group) when the timeout passed
  std::string output;      // stdout and stderr, interleaved as written
  double seconds = 0;      // wall time

  bool succeeded() const { return exit_code == 0 && !timed_out; }
};

// Runs argv[0] (a path, or a name looked up on PATH) with argv in `directory`, with stdin from
// /dev/null, TMPDIR set to `directory` (nvcc's intermediate files stay there) and no signals
// blocked. NotFound when the tool does not exist or cannot be executed, Internal when it cannot
// be started for another reason.
absl::StatusOr<ToolRun> RunTool(const std::vector<std::string>& argv, const std::string& directory,
                                absl::Duration timeout);

// A private directory under the system's temporary directory, removed with what it holds when the
// object goes.
class TemporaryDirectory {
 public:
  // Internal when it cannot be created.
  static absl::StatusOr<TemporaryDirectory> Create(absl::string_view prefix);
  TemporaryDirectory(TemporaryDirectory&& other) noexcept;
  TemporaryDirectory& operator=(TemporaryDirectory&& other) = delete;
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory();

  const std::string& path() const { return path_; }

 private:
  explicit TemporaryDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The nvcc and CUTLASS headers a pool builds shared objects with, as far as they determine the
// objects: both versions enter the compile cache's key.
struct NvccToolchain {
  std::string nvcc_path;
  std::string nvcc_version;  // the whole `nvcc --version` text (release and build)
  // Empty when no CUTLASS headers are configured or found; then sources that include them fail to
  // compile with a message that says so.
  std::string cutlass_include;
  std::string cutlass_version;  // "4.2.0" from cutlass/version.h; empty without headers
  // The host compiler nvcc runs ($NVCC_CCBIN, else g++ on PATH: the first line of its --version;
  // empty when it does not answer) and this machine's C library ("2.36"): an object's host code
  // is theirs, and one built against a newer glibc may not load where it is older, so both key the
  // objects the fleet's catalog shares.
  std::string host_compiler_version;
  std::string libc_version;
};

// Runs `nvcc --version` and the host compiler's `--version`, reads cutlass/version.h under
// `cutlass_include` (when not empty) and the C library's version.
// FailedPrecondition naming the path when nvcc is missing or does not answer; a configured
// CUTLASS directory without cutlass/version.h is left out (cutlass_include empty), not an error,
// since only CUTLASS sources need it.
absl::StatusOr<NvccToolchain> DescribeNvccToolchain(const std::string& nvcc_path,
                                                    const std::string& cutlass_include);

// The nvcc of the toolkit: $CUDA_HOME/bin/nvcc, else the one the build found (the compile
// definition FORGE_DEFAULT_NVCC), else "nvcc" on PATH.
std::string DefaultNvccPath();
// The CUTLASS headers the build found (CMake's FORGE_CUTLASS_INCLUDE); empty when it found none.
std::string DefaultCutlassInclude();

// The arch a shared object is built for: the arch-specific variant of `arch` (sm_90 -> sm_90a)
// where the GPU has one (sm_90 and newer), since CUTLASS's sm90 kernels (WGMMA, TMA, setmaxnreg)
// compile only for it; an object runs on the worker's own GPU, so nothing is lost. Older archs and
// arch names with a suffix already (sm_90a, sm_100f) stay as they are.
std::string SharedObjectArch(absl::string_view arch);

// The text of compiler/codegen/host_launch_abi.h, embedded at build time (CMakeLists.txt), and
// where it goes under an include directory, so that a shared object's source includes it as it
// does in the tree: the compile pool writes it beside every source, and `forge results` into a
// bundle with host-launched steps (client/forge/results.h).
extern const char kHostLaunchAbiHeader[];
inline constexpr char kHostLaunchAbiHeaderPath[] = "compiler/codegen/host_launch_abi.h";

// The flags of NvccCommand that name no file: for SharedObjectArch(arch), C++17, -O3, relaxed
// constexpr (CuTe needs it), position-independent host code, NDEBUG, ptxas' resource report
// (-Xptxas -v, for the PtxasReport parser). A bundle carries them for its host-launched steps, so
// that the runtime builds their objects as the worker did (runtime/README.md).
std::vector<std::string> NvccFlags(absl::string_view arch);

// The one nvcc command line of the compile stage: `source` (a .cu file) into the shared object
// `output` with NvccFlags(arch), then the include directories in order (the CUTLASS headers of
// `toolchain` after them), then `options` (LaunchPlan::compile_options: the source's own -D flags
// and the like).
std::vector<std::string> NvccCommand(const NvccToolchain& toolchain, absl::string_view arch,
                                     const std::vector<std::string>& include_dirs,
                                     const std::vector<std::string>& options,
                                     const std::string& source, const std::string& output);

}  // namespace forge::compile

#endif  // FORGE_WORKER_COMPILE_NVCC_H_

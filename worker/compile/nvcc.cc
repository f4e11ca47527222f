#include "worker/compile/nvcc.h"

#include <fcntl.h>
#include <gnu/libc-version.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace forge::compile {
namespace {

constexpr char kToolLog[] = "tool.log";
constexpr absl::Duration kVersionTimeout = absl::Seconds(60);

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return std::move(contents).str();
}

// The process environment with TMPDIR replaced by `tmpdir`.
std::vector<std::string> ToolEnvironment(const std::string& tmpdir) {
  std::vector<std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    if (!absl::StartsWith(*entry, "TMPDIR=")) environment.emplace_back(*entry);
  }
  environment.push_back(absl::StrCat("TMPDIR=", tmpdir));
  return environment;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& string : strings) pointers.push_back(string.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Owns posix_spawn's attribute and file-action objects.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
};

// Waits for `pid` until `deadline`; past it, kills its process group (nvcc and the compilers it
// started) and reaps it. A tool that exits by itself has waited for its own children.
ToolRun Reap(pid_t pid, absl::Time start, absl::Time deadline) {
  ToolRun run;
  int status = 0;
  absl::Duration pause = absl::Milliseconds(2);
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      run.exit_code = -1;
      run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
      return run;
    }
    if (absl::Now() >= deadline) {
      kill(-pid, SIGKILL);  // nvcc and the compilers it started
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      run.timed_out = true;
      break;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return run;
}

// "#define CUTLASS_MAJOR 4" -> 4 for `name` CUTLASS_MAJOR; nullopt when the line is missing.
std::optional<int> DefinedNumber(absl::string_view header, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(header, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "#define")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, name) || line.empty() || !absl::ascii_isspace(line[0])) {
      continue;
    }
    int value = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &value)) return value;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<ToolRun> RunTool(const std::vector<std::string>& argv, const std::string& directory,
                                absl::Duration timeout) {
  if (argv.empty()) return absl::InvalidArgumentError("RunTool: no command");
  std::vector<std::string> arguments = argv;
  // posix_spawn changes directory before exec: a relative path must not depend on it.
  if (absl::StrContains(arguments[0], '/')) {
    arguments[0] = std::filesystem::absolute(arguments[0]).string();
  }
  const std::string log_path = (std::filesystem::path(directory) / kToolLog).string();
  SpawnSetup setup;
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&setup.actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&setup.actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&setup.actions, directory.c_str());
  sigset_t no_signals;
  sigemptyset(&no_signals);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  for (int signal : {SIGTERM, SIGINT, SIGPIPE, SIGCHLD}) sigaddset(&default_signals, signal);
  posix_spawnattr_setflags(&setup.attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&setup.attributes, 0);  // its own group, killed as one
  posix_spawnattr_setsigmask(&setup.attributes, &no_signals);
  posix_spawnattr_setsigdefault(&setup.attributes, &default_signals);

  std::vector<std::string> environment = ToolEnvironment(directory);
  std::vector<char*> argv_pointers = CStrings(arguments);
  std::vector<char*> environment_pointers = CStrings(environment);
  const absl::Time start = absl::Now();
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, arguments[0].c_str(), &setup.actions, &setup.attributes,
                                   argv_pointers.data(), environment_pointers.data());
  if (spawned == ENOENT || spawned == EACCES || spawned == ENOEXEC) {
    return absl::NotFoundError(
        absl::StrCat("cannot run ", arguments[0], ": ", std::strerror(spawned)));
  }
  if (spawned != 0) {
    return absl::InternalError(
        absl::StrCat("posix_spawn(", arguments[0], "): ", std::strerror(spawned)));
  }
  ToolRun run = Reap(pid, start, start + timeout);
  run.output = ReadFile(log_path);
  return run;
}

absl::StatusOr<TemporaryDirectory> TemporaryDirectory::Create(absl::string_view prefix) {
  std::error_code error;
  const std::filesystem::path base = std::filesystem::temp_directory_path(error);
  if (error) {
    return absl::InternalError(absl::StrCat("no temporary directory: ", error.message()));
  }
  std::string pattern = (base / absl::StrCat(prefix, "XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("mkdtemp(", pattern, "): ", std::strerror(errno)));
  }
  return TemporaryDirectory(std::move(pattern));
}

TemporaryDirectory::TemporaryDirectory(TemporaryDirectory&& other) noexcept
    : path_(std::exchange(other.path_, "")) {}

TemporaryDirectory::~TemporaryDirectory() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<NvccToolchain> DescribeNvccToolchain(const std::string& nvcc_path,
                                                    const std::string& cutlass_include) {
  NvccToolchain toolchain;
  toolchain.nvcc_path = nvcc_path;
  auto missing = [&](absl::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nvcc '", nvcc_path, "' ", why,
        "; host-launched (CUTLASS) candidates need the CUDA toolkit's nvcc (worker flag "
        "--compile.nvcc, default $CUDA_HOME/bin/nvcc)"));
  };
  absl::StatusOr<TemporaryDirectory> directory = TemporaryDirectory::Create("forge-nvcc-version-");
  if (!directory.ok()) return directory.status();
  absl::StatusOr<ToolRun> run = RunTool({nvcc_path, "--version"}, directory->path(),
                                        kVersionTimeout);
  if (!run.ok()) return missing(absl::StrCat("cannot be run (", run.status().message(), ")"));
  if (!run->succeeded() || !absl::StrContains(run->output, "release")) {
    return missing(absl::StrCat("does not answer --version (exit ", run->exit_code,
                                run->timed_out ? ", timed out" : "", "): ",
                                absl::StripAsciiWhitespace(run->output)));
  }
  toolchain.nvcc_version = std::string(absl::StripAsciiWhitespace(run->output));
  const char* ccbin = std::getenv("NVCC_CCBIN");
  absl::StatusOr<ToolRun> host =
      RunTool({ccbin != nullptr && *ccbin ? ccbin : "g++", "--version"}, directory->path(),
              kVersionTimeout);
  if (host.ok() && host->succeeded()) {
    const absl::string_view output = host->output;
    toolchain.host_compiler_version =
        std::string(absl::StripAsciiWhitespace(output.substr(0, output.find('\n'))));
  }
  toolchain.libc_version = gnu_get_libc_version();

  if (!cutlass_include.empty()) {
    const std::string header =
        ReadFile(std::filesystem::path(cutlass_include) / "cutlass" / "version.h");
    const std::optional<int> major = DefinedNumber(header, "CUTLASS_MAJOR");
    const std::optional<int> minor = DefinedNumber(header, "CUTLASS_MINOR");
    const std::optional<int> patch = DefinedNumber(header, "CUTLASS_PATCH");
    if (major && minor && patch) {
      toolchain.cutlass_include = cutlass_include;
      toolchain.cutlass_version = absl::StrCat(*major, ".", *minor, ".", *patch);
    }
  }
  return toolchain;
}

std::string DefaultNvccPath() {
  if (const char* cuda_home = std::getenv("CUDA_HOME"); cuda_home != nullptr && *cuda_home) {
    return (std::filesystem::path(cuda_home) / "bin" / "nvcc").string();
  }
#ifdef FORGE_DEFAULT_NVCC
  return FORGE_DEFAULT_NVCC;
#else
  return "nvcc";
#endif
}

std::string DefaultCutlassInclude() {
#ifdef FORGE_DEFAULT_CUTLASS_INCLUDE
  return FORGE_DEFAULT_CUTLASS_INCLUDE;
#else
  return "";
#endif
}

std::string SharedObjectArch(absl::string_view arch) {
  absl::string_view number = arch;
  int sm = 0;
  if (absl::ConsumePrefix(&number, "sm_") && absl::SimpleAtoi(number, &sm) && sm >= 90) {
    return absl::StrCat(arch, "a");
  }
  return std::string(arch);
}

std::vector<std::string> NvccFlags(absl::string_view arch) {
  return {"-std=c++17",
          "-O3",
          absl::StrCat("-arch=", SharedObjectArch(arch)),
          "--expt-relaxed-constexpr",
          "-shared",
          "-Xcompiler",
          "-fPIC",
          "-DNDEBUG",
          "-Xptxas",
          "-v"};
}

std::vector<std::string> NvccCommand(const NvccToolchain& toolchain, absl::string_view arch,
                                     const std::vector<std::string>& include_dirs,
                                     const std::vector<std::string>& options,
                                     const std::string& source, const std::string& output) {
  std::vector<std::string> command = {toolchain.nvcc_path};
  for (std::string& flag : NvccFlags(arch)) command.push_back(std::move(flag));
  for (const std::string& dir : include_dirs) command.push_back(absl::StrCat("-I", dir));
  if (!toolchain.cutlass_include.empty()) {
    command.push_back(absl::StrCat("-I", toolchain.cutlass_include));
  }
  command.insert(command.end(), options.begin(), options.end());
  command.insert(command.end(), {"-o", output, source});
  return command;
}

}  // namespace forge::compile

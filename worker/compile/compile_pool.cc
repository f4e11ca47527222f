#include "worker/compile/compile_pool.h"

#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/loader/sibling_library.h"
#include "common/status/status_macros.h"

namespace forge::compile {

namespace {

// The name NVRTC gives the source in its messages ("kernel.cu(10): error: ..."); nvcc's source file.
constexpr char kProgramName[] = "kernel.cu";
constexpr char kSharedObjectName[] = "kernel.so";
constexpr char kDiskCacheMagic[] = "forge-compile-cache-v1";
constexpr char kDiskCacheSuffix[] = ".forgecubin";

absl::Status NvrtcError(nvrtcResult result, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", nvrtcGetErrorString(result));
  switch (result) {
    case NVRTC_ERROR_COMPILATION:
    case NVRTC_ERROR_INVALID_OPTION:
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CheckNvrtc(nvrtcResult result, absl::string_view what) {
  return result == NVRTC_SUCCESS ? absl::OkStatus() : NvrtcError(result, what);
}

struct ProgramDeleter {
  void operator()(nvrtcProgram program) const { nvrtcDestroyProgram(&program); }
};
using ProgramHandle = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

// The first "error" line of an NVRTC log, so a failure's message says what went wrong without the
// whole log.
std::string FirstErrorLine(absl::string_view log) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "error")) return std::string(absl::StripAsciiWhitespace(line));
  }
  return "";
}

std::string ArchList(const std::vector<int>& archs) {
  return absl::StrJoin(archs, ", ",
                       [](std::string* out, int arch) { absl::StrAppend(out, "sm_", arch); });
}

// sm_XX, sm_XXa or sm_XXf with XX one of NVRTC's supported archs. compute_XX is refused because it
// yields PTX, not a cubin.
absl::Status CheckArch(absl::string_view arch, const std::vector<int>& supported) {
  absl::string_view number = arch;
  if (absl::ConsumePrefix(&number, "sm_") && !number.empty() &&
      (number.back() == 'a' || number.back() == 'f')) {
    number.remove_suffix(1);  // arch-specific (a) and family (f) variants of the same sm
  }
  int sm = 0;
  if (!absl::StartsWith(arch, "sm_") || !absl::SimpleAtoi(number, &sm)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "arch '", arch, "' is not a GPU architecture of the form sm_XX (e.g. sm_90, sm_90a)"));
  }
  if (std::find(supported.begin(), supported.end(), sm) == supported.end()) {
    return absl::InvalidArgumentError(absl::StrCat("arch '", arch, "' is not supported by NVRTC ",
                                                   "(it compiles for ", ArchList(supported), ")"));
  }
  return absl::OkStatus();
}

// Runs NVRTC for `request`, filling `result` as far as it gets (the log even on failure).
absl::Status RunNvrtc(const CompileRequest& request, CompileResult& result) {
  nvrtcProgram raw_program = nullptr;
  FORGE_RETURN_IF_ERROR(CheckNvrtc(
      nvrtcCreateProgram(&raw_program, request.source.c_str(), kProgramName, 0, nullptr, nullptr),
      "nvrtcCreateProgram"));
  ProgramHandle program(raw_program);

  for (const std::string& name : request.name_expressions) {
    FORGE_RETURN_IF_ERROR(CheckNvrtc(nvrtcAddNameExpression(program.get(), name.c_str()),
                                     absl::StrCat("adding name expression '", name, "'")));
  }

  std::vector<std::string> options = {absl::StrCat("--gpu-architecture=", request.arch),
                                      "--ptxas-options=-v"};
  options.insert(options.end(), request.options.begin(), request.options.end());
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());
  const nvrtcResult compiled = nvrtcCompileProgram(
      program.get(), static_cast<int>(option_pointers.size()), option_pointers.data());

  std::size_t log_size = 0;
  FORGE_RETURN_IF_ERROR(
      CheckNvrtc(nvrtcGetProgramLogSize(program.get(), &log_size), "nvrtcGetProgramLogSize"));
  result.log.assign(log_size, '\0');
  FORGE_RETURN_IF_ERROR(
      CheckNvrtc(nvrtcGetProgramLog(program.get(), result.log.data()), "nvrtcGetProgramLog"));
  while (!result.log.empty() && result.log.back() == '\0') result.log.pop_back();

  if (compiled != NVRTC_SUCCESS) {
    return NvrtcError(compiled, absl::StrCat("compiling ", kProgramName, " for ", request.arch,
                                             " (", FirstErrorLine(result.log), ")"));
  }

  std::size_t cubin_size = 0;
  FORGE_RETURN_IF_ERROR(
      CheckNvrtc(nvrtcGetCUBINSize(program.get(), &cubin_size), "nvrtcGetCUBINSize"));
  if (cubin_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NVRTC produced no cubin for ", request.arch, " with options [",
        absl::StrJoin(options, " "), "]; an option may have asked for PTX or another arch"));
  }
  result.cubin.assign(cubin_size, '\0');
  FORGE_RETURN_IF_ERROR(
      CheckNvrtc(nvrtcGetCUBIN(program.get(), result.cubin.data()), "nvrtcGetCUBIN"));

  for (const std::string& name : request.name_expressions) {
    const char* lowered = nullptr;
    FORGE_RETURN_IF_ERROR(CheckNvrtc(nvrtcGetLoweredName(program.get(), name.c_str(), &lowered),
                                     absl::StrCat("looking up the lowered name of '", name, "'")));
    result.lowered_names[name] = lowered;
  }
  result.ptxas = ParsePtxasReport(result.log);
  return absl::OkStatus();
}

CompileResult CompileWithNvrtc(const CompileRequest& request) {
  CompileResult result;
  const absl::Time start = absl::Now();
  result.status = RunNvrtc(request, result);
  result.compile_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!result.ok()) {
    result.cubin.clear();
    result.lowered_names.clear();
  }
  return result;
}

// Disk cache entry: a header line "<magic> <sha256 of body>\n", then the body, a sequence of
// length-prefixed fields "<decimal length>\n<bytes>": key, compile seconds, log, cubin, the number
// of lowered names, then name expression and lowered name pairs. The ptxas report is re-parsed
// from the log. The checksum catches truncated or altered files.
void AppendField(std::string& body, absl::string_view field) {
  absl::StrAppend(&body, field.size(), "\n", field);
}

std::string EncodeDiskEntry(const Digest& key, const CompileResult& result) {
  std::string body;
  AppendField(body, key.ToHex());
  AppendField(body, absl::StrFormat("%.17g", result.compile_seconds));  // round-trips exactly
  AppendField(body, result.log);
  AppendField(body, result.cubin);
  AppendField(body, absl::StrCat(result.lowered_names.size()));
  for (const auto& [expression, lowered] : result.lowered_names) {
    AppendField(body, expression);
    AppendField(body, lowered);
  }
  return absl::StrCat(kDiskCacheMagic, " ", Sha256Hex(body), "\n", body);
}

std::optional<std::string> ReadField(absl::string_view& body) {
  const std::size_t newline = body.find('\n');
  std::size_t size = 0;
  if (newline == absl::string_view::npos || !absl::SimpleAtoi(body.substr(0, newline), &size) ||
      size > body.size() - newline - 1) {
    return std::nullopt;
  }
  std::string field(body.substr(newline + 1, size));
  body.remove_prefix(newline + 1 + size);
  return field;
}

// The cached result in `file`, or nullopt when the file is not a well-formed entry for `key`.
std::optional<CompileResult> DecodeDiskEntry(const Digest& key, absl::string_view file) {
  const std::size_t newline = file.find('\n');
  if (newline == absl::string_view::npos) return std::nullopt;
  const std::vector<absl::string_view> header = absl::StrSplit(file.substr(0, newline), ' ');
  absl::string_view body = file.substr(newline + 1);
  if (header.size() != 2 || header[0] != kDiskCacheMagic || header[1] != Sha256Hex(body)) {
    return std::nullopt;
  }
  CompileResult result;
  std::optional<std::string> stored_key = ReadField(body);
  std::optional<std::string> seconds = ReadField(body);
  std::optional<std::string> log = ReadField(body);
  std::optional<std::string> cubin = ReadField(body);
  std::optional<std::string> name_count = ReadField(body);
  std::size_t names = 0;
  if (!stored_key || *stored_key != key.ToHex() || !seconds ||
      !absl::SimpleAtod(*seconds, &result.compile_seconds) || !log || !cubin || cubin->empty() ||
      !name_count || !absl::SimpleAtoi(*name_count, &names)) {
    return std::nullopt;
  }
  for (std::size_t i = 0; i < names; ++i) {
    std::optional<std::string> expression = ReadField(body);
    std::optional<std::string> lowered = ReadField(body);
    if (!expression || !lowered) return std::nullopt;
    result.lowered_names[*expression] = *lowered;
  }
  if (!body.empty()) return std::nullopt;
  result.log = *std::move(log);
  result.cubin = *std::move(cubin);
  result.ptxas = ParsePtxasReport(result.log);
  result.source = CompileSource::kDiskCache;
  return result;
}

std::filesystem::path DiskEntryPath(const std::string& dir, const Digest& key) {
  return std::filesystem::path(dir) / absl::StrCat(key.ToHex(), kDiskCacheSuffix);
}

// Writes to a temporary name in the same directory and renames, so readers (other pools, other
// processes) see either no entry or a whole one.
absl::Status WriteFileAtomically(const std::filesystem::path& path, absl::string_view contents) {
  static std::atomic<std::uint64_t> counter{0};
  const std::filesystem::path temp =
      path.string() + absl::StrCat(".tmp.", getpid(), ".", counter.fetch_add(1));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      return absl::UnavailableError(absl::StrCat("writing compile cache file ", temp.string()));
    }
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) {
    std::filesystem::remove(temp, error);
    return absl::UnavailableError(
        absl::StrCat("renaming ", temp.string(), " to ", path.string(), ": ", error.message()));
  }
  return absl::OkStatus();
}

std::optional<std::string> ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(contents).str();
}

// Whether a failed compile's log says that a CUTLASS header was not found.
bool MissesCutlassHeader(absl::string_view log) {
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "cutlass/") &&
        (absl::StrContains(line, "No such file") || absl::StrContains(line, "cannot open"))) {
      return true;
    }
  }
  return false;
}

absl::Status WriteFile(const std::filesystem::path& path, absl::string_view contents) {
  std::error_code ignored;
  std::filesystem::create_directories(path.parent_path(), ignored);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("writing ", path.string()));
  return absl::OkStatus();
}

// Runs nvcc for `request` in a private temporary directory (removed afterwards), filling `result`
// as far as it gets (the command line and nvcc's output even on failure).
absl::Status RunNvcc(const CompileRequest& request, const NvccToolchain& toolchain,
                     absl::Duration timeout, CompileResult& result) {
  FORGE_ASSIGN_OR_RETURN(TemporaryDirectory directory,
                         TemporaryDirectory::Create("forge-nvcc-"));
  const std::filesystem::path root(directory.path());
  FORGE_RETURN_IF_ERROR(WriteFile(root / kProgramName, request.source));
  FORGE_RETURN_IF_ERROR(
      WriteFile(root / "include" / kHostLaunchAbiHeaderPath, kHostLaunchAbiHeader));
  const std::vector<std::string> command =
      NvccCommand(toolchain, request.arch, {(root / "include").string()}, request.options,
                  kProgramName, kSharedObjectName);
  FORGE_ASSIGN_OR_RETURN(const ToolRun run, RunTool(command, directory.path(), timeout));
  result.compile_seconds = run.seconds;
  result.log = absl::StrCat("$ ", absl::StrJoin(command, " "), "\n", run.output);
  const std::string arch = SharedObjectArch(request.arch);
  if (run.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("nvcc did not build ", kProgramName, " for ",
                                                    arch, " within ",
                                                    absl::FormatDuration(timeout), "; killed"));
  }
  if (!run.succeeded()) {
    if (toolchain.cutlass_include.empty() && MissesCutlassHeader(run.output)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compiling ", kProgramName, " for ", arch, " with nvcc: the source needs CUTLASS's "
          "headers and this worker has none (worker flag --compile.cutlass-include, default the "
          "build's FORGE_CUTLASS_INCLUDE; scripts/setup installs them) (",
          FirstErrorLine(run.output), ")"));
    }
    return absl::InvalidArgumentError(absl::StrCat("compiling ", kProgramName, " for ", arch,
                                                   " with nvcc (exit ", run.exit_code, "): ",
                                                   FirstErrorLine(run.output)));
  }
  std::optional<std::string> object = ReadWholeFile(root / kSharedObjectName);
  if (!object.has_value() || object->empty()) {
    return absl::InternalError(absl::StrCat("nvcc succeeded but wrote no ", kSharedObjectName));
  }
  result.cubin = *std::move(object);
  result.ptxas = ParsePtxasReport(run.output);
  return absl::OkStatus();
}

CompileResult CompileWithNvcc(const CompileRequest& request, const NvccToolchain& toolchain,
                              absl::Duration timeout) {
  CompileResult result;
  const absl::Time start = absl::Now();
  result.status = RunNvcc(request, toolchain, timeout, result);
  if (result.compile_seconds == 0) {
    result.compile_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  }
  if (!result.ok()) result.cubin.clear();
  return result;
}

void HashField(Sha256& hash, absl::string_view field) {
  hash.Update(absl::StrCat(field.size(), ":"));
  hash.Update(field);
}

// Cubins and shared objects alike are ELF files.
bool IsElf(absl::string_view bytes) { return absl::StartsWith(bytes, "\x7f" "ELF"); }

absl::string_view OutputName(codegen::CompileOutput output) {
  return output == codegen::CompileOutput::kNvccSharedObject ? "shared_object" : "cubin";
}

std::future<CompileResult> ReadyFuture(CompileResult result) {
  std::promise<CompileResult> promise;
  promise.set_value(std::move(result));
  return promise.get_future();
}

}  // namespace

std::optional<CompileRequest> CompileRequestFor(const codegen::GeneratedKernel& kernel,
                                                const std::string& arch) {
  CompileRequest request;
  request.output = kernel.compile_output;
  request.source = kernel.source;
  request.arch = arch;
  switch (kernel.compile_output) {
    case codegen::CompileOutput::kNvrtcCubin:
      if (kernel.kernel_name.empty()) return std::nullopt;
      request.name_expressions = {kernel.kernel_name};
      return request;
    case codegen::CompileOutput::kNvccSharedObject:
      request.options = kernel.compile_options;
      return request;
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<CompilePool>> CompilePool::Create(CompilePoolOptions options) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CompilePoolOptions.threads must be at least 1, got ", options.threads));
  }
  if (!options.disk_cache_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.disk_cache_dir, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat(
          "creating compile cache directory ", options.disk_cache_dir, ": ", error.message()));
    }
  }
  int major = 0;
  int minor = 0;
  FORGE_RETURN_IF_ERROR(CheckNvrtc(nvrtcVersion(&major, &minor), "nvrtcVersion"));
  // NVRTC opens its builtins by name at the first compile (see common/loader/sibling_library.h).
  LoadSiblingLibrary(reinterpret_cast<const void*>(&nvrtcVersion),
                     absl::StrCat("libnvrtc-builtins.so.", major, ".", minor));
  int arch_count = 0;
  FORGE_RETURN_IF_ERROR(
      CheckNvrtc(nvrtcGetNumSupportedArchs(&arch_count), "nvrtcGetNumSupportedArchs"));
  std::vector<int> archs(static_cast<std::size_t>(arch_count));
  FORGE_RETURN_IF_ERROR(CheckNvrtc(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs"));
  Metrics metrics;
  if (options.registry != nullptr) {
    FORGE_ASSIGN_OR_RETURN(
        metrics.compile_seconds,
        options.registry->AddHistogram(
            {"forge_worker_compile_seconds",
             "Seconds of each successful compile this worker ran (NVRTC or nvcc), by output: one "
             "per configuration it did not find in a cache or the catalog.",
             {}},
            {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 240, 600}));
    FORGE_ASSIGN_OR_RETURN(
        metrics.lookups,
        options.registry->AddCounter(
            {"forge_worker_catalog_lookups_total",
             "Compiled-object catalog lookups, by outcome: hit, miss, error (unreachable or "
             "refused), rejected (bytes that were no entry of the key).",
             {}}));
    FORGE_ASSIGN_OR_RETURN(
        metrics.publishes,
        options.registry->AddCounter({"forge_worker_catalog_publishes_total",
                                      "Compiled objects published to the catalog, by outcome: "
                                      "stored, exists (another worker's came first), error.",
                                      {}}));
  }
  return std::unique_ptr<CompilePool>(new CompilePool(
      std::move(options), absl::StrCat(major, ".", minor), std::move(archs), metrics));
}

CompilePool::CompilePool(CompilePoolOptions options, std::string nvrtc_version,
                         std::vector<int> archs, Metrics metrics)
    : options_(std::move(options)),
      nvrtc_version_(std::move(nvrtc_version)),
      supported_archs_(std::move(archs)),
      created_(absl::Now()),
      metrics_(metrics) {
  workers_.reserve(static_cast<std::size_t>(options_.threads));
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

CompilePool::~CompilePool() {
  std::deque<Job> abandoned;
  std::vector<std::promise<CompileResult>> waiters;
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
    abandoned.swap(queue_);
    for (const Job& job : abandoned) {
      auto it = in_flight_.find(job.key);
      std::move(it->second.begin(), it->second.end(), std::back_inserter(waiters));
      in_flight_.erase(it);
    }
  }
  for (std::promise<CompileResult>& waiter : waiters) {
    CompileResult cancelled;
    cancelled.status = absl::CancelledError("the compile pool shut down before compiling this");
    waiter.set_value(std::move(cancelled));
  }
  for (std::thread& worker : workers_) worker.join();
}

Digest CompilePool::CacheKey(const CompileRequest& request) const {
  Sha256 hash;
  HashField(hash, kDiskCacheMagic);
  if (request.output == codegen::CompileOutput::kNvccSharedObject) {
    // Cubin keys stay as they were, so that existing disk caches still hit.
    HashField(hash, "nvcc-shared-object");
    absl::StatusOr<NvccToolchain> toolchain = nvcc_toolchain();
    HashField(hash, toolchain.ok() ? toolchain->nvcc_version : "no nvcc");
    HashField(hash, toolchain.ok() ? toolchain->cutlass_version : "");
    HashField(hash, toolchain.ok() ? toolchain->host_compiler_version : "");
    HashField(hash, toolchain.ok() ? toolchain->libc_version : "");
    HashField(hash, kHostLaunchAbiHeader);
  } else {
    HashField(hash, nvrtc_version_);
  }
  HashField(hash, request.arch);
  HashField(hash, request.source);
  HashField(hash, absl::StrCat(request.options.size()));
  for (const std::string& option : request.options) HashField(hash, option);
  HashField(hash, absl::StrCat(request.name_expressions.size()));
  for (const std::string& name : request.name_expressions) HashField(hash, name);
  return hash.Finish();
}

absl::StatusOr<NvccToolchain> CompilePool::nvcc_toolchain() const {
  absl::MutexLock lock(&toolchain_mutex_);
  if (!toolchain_.has_value()) {
    toolchain_ = DescribeNvccToolchain(options_.nvcc_path, options_.cutlass_include);
  }
  return *toolchain_;
}

absl::Status CompilePool::CheckRequest(const CompileRequest& request) const {
  FORGE_RETURN_IF_ERROR(CheckArch(request.arch, supported_archs_));
  if (request.output == codegen::CompileOutput::kNvccSharedObject) {
    if (!request.name_expressions.empty()) {
      return absl::InvalidArgumentError(
          "name expressions are for NVRTC cubins; a shared object is looked up by its "
          "host_launch_abi.h entry points");
    }
    return nvcc_toolchain().status();
  }
  return absl::OkStatus();
}

CompileResult CompilePool::Run(const CompileRequest& request) const {
  switch (request.output) {
    case codegen::CompileOutput::kNvrtcCubin:
      return CompileWithNvrtc(request);
    case codegen::CompileOutput::kNvccSharedObject: {
      // CheckRequest found the toolchain before the request was queued.
      return CompileWithNvcc(request, *nvcc_toolchain(), options_.nvcc_timeout);
    }
  }
  CompileResult result;
  result.status = absl::InvalidArgumentError("unknown compile output kind");
  return result;
}

std::future<CompileResult> CompilePool::Submit(CompileRequest request) {
  const absl::Status request_status = CheckRequest(request);
  const Digest key = CacheKey(request);
  absl::MutexLock lock(&mutex_);
  ++stats_.requests;
  if (!request_status.ok()) {
    ++stats_.failures;
    CompileResult result;
    result.status = request_status;
    return ReadyFuture(std::move(result));
  }
  if (auto cached = memory_cache_.find(key); cached != memory_cache_.end()) {
    ++stats_.memory_hits;
    CompileResult result = cached->second.result;
    result.source = CompileSource::kMemoryCache;
    return ReadyFuture(std::move(result));
  }
  std::vector<std::promise<CompileResult>>& waiters = in_flight_[key];
  if (!waiters.empty()) ++stats_.in_flight_joins;
  std::future<CompileResult> future = waiters.emplace_back().get_future();
  if (waiters.size() == 1) queue_.push_back(Job{key, std::move(request)});
  return future;
}

CompileResult CompilePool::Compile(CompileRequest request) {
  return Submit(std::move(request)).get();
}

CompilePoolStats CompilePool::stats() const {
  absl::MutexLock lock(&mutex_);
  CompilePoolStats stats = stats_;
  stats.uptime_seconds = absl::ToDoubleSeconds(absl::Now() - created_);
  if (stats.uptime_seconds > 0) stats.compiles_per_second = stats.compiles / stats.uptime_seconds;
  return stats;
}

bool CompilePool::HasWorkOrStopping() const { return stopping_ || !queue_.empty(); }

void CompilePool::WorkerLoop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(this, &CompilePool::HasWorkOrStopping));
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string publish;
    CompileResult result = Produce(job, publish);
    const double compile_seconds = result.compile_seconds;
    // Waiters get the result first; the catalog's copy follows.
    Finish(job.key, std::move(result));
    if (!publish.empty()) PublishToCatalog(job, compile_seconds, publish);
  }
}

bool CompilePool::UsesCatalog(const CompileRequest& request) const {
  return options_.catalog != nullptr &&
         (request.output == codegen::CompileOutput::kNvccSharedObject || options_.catalog_cubins);
}

void CompilePool::CountLookup(absl::string_view outcome) {
  if (outcome == "hit") ++stats_.catalog_hits;
  if (outcome == "miss") ++stats_.catalog_misses;
  if (outcome == "error") ++stats_.catalog_errors;
  if (outcome == "rejected") ++stats_.catalog_rejects;
  if (metrics_.lookups != nullptr) {
    metrics_.lookups->Add({{"outcome", std::string(outcome)}}).Increment();
  }
}

std::optional<CompileResult> CompilePool::FromCatalog(const Job& job) {
  absl::StatusOr<CatalogEntry> fetched = options_.catalog->Fetch(job.key);
  if (absl::IsUnimplemented(fetched.status())) return std::nullopt;  // the catalog is off
  std::optional<CompileResult> cached;
  if (fetched.ok()) cached = DecodeDiskEntry(job.key, fetched->bytes);
  const bool hit = cached.has_value() && IsElf(cached->cubin);
  absl::MutexLock lock(&mutex_);
  if (hit) {
    CountLookup("hit");
    cached->source = CompileSource::kCatalog;
    return cached;
  }
  const bool bad_bytes = fetched.ok() || absl::IsDataLoss(fetched.status());
  CountLookup(bad_bytes ? "rejected" : absl::IsNotFound(fetched.status()) ? "miss" : "error");
  return std::nullopt;
}

void CompilePool::PublishToCatalog(const Job& job, double compile_seconds,
                                   absl::string_view entry) {
  absl::StatusOr<bool> stored = options_.catalog->Publish(
      job.key, job.request.output, job.request.arch, compile_seconds, entry);
  if (absl::IsUnimplemented(stored.status())) return;  // publishing is off for this worker
  absl::MutexLock lock(&mutex_);
  if (stored.ok() && *stored) ++stats_.catalog_publishes;
  if (!stored.ok()) ++stats_.catalog_publish_failures;
  if (metrics_.publishes != nullptr) {
    metrics_.publishes->Add({{"outcome", !stored.ok() ? "error" : *stored ? "stored" : "exists"}})
        .Increment();
  }
}

CompileResult CompilePool::Produce(const Job& job, std::string& publish) {
  std::filesystem::path disk_path;
  if (!options_.disk_cache_dir.empty()) {
    disk_path = DiskEntryPath(options_.disk_cache_dir, job.key);
    if (std::optional<std::string> file = ReadWholeFile(disk_path)) {
      if (std::optional<CompileResult> cached = DecodeDiskEntry(job.key, *file)) {
        absl::MutexLock lock(&mutex_);
        ++stats_.disk_hits;
        return *std::move(cached);
      }
      absl::MutexLock lock(&mutex_);
      ++stats_.disk_rejects;
    }
  }

  const bool catalog = UsesCatalog(job.request);
  if (catalog) {
    if (std::optional<CompileResult> fetched = FromCatalog(job)) {
      const bool saved = disk_path.empty() ||
                         WriteFileAtomically(disk_path, EncodeDiskEntry(job.key, *fetched)).ok();
      if (!saved) {
        absl::MutexLock lock(&mutex_);
        ++stats_.disk_write_failures;
      }
      return *std::move(fetched);
    }
  }

  CompileResult result = Run(job.request);
  std::string entry;
  if (result.ok() && (catalog || !disk_path.empty())) entry = EncodeDiskEntry(job.key, result);
  const bool saved = disk_path.empty() || !result.ok() || WriteFileAtomically(disk_path, entry).ok();
  if (catalog && result.ok()) publish = std::move(entry);
  absl::MutexLock lock(&mutex_);
  ++stats_.compiles;
  stats_.compile_seconds += result.compile_seconds;
  if (!saved) ++stats_.disk_write_failures;
  if (result.ok() && metrics_.compile_seconds != nullptr) {
    metrics_.compile_seconds->Add({{"output", std::string(OutputName(job.request.output))}})
        .Observe(result.compile_seconds);
  }
  return result;
}

void CompilePool::Finish(const Digest& key, CompileResult result) {
  std::vector<std::promise<CompileResult>> waiters;
  {
    absl::MutexLock lock(&mutex_);
    // Failed results are not cached: they are cheap to reproduce, and a failure caused by the
    // environment (NVRTC out of memory) should not outlive it.
    if (result.ok()) RememberLocked(key, result);
    auto it = in_flight_.find(key);
    waiters = std::move(it->second);
    in_flight_.erase(it);
    if (!result.ok()) stats_.failures += static_cast<std::int64_t>(waiters.size());
  }
  for (std::size_t i = 1; i < waiters.size(); ++i) {
    CompileResult shared = result;
    shared.source = CompileSource::kJoinedInFlight;
    waiters[i].set_value(std::move(shared));
  }
  waiters.front().set_value(std::move(result));
}

void CompilePool::RememberLocked(const Digest& key, const CompileResult& result) {
  const std::int64_t bytes = static_cast<std::int64_t>(result.cubin.size() + result.log.size());
  if (bytes > options_.memory_cache_bytes || memory_cache_.contains(key)) return;
  while (memory_cache_bytes_ + bytes > options_.memory_cache_bytes) {
    auto oldest = memory_cache_.find(memory_cache_order_.front());
    memory_cache_bytes_ -= oldest->second.bytes;
    memory_cache_.erase(oldest);
    memory_cache_order_.pop_front();
  }
  memory_cache_.emplace(key, MemoryEntry{result, bytes});
  memory_cache_order_.push_back(key);
  memory_cache_bytes_ += bytes;
}

}  // namespace forge::compile

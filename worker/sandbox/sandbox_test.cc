// The sandbox against the real forge-sandbox-child: deadlines, crashes, exits, restarts and the
// backoff after failed starts, through the child's test behaviours (real sleeps, signals and
// exits), so none of it needs a GPU; the wire's candidates and the kinds of candidate without a
// GPU, and the child's loop built without the ATen fallback. Judging and timing on a GPU are
// tests/gpu/sandbox_gpu_test.cc's and (cuBLASLt, ATen fallback) sandbox_kinds_gpu_test.cc's.
#include "worker/sandbox/sandbox.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "compiler/codegen/aten_fallback/aten_fallback.h"
#include "compiler/codegen/gemm_library/gemm_library.h"
#include "compiler/codegen/pointwise/pointwise.h"
#include "compiler/codegen/reduction/reduction.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/gpu/device.h"
#include "worker/sandbox/sandbox.pb.h"
#include "worker/sandbox/sandbox_child.h"
#include "worker/sandbox/sanitize.h"
#include "worker/sandbox/wire.h"

namespace forge::sandbox {
namespace {

using ::testing::HasSubstr;

std::string ChildPath() {
  const char* path = std::getenv("FORGE_SANDBOX_CHILD");
  return path != nullptr ? path : FORGE_SANDBOX_CHILD;
}

SandboxOptions TestOptions() {
  SandboxOptions options;
  options.child_path = ChildPath();
  options.allow_test_behaviours = true;
  return options;
}

std::unique_ptr<Sandbox> CreateOrDie(SandboxOptions options) {
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(std::move(options));
  EXPECT_TRUE(sandbox.ok()) << sandbox.status();
  return sandbox.ok() ? *std::move(sandbox) : nullptr;
}

// A judge candidate whose contents never reach a GPU in these tests.
SandboxCandidate SomeCandidate() {
  SandboxCandidate candidate;
  candidate.digest = "candidate-digest";
  candidate.task.set_digest("task-digest");
  candidate.kernel.kernel_name = "affine";
  candidate.cubin = "not a cubin";
  return candidate;
}

// A gemm_library candidate as its family generates it: no kernel to load, an algo index.
SandboxCandidate SomeCublasLtCandidate() {
  SandboxCandidate candidate;
  candidate.digest = "cublaslt-candidate-digest";
  candidate.task.set_digest("task-digest");
  candidate.kernel.source = "// forge library call: cublaslt ...\n";
  candidate.kernel.template_name = codegen::GemmLibraryFamily::kCublasLtTemplate;
  candidate.kernel.parameters = {{"algo", 0}};
  candidate.kernel.hints.executor = codegen::Executor::kCublasLt;
  return candidate;
}

// An ATen fallback candidate as its family generates it: no source, no parameters.
SandboxCandidate SomeAtenFallbackCandidate() {
  SandboxCandidate candidate;
  candidate.digest = "aten-candidate-digest";
  candidate.task.set_digest("task-digest");
  candidate.kernel.template_name = codegen::AtenFallbackFamily::kTemplateName;
  candidate.kernel.hints.executor = codegen::Executor::kAten;
  return candidate;
}

class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0); }
  ~SocketPair() {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  int writer() const { return fds_[0]; }
  int reader() const { return fds_[1]; }
  void CloseWriter() { CloseEnd(0); }
  void CloseReader() { CloseEnd(1); }

 private:
  void CloseEnd(int end) {
    close(fds_[end]);
    fds_[end] = -1;
  }
  int fds_[2] = {-1, -1};
};

TEST(RequestDeadlineTest, GrowsWithTheTasksBytesUpToTheMaximum) {
  SandboxOptions options;
  options.timeout_per_gib = absl::Seconds(40);
  options.max_timeout = absl::Minutes(10);
  auto task_of = [](int64_t elements) {
    forge::v1::KernelTask task;
    for (forge::v1::TensorSpec* spec : {task.add_inputs(), task.add_outputs()}) {
      spec->set_dtype(forge::v1::DTYPE_FLOAT32);
      spec->add_shape(elements);
    }
    return task;
  };
  // 2^28 float32 in and out: 2 GiB, 80 s more.
  EXPECT_EQ(RequestDeadline(options, task_of(int64_t{1} << 28), absl::Seconds(60)),
            absl::Seconds(140));
  EXPECT_EQ(RequestDeadline(options, task_of(1000), absl::Seconds(60)),
            absl::Seconds(60) + absl::Seconds(40) * (8000.0 / (int64_t{1} << 30)));
  EXPECT_EQ(RequestDeadline(options, task_of(int64_t{1} << 34), absl::Seconds(60)),
            absl::Minutes(10));
  options.max_timeout = absl::Seconds(1);  // never below the base
  EXPECT_EQ(RequestDeadline(options, task_of(1000), absl::Seconds(60)), absl::Seconds(60));
}

TEST(WireTest, FramesRoundTripIncludingLargeOnes) {
  SocketPair pair;
  const std::string large(3 << 20, 'x');  // far above the socket buffer: needs a concurrent reader
  std::thread writer([&] {
    EXPECT_TRUE(WriteFrame(pair.writer(), "hello", absl::Now() + absl::Seconds(10)).ok());
    EXPECT_TRUE(WriteFrame(pair.writer(), "", absl::Now() + absl::Seconds(10)).ok());
    EXPECT_TRUE(WriteFrame(pair.writer(), large, absl::Now() + absl::Seconds(10)).ok());
  });
  EXPECT_EQ(*ReadFrame(pair.reader(), absl::InfiniteFuture()), "hello");
  EXPECT_EQ(*ReadFrame(pair.reader(), absl::InfiniteFuture()), "");
  EXPECT_EQ(*ReadFrame(pair.reader(), absl::InfiniteFuture()), large);
  writer.join();
}

TEST(WireTest, ReadReportsDeadlineEndOfStreamAndBadLengths) {
  SocketPair pair;
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      ReadFrame(pair.reader(), absl::Now() + absl::Milliseconds(50)).status()));
  // A length prefix of 0xFFFFFFFF, beyond kMaxFrameBytes.
  ASSERT_EQ(write(pair.writer(), "\xff\xff\xff\xff", 4), 4);
  EXPECT_TRUE(absl::IsDataLoss(ReadFrame(pair.reader(), absl::InfiniteFuture()).status()));
  // Half a frame, then the end of the stream.
  ASSERT_EQ(write(pair.writer(),
                  "\x08\x00\x00\x00"
                  "abc",
                  7),
            7);
  pair.CloseWriter();
  absl::StatusOr<std::string> truncated = ReadFrame(pair.reader(), absl::InfiniteFuture());
  EXPECT_TRUE(absl::IsOutOfRange(truncated.status())) << truncated.status();
  EXPECT_THAT(truncated.status().message(), HasSubstr("inside a frame"));
  EXPECT_TRUE(absl::IsOutOfRange(ReadFrame(pair.reader(), absl::InfiniteFuture()).status()));
}

TEST(WireTest, WriteToAClosedPeerIsAnErrorNotSigpipe) {
  SocketPair pair;
  pair.CloseReader();
  absl::Status written = WriteFrame(pair.writer(), "to nobody", absl::Now() + absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(written)) << written;
}

TEST(WireTest, OptionsVerdictsAndTimingsRoundTrip) {
  judge::JudgeOptions options;
  options.draws = 5;
  options.seed = 42;
  options.tolerances = judge::Tolerances{.atol = 1e-3, .rtol = 1e-2, .rel_norm = 1e-4};
  options.integer_ranges[2] = judge::IntegerRange{.low = -3, .high = 7};
  const judge::JudgeOptions back = FromWire(ToWire(options));
  EXPECT_EQ(back.draws, 5);
  EXPECT_EQ(back.seed, 42u);
  ASSERT_TRUE(back.tolerances.has_value());
  EXPECT_EQ(back.tolerances->rel_norm, 1e-4);
  ASSERT_EQ(back.integer_ranges.count(2), 1u);
  EXPECT_EQ(back.integer_ranges.at(2).low, -3);
  EXPECT_EQ(back.integer_ranges.at(2).high, 7);
  EXPECT_FALSE(FromWire(ToWire(judge::JudgeOptions{})).tolerances.has_value());

  judge::JudgeVerdict verdict;
  verdict.evidence.set_passed(false);
  verdict.evidence.set_failed_draw(1);
  verdict.reason = forge::v1::FAILURE_REASON_CRASH;
  verdict.detail = "draw 1: CUDA_ERROR_ILLEGAL_ADDRESS";
  verdict.context_lost = true;
  verdict.draws_on_device = 2;
  verdict.seconds = {.draw = 0.5, .upload = 1, .candidate = 2, .reference = 4, .compare = 8};
  const judge::JudgeVerdict verdict_back = FromWire(ToWire(verdict));
  EXPECT_EQ(verdict_back.evidence.failed_draw(), 1);
  EXPECT_EQ(verdict_back.reason, forge::v1::FAILURE_REASON_CRASH);
  EXPECT_EQ(verdict_back.detail, verdict.detail);
  EXPECT_TRUE(verdict_back.context_lost);
  EXPECT_EQ(verdict_back.draws_on_device, 2);
  EXPECT_EQ(verdict_back.seconds.draw, 0.5);
  EXPECT_EQ(verdict_back.seconds.upload, 1);
  EXPECT_EQ(verdict_back.seconds.candidate, 2);
  EXPECT_EQ(verdict_back.seconds.reference, 4);
  EXPECT_EQ(verdict_back.seconds.compare, 8);

  timer::Timing timing;
  timing.rep_us = {3, 1, 2};
  timing.kernel_status = absl::UnavailableError("no CUPTI");
  timing.kernels_per_rep = 1;
  const timer::Timing timing_back = FromWire(ToWire(timing));
  EXPECT_EQ(timing_back.rep_us, timing.rep_us);
  EXPECT_EQ(timing_back.summary.median, 2);  // recomputed on arrival
  EXPECT_FALSE(timing_back.kernel_summary.has_value());
  EXPECT_EQ(timing_back.kernel_status, timing.kernel_status);

  timer::TimerOptions timer_options;
  timer_options.reps = 31;
  timer_options.flush_l2 = false;
  EXPECT_EQ(FromWire(ToWire(timer_options)).reps, 31);
  EXPECT_FALSE(FromWire(ToWire(timer_options)).flush_l2);
}

TEST(WireTest, CandidatesCarryTemplateParametersAndLaunch) {
  forge::v1::KernelTask task;
  task.set_digest("task-digest");
  task.add_inputs()->add_shape(7);
  codegen::GeneratedKernel kernel;
  kernel.source = "extern \"C\" __global__ void epilogue() {}";  // does not travel
  kernel.kernel_name = "epilogue";
  kernel.launch.grid = {5, 2, 1};
  kernel.launch.block = {128, 1, 1};
  kernel.launch.dynamic_shared_bytes = 4096;
  kernel.template_name = codegen::GemmLibraryFamily::kCublasLtThenPointwiseTemplate;
  kernel.parameters = {{"algo", 3}, {"unused", -1}};
  kernel.generator_version = "gemm_library-1";  // does not travel
  kernel.hints.executor = codegen::Executor::kCublasLt;
  kernel.hints.kernel_launches = 2;  // does not travel

  const wire::Candidate candidate = CandidateToWire(task, kernel, "the cubin");
  wire::Candidate parsed;
  ASSERT_TRUE(parsed.ParseFromString(candidate.SerializeAsString()));
  EXPECT_EQ(parsed.task().digest(), "task-digest");
  EXPECT_EQ(parsed.cubin(), "the cubin");
  const codegen::GeneratedKernel back = KernelFromWire(parsed);
  EXPECT_EQ(back.kernel_name, "epilogue");
  EXPECT_EQ(back.launch.grid, kernel.launch.grid);
  EXPECT_EQ(back.launch.block, kernel.launch.block);
  EXPECT_EQ(back.launch.dynamic_shared_bytes, 4096u);
  EXPECT_EQ(back.template_name, "cublaslt_then_pointwise");
  EXPECT_EQ(back.parameters, kernel.parameters);
  EXPECT_EQ(back.source, "");
  EXPECT_EQ(back.generator_version, "");
  EXPECT_EQ(back.hints.executor, codegen::Executor::kCublasLt);
  EXPECT_EQ(back.hints.kernel_launches, 1);
  EXPECT_TRUE(back.runtime_args.empty());
}

TEST(WireTest, HostLaunchedCandidateCarriesItsObjectAndRuntimeArguments) {
  forge::v1::KernelTask task;
  task.set_digest("task-digest");
  codegen::GeneratedKernel kernel;
  kernel.template_name = "some_cutlass_template";
  kernel.hints.executor = codegen::Executor::kHostLaunched;
  kernel.compile_output = codegen::CompileOutput::kNvccSharedObject;
  kernel.runtime_args = {4096, 4096, -1, 0};
  wire::Candidate parsed;
  ASSERT_TRUE(parsed.ParseFromString(
      CandidateToWire(task, kernel, "\x7f" "ELF the object").SerializeAsString()));
  EXPECT_EQ(parsed.cubin(), "\x7f" "ELF the object");
  const codegen::GeneratedKernel back = KernelFromWire(parsed);
  EXPECT_EQ(back.hints.executor, codegen::Executor::kHostLaunched);
  EXPECT_EQ(back.compile_output, codegen::CompileOutput::kNvccSharedObject);
  EXPECT_EQ(back.runtime_args, kernel.runtime_args);
  EXPECT_EQ(KindOf(back), CandidateKind::kHostLaunched);
}

TEST(WireTest, TheExecutorTellsHowTheChildRunsACandidate) {
  codegen::GeneratedKernel kernel;
  EXPECT_EQ(KindOf(kernel), CandidateKind::kGeneratedKernel);
  kernel.hints.executor = codegen::Executor::kCublasLt;
  EXPECT_EQ(KindOf(kernel), CandidateKind::kCublasLt);
  kernel.hints.executor = codegen::Executor::kAten;
  EXPECT_EQ(KindOf(kernel), CandidateKind::kAtenFallback);
  kernel.hints.executor = codegen::Executor::kHostLaunched;
  EXPECT_EQ(KindOf(kernel), CandidateKind::kHostLaunched);
  // The executor decides, not the template's name.
  kernel.template_name = codegen::GemmLibraryFamily::kCublasLtTemplate;
  EXPECT_EQ(KindOf(kernel), CandidateKind::kHostLaunched);
}

// The child's one-shot mode, which compute-sanitizer runs (sanitize.h): it reads the request file
// and always writes an answer; here, without a GPU (or, on one, with a cubin that does not load),
// the answer is the candidate's error.
TEST(SanitizeTest, TheChildsOneShotModeWritesItsAnswer) {
  char folder[] = "/tmp/forge-sanitize-test-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string request_path = absl::StrCat(folder, "/request");
  const std::string answer_path = absl::StrCat(folder, "/answer");
  wire::JudgeRequest request;
  const SandboxCandidate candidate = SomeCandidate();
  *request.mutable_candidate() = CandidateToWire(candidate.task, candidate.kernel, candidate.cubin);
  {
    std::ofstream file(request_path, std::ios::binary);
    ASSERT_TRUE(request.SerializeToOstream(&file));
  }
  const std::string command = absl::StrCat(ChildPath(), " --sanitize-request=", request_path,
                                           " --sanitize-answer=", answer_path, " 2>/dev/null");
  EXPECT_EQ(std::system(command.c_str()), 0);
  std::ifstream file(answer_path, std::ios::binary);
  wire::Status answer;
  ASSERT_TRUE(answer.ParseFromIstream(&file));
  EXPECT_FALSE(FromWire(answer).ok());
  // Half the pair, or an unreadable request, is refused.
  EXPECT_NE(std::system(absl::StrCat(ChildPath(), " --sanitize-request=", request_path,
                                     " 2>/dev/null").c_str()), 0);
  EXPECT_NE(std::system(absl::StrCat(ChildPath(), " --sanitize-request=", folder,
                                     "/missing --sanitize-answer=", answer_path, " 2>/dev/null")
                            .c_str()),
            0);
  std::system(absl::StrCat("rm -rf '", folder, "'").c_str());
}

// A tool that cannot check the candidate leaves it unsanitized: no failure, state UNAVAILABLE
// with why, for the coordinator to refuse as a best.
TEST(SanitizeTest, AToolThatCannotRunLeavesTheCandidateUnsanitized) {
  SandboxCandidate candidate = SomeCandidate();
  candidate.kernel.hints.executor = codegen::Executor::kGeneratedKernel;
  absl::StatusOr<SanitizeOutcome> outcome =
      Sanitize({.tool_path = "/nonexistent/compute-sanitizer", .child_path = ChildPath()},
               candidate, judge::JudgeOptions());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->failure.has_value());
  EXPECT_EQ(outcome->evidence.state(), forge::v1::SANITIZER_STATE_UNAVAILABLE);
  EXPECT_THAT(outcome->evidence.tools(),
              ::testing::ElementsAre("memcheck", "racecheck", "synccheck", "initcheck"));
  EXPECT_THAT(outcome->evidence.detail(), HasSubstr("memcheck exited with status 127"));
}

// A clean run: the tool reports no error and the child's launch succeeded. An OK status
// serializes to no bytes, so the child's answer file is empty: still an answer (found on the
// H200: every honest candidate was UNAVAILABLE, "the child wrote no answer").
TEST(SanitizeTest, ACleanRunWithAnEmptyAnswerIsPassed) {
  char folder[] = "/tmp/forge-sanitize-clean-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  const std::string tool = absl::StrCat(folder, "/compute-sanitizer");
  const std::string child = absl::StrCat(folder, "/child");
  {
    // The tool: writes a clean report to --log-file and runs the target after it.
    std::ofstream file(tool);
    file << "#!/bin/sh\nwhile [ \"$1\" != --log-file ]; do shift; done\n"
            "echo '========= ERROR SUMMARY: 0 errors' > \"$2\"; shift 2; exec \"$@\"\n";
  }
  {
    // The target: a launch that succeeded writes a serialized OK status, which is empty.
    std::ofstream file(child);
    file << "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --sanitize-answer=*) "
            ": > \"${a#--sanitize-answer=}\";; esac; done\n";
  }
  ASSERT_EQ(std::system(absl::StrCat("chmod +x '", tool, "' '", child, "'").c_str()), 0);
  SandboxCandidate candidate = SomeCandidate();
  candidate.kernel.hints.executor = codegen::Executor::kGeneratedKernel;
  absl::StatusOr<SanitizeOutcome> outcome =
      Sanitize({.tool_path = tool, .child_path = child}, candidate, judge::JudgeOptions());
  std::system(absl::StrCat("rm -rf '", folder, "'").c_str());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->failure.has_value());
  EXPECT_EQ(outcome->evidence.state(), forge::v1::SANITIZER_STATE_PASSED)
      << outcome->evidence.detail();
}

TEST(SanitizeTest, AnAtenCandidateIsNotApplicableAndStartsNothing) {
  SandboxCandidate candidate = SomeCandidate();
  candidate.kernel.hints.executor = codegen::Executor::kAten;
  absl::StatusOr<SanitizeOutcome> outcome =
      Sanitize({.tool_path = "/nonexistent/compute-sanitizer", .child_path = ChildPath()},
               candidate, judge::JudgeOptions());
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_FALSE(outcome->failure.has_value());
  EXPECT_EQ(outcome->evidence.state(), forge::v1::SANITIZER_STATE_NOT_APPLICABLE);
  EXPECT_EQ(outcome->evidence.tools_size(), 0);
}

TEST(SandboxTest, CreateRejectsAPathThatIsNotAnExecutable) {
  SandboxOptions options = TestOptions();
  options.child_path = "/nonexistent/forge-sandbox-child";
  absl::StatusOr<std::unique_ptr<Sandbox>> sandbox = Sandbox::Create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(sandbox.status())) << sandbox.status();
  EXPECT_THAT(sandbox.status().message(), HasSubstr("/nonexistent/forge-sandbox-child"));
}

TEST(SandboxTest, StartsTheChildAndAnswersPings) {
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  const SandboxStats started = sandbox->stats();
  EXPECT_EQ(started.child_starts, 1);
  EXPECT_GT(started.child_pid, 0);
  EXPECT_EQ(started.device_status.ok(), gpu::DriverStatus().ok()) << started.device_status;
  EXPECT_TRUE(sandbox->Ping().ok());
  EXPECT_TRUE(sandbox->Ping().ok());
  const SandboxStats pinged = sandbox->stats();
  EXPECT_EQ(pinged.requests, 2);
  EXPECT_EQ(pinged.child_pid, started.child_pid);
  EXPECT_EQ(pinged.restarts, 0);
}

TEST(SandboxTest, JudgeAndTimeWithoutAGpuAreUnavailableAndTheChildStays) {
  if (gpu::DriverStatus().ok()) GTEST_SKIP() << "a GPU is present: sandbox_gpu_test judges there";
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  const pid_t pid = sandbox->stats().child_pid;
  absl::StatusOr<SandboxOutcome> judged = sandbox->Judge(SomeCandidate());
  EXPECT_TRUE(absl::IsUnavailable(judged.status())) << judged.status();
  EXPECT_EQ(judged.status().message(), gpu::DriverStatus().message());
  absl::StatusOr<SandboxOutcome> timed = sandbox->Time(SomeCandidate());
  EXPECT_TRUE(absl::IsUnavailable(timed.status())) << timed.status();
  const SandboxStats stats = sandbox->stats();
  EXPECT_EQ(stats.child_pid, pid);
  EXPECT_EQ(stats.crashes + stats.timeouts + stats.restarts, 0);
}

TEST(SandboxTest, LibraryAndAtenCandidatesWithoutAGpuAreUnavailableAndTheChildStays) {
  if (gpu::DriverStatus().ok()) GTEST_SKIP() << "a GPU is present: sandbox_kinds_gpu_test runs them";
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  const pid_t pid = sandbox->stats().child_pid;
  for (const SandboxCandidate& candidate : {SomeCublasLtCandidate(), SomeAtenFallbackCandidate()}) {
    absl::StatusOr<SandboxOutcome> judged = sandbox->Judge(candidate);
    EXPECT_TRUE(absl::IsUnavailable(judged.status())) << candidate.digest << ": " << judged.status();
    EXPECT_EQ(judged.status().message(), gpu::DriverStatus().message());
    absl::StatusOr<SandboxOutcome> timed = sandbox->Time(candidate);
    EXPECT_TRUE(absl::IsUnavailable(timed.status())) << candidate.digest << ": " << timed.status();
  }
  const SandboxStats stats = sandbox->stats();
  EXPECT_EQ(stats.child_pid, pid);
  EXPECT_EQ(stats.requests, 4);
  EXPECT_EQ(stats.crashes + stats.timeouts + stats.restarts, 0);
}

// The child's loop, in this process, as a child built without LibTorch's CUDA libraries runs it
// (no ATen fallback loader), over a real socket pair.
class ChildWithoutAtenFallback {
 public:
  ChildWithoutAtenFallback() {
    ChildOptions options;
    options.socket_fd = sockets_.reader();
    exit_status_ = std::async(std::launch::async, [options] { return RunSandboxChild(options); });
  }
  ~ChildWithoutAtenFallback() {
    if (exit_status_.valid()) Finish();
  }

  absl::StatusOr<wire::Hello> Hello() {
    wire::Hello hello;
    if (absl::Status read = ReadMessage(parent(), Deadline(), hello); !read.ok()) return read;
    return hello;
  }

  absl::StatusOr<wire::Response> Exchange(wire::Request request) {
    request.set_id(next_id_++);
    if (absl::Status sent = WriteMessage(parent(), request, Deadline()); !sent.ok()) return sent;
    wire::Response response;
    if (absl::Status read = ReadMessage(parent(), Deadline(), response); !read.ok()) return read;
    EXPECT_EQ(response.id(), request.id());
    return response;
  }

  // Closes the parent's end: the child's loop ends.
  int Finish() {
    sockets_.CloseWriter();
    return exit_status_.get();
  }

 private:
  int parent() const { return sockets_.writer(); }
  static absl::Time Deadline() { return absl::Now() + absl::Seconds(30); }

  SocketPair sockets_;
  std::future<int> exit_status_;
  uint64_t next_id_ = 1;
};

TEST(SandboxChildTest, AChildBuiltWithoutTheAtenFallbackRefusesItsCandidates) {
  ChildWithoutAtenFallback child;
  absl::StatusOr<wire::Hello> hello = child.Hello();
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->device_status().code() == 0, gpu::DriverStatus().ok());

  const SandboxCandidate aten = SomeAtenFallbackCandidate();
  wire::Request judge;
  *judge.mutable_judge()->mutable_candidate() = CandidateToWire(aten.task, aten.kernel, aten.cubin);
  wire::Request time;
  *time.mutable_time()->mutable_candidate() = CandidateToWire(aten.task, aten.kernel, aten.cubin);
  for (const wire::Request& request : {judge, time}) {
    absl::StatusOr<wire::Response> response = child.Exchange(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_TRUE(response->has_error()) << response->ShortDebugString();
    const absl::Status error = FromWire(response->error());
    EXPECT_TRUE(absl::IsFailedPrecondition(error)) << error;
    EXPECT_THAT(error.message(), HasSubstr("built without LibTorch's CUDA libraries"));
    EXPECT_THAT(error.message(), HasSubstr("forge::libtorch_cuda"));
    EXPECT_FALSE(response->context_lost());
  }

  // Other kinds go on to the GPU: without one, its absence is the answer.
  if (!gpu::DriverStatus().ok()) {
    const SandboxCandidate library = SomeCublasLtCandidate();
    wire::Request request;
    *request.mutable_judge()->mutable_candidate() =
        CandidateToWire(library.task, library.kernel, library.cubin);
    absl::StatusOr<wire::Response> response = child.Exchange(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_TRUE(response->has_error()) << response->ShortDebugString();
    EXPECT_TRUE(absl::IsUnavailable(FromWire(response->error()))) << response->ShortDebugString();
  }
  wire::Request ping;
  ping.set_ping(true);
  absl::StatusOr<wire::Response> pong = child.Exchange(ping);
  ASSERT_TRUE(pong.ok()) << pong.status();
  EXPECT_TRUE(pong->pong());
  EXPECT_EQ(child.Finish(), 0);
}

TEST(SandboxTest, TimeRefusesAHookOfItsOwn) {
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  timer::TimerOptions timer_options;
  timer_options.before_each_rep = [](gpu::Stream&) { return absl::OkStatus(); };
  EXPECT_TRUE(absl::IsInvalidArgument(sandbox->Time(SomeCandidate(), {}, timer_options).status()));
  timer::TimerOptions between;
  between.between_reps = [] { return absl::OkStatus(); };
  EXPECT_TRUE(absl::IsInvalidArgument(sandbox->Time(SomeCandidate(), {}, between).status()));
}

TEST(SandboxTest, AChildPastItsDeadlineIsKilledAndReplaced) {
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  const pid_t first = sandbox->stats().child_pid;
  const absl::Time start = absl::Now();
  absl::StatusOr<SandboxOutcome> outcome =
      sandbox->RunTestBehaviour(TestBehaviour::kSleepForever, absl::Milliseconds(300));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  ASSERT_TRUE(outcome->failure.has_value());
  EXPECT_EQ(outcome->failure->reason(), forge::v1::FAILURE_REASON_TIMEOUT);
  EXPECT_EQ(outcome->failure->stage(), forge::v1::FAILURE_STAGE_SANDBOX);
  EXPECT_THAT(outcome->failure->detail(), HasSubstr("no answer within 300ms"));
  EXPECT_THAT(outcome->failure->detail(), HasSubstr(absl::StrCat("(pid ", first, ") killed")));
  EXPECT_THAT(outcome->failure->log(), HasSubstr("sleeping forever, as asked"));
  EXPECT_EQ(kill(first, 0), -1) << "the hung child is gone";

  const SandboxStats stats = sandbox->stats();
  EXPECT_EQ(stats.timeouts, 1);
  EXPECT_EQ(stats.restarts, 1);
  EXPECT_EQ(stats.child_starts, 2);
  EXPECT_GT(stats.child_pid, 0);
  EXPECT_NE(stats.child_pid, first);
  EXPECT_TRUE(sandbox->Ping().ok());
}

TEST(SandboxTest, AChildKilledBySigsegvMidRequestIsACrashAndIsReplaced) {
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  const pid_t first = sandbox->stats().child_pid;
  absl::StatusOr<SandboxOutcome> outcome =
      sandbox->RunTestBehaviour(TestBehaviour::kCrashWithSigsegv, absl::Seconds(30));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->failure.has_value());
  EXPECT_EQ(outcome->failure->reason(), forge::v1::FAILURE_REASON_CRASH);
  EXPECT_EQ(outcome->failure->stage(), forge::v1::FAILURE_STAGE_SANDBOX);
  EXPECT_THAT(outcome->failure->detail(), HasSubstr("was killed by signal 11"));
  EXPECT_THAT(outcome->failure->log(), HasSubstr("crashing with SIGSEGV, as asked"));
  const SandboxStats stats = sandbox->stats();
  EXPECT_EQ(stats.crashes, 1);
  EXPECT_EQ(stats.restarts, 1);
  EXPECT_NE(stats.child_pid, first);
  EXPECT_TRUE(sandbox->Ping().ok());
}

TEST(SandboxTest, AChildThatExitsMidRequestIsACrashAndIsReplaced) {
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(TestOptions());
  ASSERT_NE(sandbox, nullptr);
  for (int round = 1; round <= 2; ++round) {
    absl::StatusOr<SandboxOutcome> outcome =
        sandbox->RunTestBehaviour(TestBehaviour::kExitWithoutAnswer, absl::Seconds(30));
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_TRUE(outcome->failure.has_value());
    EXPECT_EQ(outcome->failure->reason(), forge::v1::FAILURE_REASON_CRASH);
    EXPECT_THAT(outcome->failure->detail(), HasSubstr("exited with status 3 before answering"));
    EXPECT_THAT(outcome->failure->log(), HasSubstr("exiting with status 3"));
    EXPECT_EQ(sandbox->stats().restarts, round);
  }
  EXPECT_TRUE(sandbox->Ping().ok());
}

TEST(SandboxTest, TestBehavioursAreOffUnlessAllowed) {
  SandboxOptions options = TestOptions();
  options.allow_test_behaviours = false;
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(options);
  ASSERT_NE(sandbox, nullptr);
  absl::StatusOr<SandboxOutcome> outcome =
      sandbox->RunTestBehaviour(TestBehaviour::kCrashWithSigsegv, absl::Seconds(30));
  EXPECT_TRUE(absl::IsPermissionDenied(outcome.status())) << outcome.status();
  EXPECT_EQ(sandbox->stats().crashes, 0);
  EXPECT_TRUE(sandbox->Ping().ok());
}

TEST(SandboxTest, AChildThatDiesAtStartIsRetriedWithBackoffAndRequestsFailFast) {
  SandboxOptions options = TestOptions();
  options.child_path = "/bin/false";  // a real executable that exits 1 before any hello
  options.min_restart_backoff = absl::Milliseconds(100);
  options.max_restart_backoff = absl::Hours(1);
  std::unique_ptr<Sandbox> sandbox = CreateOrDie(options);
  ASSERT_NE(sandbox, nullptr);
  EXPECT_EQ(sandbox->stats().start_failures, 1);
  EXPECT_EQ(sandbox->stats().child_pid, 0);

  // Within the backoff: no new attempt, an immediate Unavailable that says why.
  absl::Status ping = sandbox->Ping();
  EXPECT_TRUE(absl::IsUnavailable(ping)) << ping;
  EXPECT_THAT(ping.message(), HasSubstr("failed to start 1 times in a row"));
  EXPECT_THAT(ping.message(), HasSubstr("exited with status 1 before its hello"));
  EXPECT_EQ(sandbox->stats().start_failures, 1);

  // After it: one more attempt, which fails and doubles the wait.
  absl::SleepFor(absl::Milliseconds(150));
  ping = sandbox->Ping();
  EXPECT_TRUE(absl::IsUnavailable(ping)) << ping;
  EXPECT_EQ(sandbox->stats().start_failures, 2);
  EXPECT_EQ(sandbox->stats().consecutive_start_failures, 2);
  absl::StatusOr<SandboxOutcome> judged = sandbox->Judge(SomeCandidate());
  EXPECT_TRUE(absl::IsUnavailable(judged.status())) << judged.status();
  EXPECT_THAT(judged.status().message(), HasSubstr("failed to start 2 times in a row"));
  EXPECT_EQ(sandbox->stats().start_failures, 2);
  EXPECT_EQ(sandbox->stats().requests, 0);
}

}  // namespace
}  // namespace forge::sandbox

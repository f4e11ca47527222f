#include "worker/compile/nvcc.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::compile {
namespace {

using ::testing::HasSubstr;

TEST(RunToolTest, CapturesOutputAndExitCodeInTheDirectory) {
  absl::StatusOr<TemporaryDirectory> dir = TemporaryDirectory::Create("forge-nvcc-test-");
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<ToolRun> run = RunTool(
      {"/bin/sh", "-c", "echo out; echo err >&2; echo \"$TMPDIR\"; pwd; exit 3"}, dir->path(),
      absl::Seconds(30));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->exit_code, 3);
  EXPECT_FALSE(run->timed_out);
  EXPECT_FALSE(run->succeeded());
  const std::string real = std::filesystem::canonical(dir->path()).string();
  EXPECT_EQ(run->output, absl::StrCat("out\nerr\n", dir->path(), "\n", real, "\n"));
}

TEST(RunToolTest, MissingToolIsNotFound) {
  absl::StatusOr<TemporaryDirectory> dir = TemporaryDirectory::Create("forge-nvcc-test-");
  ASSERT_TRUE(dir.ok()) << dir.status();
  absl::StatusOr<ToolRun> run = RunTool({"/nonexistent/nvcc", "--version"}, dir->path(),
                                        absl::Seconds(5));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kNotFound) << run.status();
  EXPECT_THAT(run.status().message(), HasSubstr("/nonexistent/nvcc"));
}

TEST(RunToolTest, TimeoutKillsTheToolsWholeProcessGroup) {
  absl::StatusOr<TemporaryDirectory> dir = TemporaryDirectory::Create("forge-nvcc-test-");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const absl::Time start = absl::Now();
  // The shell starts a grandchild (as nvcc starts cicc and ptxas) and waits for it.
  absl::StatusOr<ToolRun> run = RunTool({"/bin/sh", "-c", "sleep 60 & echo $! > pid; wait"},
                                        dir->path(), absl::Milliseconds(300));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->timed_out);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  std::ifstream pid_file(std::filesystem::path(dir->path()) / "pid");
  std::string pid_text;
  std::getline(pid_file, pid_text);
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(pid_text, &pid)) << pid_text;
  // The grandchild died with the group (a zombie until init reaps it counts as gone only once
  // reaped, so allow it a moment).
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
    std::string line;
    gone = !status.is_open();
    while (!gone && std::getline(status, line)) {
      if (absl::StartsWith(line, "State:")) gone = absl::StrContains(line, "Z");
    }
    if (!gone) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(gone) << "pid " << pid << " outlived the timeout";
}

TEST(TemporaryDirectoryTest, RemovesItsContents) {
  std::string path;
  {
    absl::StatusOr<TemporaryDirectory> dir = TemporaryDirectory::Create("forge-nvcc-test-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = dir->path();
    std::ofstream(std::filesystem::path(path) / "file") << "x";
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(path) / "file"));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(NvccTest, SharedObjectArchIsTheArchSpecificVariantFromSm90) {
  EXPECT_EQ(SharedObjectArch("sm_90"), "sm_90a");
  EXPECT_EQ(SharedObjectArch("sm_100"), "sm_100a");
  EXPECT_EQ(SharedObjectArch("sm_90a"), "sm_90a");
  EXPECT_EQ(SharedObjectArch("sm_100f"), "sm_100f");
  EXPECT_EQ(SharedObjectArch("sm_80"), "sm_80");
  EXPECT_EQ(SharedObjectArch("sm_89"), "sm_89");
}

TEST(NvccTest, CommandHasThePoolsFlagsThenIncludesThenTheRequestsOptions) {
  NvccToolchain toolchain{.nvcc_path = "/cuda/bin/nvcc", .cutlass_include = "/cutlass/include"};
  EXPECT_EQ(absl::StrJoin(NvccCommand(toolchain, "sm_90", {"/abi"}, {"-DTILE=128"}, "k.cu", "k.so"),
                          " "),
            "/cuda/bin/nvcc -std=c++17 -O3 -arch=sm_90a --expt-relaxed-constexpr -shared "
            "-Xcompiler -fPIC -DNDEBUG -Xptxas -v -I/abi -I/cutlass/include -DTILE=128 -o k.so "
            "k.cu");
  toolchain.cutlass_include.clear();
  EXPECT_THAT(NvccCommand(toolchain, "sm_80", {}, {}, "k.cu", "k.so"),
              ::testing::Not(::testing::Contains(HasSubstr("-I"))));
}

TEST(NvccTest, TheFlagsAreTheCommandsWithoutItsFiles) {
  // What a bundle carries for the runtime's build of a host-launched step (client/forge/results.h).
  const std::vector<std::string> command = NvccCommand({.nvcc_path = "nvcc"}, "sm_90", {}, {},
                                                       "k.cu", "k.so");
  EXPECT_EQ(std::vector<std::string>(command.begin() + 1, command.end() - 3), NvccFlags("sm_90"));
  EXPECT_THAT(NvccFlags("sm_80"), ::testing::Contains("-arch=sm_80"));
}

TEST(NvccTest, DescribesTheToolkitsNvccAndTheCutlassHeaders) {
  absl::StatusOr<NvccToolchain> toolchain =
      DescribeNvccToolchain(DefaultNvccPath(), DefaultCutlassInclude());
  ASSERT_TRUE(toolchain.ok()) << toolchain.status();
  EXPECT_THAT(toolchain->nvcc_version, HasSubstr("release"));
  EXPECT_FALSE(toolchain->host_compiler_version.empty()) << "g++ --version";
  EXPECT_THAT(toolchain->libc_version, ::testing::StartsWith("2."));
  if (!DefaultCutlassInclude().empty()) EXPECT_EQ(toolchain->cutlass_version, "4.2.0");

  absl::StatusOr<NvccToolchain> missing = DescribeNvccToolchain("/nonexistent/nvcc", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/nvcc"));

  // A CUTLASS directory without cutlass/version.h is no CUTLASS.
  absl::StatusOr<NvccToolchain> no_headers = DescribeNvccToolchain(DefaultNvccPath(), "/");
  ASSERT_TRUE(no_headers.ok()) << no_headers.status();
  EXPECT_TRUE(no_headers->cutlass_include.empty());
  EXPECT_TRUE(no_headers->cutlass_version.empty());
}

}  // namespace
}  // namespace forge::compile

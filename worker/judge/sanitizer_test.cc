#include "worker/judge/sanitizer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace forge::judge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A report in testdata/sanitizer/, written in the tool's documented format.
std::string Report(const std::string& name) {
  std::ifstream file(absl::StrCat(FORGE_SANITIZER_TESTDATA, "/", name));
  EXPECT_TRUE(file.good()) << name;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(SanitizerToolsTest, GeneratedKernelsGetEveryToolAndAtenNone) {
  EXPECT_THAT(ToolsFor(codegen::Executor::kGeneratedKernel),
              ElementsAre(SanitizerTool::kMemcheck, SanitizerTool::kRacecheck,
                          SanitizerTool::kSynccheck, SanitizerTool::kInitcheck));
  EXPECT_THAT(ToolsFor(codegen::Executor::kHostLaunched),
              ElementsAre(SanitizerTool::kMemcheck, SanitizerTool::kRacecheck,
                          SanitizerTool::kSynccheck));
  EXPECT_THAT(ToolsFor(codegen::Executor::kCublasLt),
              ElementsAre(SanitizerTool::kMemcheck, SanitizerTool::kSynccheck));
  EXPECT_THAT(ToolsFor(codegen::Executor::kCudnn), ElementsAre(SanitizerTool::kMemcheck));
  EXPECT_THAT(ToolsFor(codegen::Executor::kAten), IsEmpty());
}

TEST(SanitizerCommandLineTest, RunsTheTargetUnderTheToolWithItsReportInTheLogFile) {
  const std::vector<std::string> target = {"/opt/forge/forge-sandbox-child", "--gpu=1",
                                           "--sanitize-request=/tmp/s/request"};
  EXPECT_THAT(
      SanitizerCommandLine("/usr/local/cuda/bin/compute-sanitizer", SanitizerTool::kRacecheck,
                           "/tmp/s/racecheck.log", target),
      ElementsAre("/usr/local/cuda/bin/compute-sanitizer", "--tool", "racecheck",
                  "--error-exitcode", "87", "--launch-timeout", "120", "--print-limit", "16",
                  "--report-api-errors", "no", "--log-file", "/tmp/s/racecheck.log",
                  "/opt/forge/forge-sandbox-child", "--gpu=1",
                  "--sanitize-request=/tmp/s/request"));
}

TEST(ParseSanitizerReportTest, ACleanReportHasNoErrors) {
  const SanitizerReport report = ParseSanitizerReport(Report("memcheck_clean.txt"));
  EXPECT_TRUE(report.has_summary);
  EXPECT_EQ(report.errors, 0);
  EXPECT_THAT(report.errors_found, IsEmpty());
}

TEST(ParseSanitizerReportTest, AnOutOfBoundsReadIsOneLineWithWhereAndWhoButNoBacktrace) {
  const SanitizerReport report = ParseSanitizerReport(Report("memcheck_out_of_bounds_read.txt"));
  EXPECT_TRUE(report.has_summary);
  EXPECT_EQ(report.errors, 2);
  ASSERT_EQ(report.errors_found.size(), 2u);
  EXPECT_EQ(report.errors_found[0],
            "Invalid __global__ read of size 4 bytes at read_past_end+0x90 by thread (31,0,0) in "
            "block (3917,0,0) Address 0x7f12c0f4c300 is out of bounds and is 1 bytes after the "
            "nearest allocation at 0x7f12c0000000 of size 4012000 bytes");
  EXPECT_THAT(report.errors_found[1], HasSubstr("CUDA_ERROR_LAUNCH_FAILED"));
  EXPECT_THAT(report.errors_found[1], ::testing::Not(HasSubstr("Host Frame")));
}

TEST(ParseSanitizerReportTest, ARaceIsAnErrorAndARaceWarningIsNot) {
  const SanitizerReport race = ParseSanitizerReport(Report("racecheck_shared_race.txt"));
  EXPECT_TRUE(race.has_summary);
  EXPECT_EQ(race.errors, 1);
  EXPECT_EQ(race.warnings, 0);
  EXPECT_THAT(race.errors_found,
              ElementsAre("Error: Race reported between Write access at sum_rows_racy+0x1c0 and "
                          "Read access at sum_rows_racy+0x1e0 [248 hazards]"));

  const SanitizerReport warning = ParseSanitizerReport(Report("racecheck_warning_only.txt"));
  EXPECT_TRUE(warning.has_summary);
  EXPECT_EQ(warning.errors, 0);
  EXPECT_EQ(warning.warnings, 1);
  EXPECT_THAT(warning.errors_found, IsEmpty());
}

TEST(ParseSanitizerReportTest, UninitializedReadsAndBarrierErrorsAreErrors) {
  const SanitizerReport uninitialized =
      ParseSanitizerReport(Report("initcheck_uninitialized_read.txt"));
  EXPECT_EQ(uninitialized.errors, 1);
  ASSERT_EQ(uninitialized.errors_found.size(), 1u);
  EXPECT_THAT(uninitialized.errors_found[0],
              HasSubstr("Uninitialized __global__ memory read of size 4 bytes at "
                        "reads_output_first+0x50"));

  const SanitizerReport barrier = ParseSanitizerReport(Report("synccheck_divergent_barrier.txt"));
  EXPECT_EQ(barrier.errors, 1);
  ASSERT_EQ(barrier.errors_found.size(), 1u);
  EXPECT_THAT(barrier.errors_found[0], HasSubstr("Barrier error detected"));
  EXPECT_THAT(barrier.errors_found[0], HasSubstr("at divergent_barrier+0x70"));
}

TEST(ParseSanitizerReportTest, AReportCutShortHasNoSummaryAndKeepsWhatItFound) {
  std::string text = Report("memcheck_out_of_bounds_read.txt");
  text = text.substr(0, text.find("=========     Saved host backtrace"));
  const SanitizerReport report = ParseSanitizerReport(text);
  EXPECT_FALSE(report.has_summary);
  EXPECT_EQ(report.errors, 1);
  // The target's own output, without the prefix, is not the tool's.
  EXPECT_EQ(ParseSanitizerReport("Invalid __global__ read of size 4 bytes\n").errors, 0);
}

class FindComputeSanitizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/forge-sanitizer-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    root_ = dir;
    ASSERT_EQ(mkdir((root_ + "/path").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/cuda").c_str(), 0755), 0);
    ASSERT_EQ(mkdir((root_ + "/cuda/bin").c_str(), 0755), 0);
  }
  void TearDown() override { std::system(absl::StrCat("rm -rf '", root_, "'").c_str()); }

  // An executable file at `path`.
  static void MakeTool(const std::string& path, mode_t mode = 0755) {
    std::ofstream(path) << "#!/bin/sh\n";
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }

  std::string root_;
};

TEST_F(FindComputeSanitizerTest, TheConfiguredToolMustBeExecutable) {
  const std::string tool = root_ + "/mine";
  EXPECT_TRUE(absl::IsNotFound(FindComputeSanitizer(tool, "", "").status()));
  MakeTool(tool, 0644);
  EXPECT_TRUE(absl::IsNotFound(FindComputeSanitizer(tool, "", "").status()));
  ASSERT_EQ(chmod(tool.c_str(), 0755), 0);
  EXPECT_EQ(*FindComputeSanitizer(tool, root_ + "/path", ""), tool);
}

TEST_F(FindComputeSanitizerTest, PathComesBeforeCudaHome) {
  const std::string on_path = root_ + "/path/compute-sanitizer";
  const std::string in_cuda = root_ + "/cuda/bin/compute-sanitizer";
  MakeTool(in_cuda);
  EXPECT_EQ(*FindComputeSanitizer("", "/nonexistent:" + root_ + "/path", root_ + "/cuda"),
            in_cuda);
  MakeTool(on_path);
  EXPECT_EQ(*FindComputeSanitizer("", "/nonexistent:" + root_ + "/path", root_ + "/cuda"),
            on_path);
}

TEST_F(FindComputeSanitizerTest, NoToolIsNotFoundNamingWhereItLooked) {
  if (access("/usr/local/cuda/bin/compute-sanitizer", X_OK) == 0) {
    GTEST_SKIP() << "this machine has /usr/local/cuda/bin/compute-sanitizer, the last fallback";
  }
  absl::StatusOr<std::string> found = FindComputeSanitizer("", root_ + "/path", root_ + "/cuda");
  ASSERT_TRUE(absl::IsNotFound(found.status()));
  EXPECT_THAT(found.status().message(), HasSubstr(root_ + "/cuda"));
}

}  // namespace
}  // namespace forge::judge

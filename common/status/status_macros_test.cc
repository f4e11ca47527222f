#include "common/status/status_macros.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace forge {
namespace {

// Records each call so the tests can see how often, and whether, an expression ran.
struct CallLog {
  std::vector<std::string> calls;

  absl::Status Step(const std::string& name, absl::Status result) {
    calls.push_back(name);
    return result;
  }
  absl::StatusOr<int> Value(const std::string& name, absl::StatusOr<int> result) {
    calls.push_back(name);
    return result;
  }
};

absl::Status TwoSteps(CallLog& log, absl::Status first, absl::Status second) {
  FORGE_RETURN_IF_ERROR(log.Step("first", first));
  FORGE_RETURN_IF_ERROR(log.Step("second", second));
  log.calls.push_back("end");
  return absl::OkStatus();
}

TEST(ReturnIfErrorTest, RunsEveryStepWhenAllSucceed) {
  CallLog log;
  EXPECT_TRUE(TwoSteps(log, absl::OkStatus(), absl::OkStatus()).ok());
  EXPECT_EQ(log.calls, (std::vector<std::string>{"first", "second", "end"}));
}

TEST(ReturnIfErrorTest, ReturnsTheFirstErrorAndStopsThere) {
  CallLog log;
  absl::Status result =
      TwoSteps(log, absl::NotFoundError("no such job"), absl::InternalError("unreached"));
  EXPECT_EQ(result, absl::NotFoundError("no such job"));
  EXPECT_EQ(log.calls, (std::vector<std::string>{"first"}));
}

TEST(ReturnIfErrorTest, WorksInAFunctionReturningStatusOr) {
  auto fails = []() -> absl::StatusOr<int> {
    FORGE_RETURN_IF_ERROR(absl::UnavailableError("redis down"));
    return 1;
  };
  EXPECT_EQ(fails().status(), absl::UnavailableError("redis down"));
}

absl::StatusOr<int> SumOfTwo(CallLog& log, absl::StatusOr<int> a, absl::StatusOr<int> b) {
  FORGE_ASSIGN_OR_RETURN(int first, log.Value("a", a));
  int second = 0;
  FORGE_ASSIGN_OR_RETURN(second, log.Value("b", b));
  return first + second;
}

TEST(AssignOrReturnTest, AssignsDeclaredAndExistingVariables) {
  CallLog log;
  EXPECT_EQ(SumOfTwo(log, 2, 40).value(), 42);
  EXPECT_EQ(log.calls, (std::vector<std::string>{"a", "b"}));
}

TEST(AssignOrReturnTest, ReturnsTheErrorAndSkipsTheRest) {
  CallLog log;
  absl::StatusOr<int> result = SumOfTwo(log, absl::InvalidArgumentError("bad a"), 40);
  EXPECT_EQ(result.status(), absl::InvalidArgumentError("bad a"));
  EXPECT_EQ(log.calls, (std::vector<std::string>{"a"}));

  log.calls.clear();
  result = SumOfTwo(log, 2, absl::DeadlineExceededError("bad b"));
  EXPECT_EQ(result.status(), absl::DeadlineExceededError("bad b"));
  EXPECT_EQ(log.calls, (std::vector<std::string>{"a", "b"}));
}

TEST(AssignOrReturnTest, MovesMoveOnlyValues) {
  auto make = [](int v) -> absl::StatusOr<std::unique_ptr<int>> {
    return std::make_unique<int>(v);
  };
  auto use = [&]() -> absl::StatusOr<int> {
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<int> x, make(3));
    FORGE_ASSIGN_OR_RETURN(std::unique_ptr<int> y, make(4));
    return *x * *y;
  };
  EXPECT_EQ(use().value(), 12);
}

TEST(AnnotateTest, PrefixesTheMessageAndKeepsTheCode) {
  absl::Status annotated =
      Annotate(absl::NotFoundError("no such file"), "loading config file forge.conf");
  EXPECT_EQ(annotated.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(annotated.message(), "loading config file forge.conf: no such file");
}

TEST(AnnotateTest, KeepsPayloads) {
  absl::Status status = absl::AbortedError("lease lost");
  status.SetPayload("type.forge/lease", absl::Cord("candidate-7"));
  absl::Status annotated = Annotate(status, "renewing lease");
  ASSERT_TRUE(annotated.GetPayload("type.forge/lease").has_value());
  EXPECT_EQ(*annotated.GetPayload("type.forge/lease"), "candidate-7");
}

TEST(AnnotateTest, LeavesOkAlone) { EXPECT_TRUE(Annotate(absl::OkStatus(), "anything").ok()); }

TEST(AnnotateTest, NestsOutermostContextFirst) {
  absl::Status inner = Annotate(absl::InternalError("EOF"), "reading header");
  EXPECT_EQ(Annotate(inner, "opening model.pt2").message(),
            "opening model.pt2: reading header: EOF");
}

}  // namespace
}  // namespace forge

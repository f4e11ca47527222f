// The cudnn_conv family's graphs: built and validated by the cuDNN frontend on every machine (no
// handle or GPU needed), and on a GPU run and checked against a convolution computed here. The
// binary linking libcudnn and starting on a machine without a GPU is itself part of what runs
// everywhere.
#include "worker/library/cudnn_conv.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/testing/codegen_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/extension/cudnn_conv_graph.h"
#include "tests/support/gpu_test.h"

namespace forge::library {
namespace {

using codegen::CudnnConvCall;
using codegen::CudnnConvFamily;
using codegen::SchedulePoint;
using codegen::testing::ConvEpilogueTask;
using codegen::testing::ConvShape;
using ::testing::HasSubstr;

constexpr auto kF32 = forge::v1::DTYPE_FLOAT32;

SchedulePoint Point(int heuristic, int engine) {
  return {CudnnConvFamily::kGraphTemplate, {{"heuristic", heuristic}, {"engine", engine}}};
}

SchedulePoint NhwcPoint(int heuristic, int engine) {
  SchedulePoint point = Point(heuristic, engine);
  point.template_name = CudnnConvFamily::kChannelsLastTemplate;
  return point;
}

CudnnConvCall CallOf(const forge::v1::KernelTask& task, int heuristic = 0, int engine = 0) {
  auto call = codegen::DescribeCudnnConv(task, Point(heuristic, engine));
  EXPECT_TRUE(call.ok()) << call.status();
  return call.ok() ? *call : CudnnConvCall();
}

// Every epilogue, dtype and layout the family describes makes a graph the frontend validates.
TEST(CudnnConvGraphTest, EveryDescribedCallValidates) {
  const std::vector<std::vector<std::string>> epilogues = {
      {}, {"relu"}, {"gelu"}, {"gelu_tanh"}, {"silu"}, {"sigmoid"}, {"tanh"}, {"scale"},
      {"residual", "relu"}, {"channel_bias", "scale", "residual", "gelu"},
      {"batch_norm", "relu"}, {"batch_norm", "residual", "relu"}, {"batch_norm", "relu6"},
      {"hardtanh"}, {"clamp"}};
  const std::vector<ConvShape> shapes = {
      {.n = 4, .c = 64, .h = 14, .w = 14, .k = 64, .r = 3, .s = 3, .padding = 1},
      {.n = 2, .c = 32, .h = 15, .w = 9, .k = 48, .r = 3, .s = 3, .stride = 2, .padding = 2,
       .dilation = 2, .groups = 8},
      {.n = 2, .c = 16, .h = 7, .w = 7, .k = 16, .r = 7, .s = 7, .padding = 3, .groups = 16},
      {.n = 8, .c = 256, .h = 7, .w = 7, .k = 64, .r = 1, .s = 1}};
  int validated = 0;
  for (const auto dtype : {kF32, forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT16}) {
    for (const ConvShape& shape : shapes) {
      for (const auto& epilogue : epilogues) {
        for (const bool channels_last : {false, true}) {
          const forge::v1::KernelTask task =
              ConvEpilogueTask(dtype, shape, /*bias=*/true, epilogue, channels_last);
          const absl::Status status = ValidateCudnnConvGraph(CallOf(task));
          EXPECT_TRUE(status.ok()) << status;
          validated += status.ok();
          if (!channels_last) {  // and channels-last inside
            auto nhwc = codegen::DescribeCudnnConv(task, NhwcPoint(0, 0));
            ASSERT_TRUE(nhwc.ok()) << nhwc.status();
            const absl::Status inside = ValidateCudnnConvGraph(*nhwc);
            EXPECT_TRUE(inside.ok()) << inside;
            validated += inside.ok();
          }
        }
      }
    }
  }
  EXPECT_EQ(validated, 3 * 4 * 15 * 3);
}

// A call the frontend cannot make a graph of is refused with the frontend's own message.
TEST(CudnnConvGraphTest, RefusesAGraphTheFrontendCannotMake) {
  CudnnConvCall call = CallOf(ConvEpilogueTask(kF32, {.n = 1, .c = 4, .h = 8, .w = 8, .k = 8, .r = 3, .s = 3},
                                               true, {"relu"}));
  call.w.dims.pop_back();  // a filter of the wrong rank
  call.w.strides.pop_back();
  const absl::Status status = ValidateCudnnConvGraph(call);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("rank"));
}

// The plan's step builds the judged candidate's graph: the JSON of the call the client writes into
// plan.json (codegen::CudnnConvCallJson), read back as a generated extension reads it
// (forge_cudnn::ParseCall), describes the graph this executor built for the candidate, and
// routes the same task inputs to it, for every kind of step: batch norm folds, clamps (an
// infinite upper bound too), residuals, channels-last inside, heuristic and engine.
TEST(CudnnConvGraphTest, ThePlansCallBuildsTheCandidatesGraph) {
  const std::vector<std::vector<std::string>> epilogues = {
      {"relu"}, {"batch_norm", "relu"}, {"batch_norm", "residual", "relu"}, {"batch_norm", "relu6"},
      {"hardtanh"}, {"clamp"}, {"channel_bias", "scale", "residual", "gelu"}};
  const ConvShape shape = {.n = 2, .c = 32, .h = 15, .w = 9, .k = 48, .r = 3, .s = 3, .stride = 2,
                           .padding = 2, .dilation = 2, .groups = 8};
  int compared = 0;
  for (const auto dtype : {kF32, forge::v1::DTYPE_BFLOAT16}) {
    for (const auto& epilogue : epilogues) {
      const forge::v1::KernelTask task = ConvEpilogueTask(dtype, shape, true, epilogue, false);
      for (const SchedulePoint& point : {Point(1, 3), NhwcPoint(2, 5)}) {
        auto call = codegen::DescribeCudnnConv(task, point);
        ASSERT_TRUE(call.ok()) << call.status();
        forge_cudnn::Call parsed;
        const std::string json = codegen::CudnnConvCallJson(*call, "eng7");
        ASSERT_EQ(forge_cudnn::ParseCall(json, &parsed), "") << json;
        SCOPED_TRACE(codegen::DescribeCall(*call));
        EXPECT_EQ(forge_cudnn::Describe(parsed.conv), DescribeCudnnConvGraph(*call));
        EXPECT_EQ(parsed.x_input, call->x_input);
        EXPECT_EQ(parsed.w_input, call->w_input);
        ASSERT_EQ(parsed.step_inputs.size(), call->epilogue.size());
        for (size_t i = 0; i < call->epilogue.size(); ++i) {
          EXPECT_EQ(parsed.step_inputs[i], call->epilogue[i].input);
          EXPECT_STREQ(forge_cudnn::kStepNames[static_cast<int>(parsed.conv.epilogue[i].step)],
                       codegen::ConvStepName(call->epilogue[i].step));
        }
        ASSERT_EQ(parsed.batch_norms.size(), call->batch_norms.size());
        for (size_t i = 0; i < call->batch_norms.size(); ++i) {
          const codegen::CudnnBatchNorm& norm = call->batch_norms[i];
          const forge_cudnn::BatchNormFold& fold = parsed.batch_norms[i];
          const std::pair<const codegen::ChannelOperand*, const forge_cudnn::FoldOperand*>
              operands[] = {{&norm.mean, &fold.mean}, {&norm.var, &fold.var},
                            {&norm.weight, &fold.weight}, {&norm.bias, &fold.bias}};
          for (const auto& [want, got] : operands) {
            EXPECT_EQ(got->input, want->input);
            if (want->input >= 0) EXPECT_EQ(got->type, *codegen::BatchNormFoldType(want->dtype));
          }
          EXPECT_EQ(fold.eps, static_cast<float>(norm.eps));
        }
        EXPECT_EQ(parsed.channels_last_inside, call->channels_last_inside);
        EXPECT_EQ(static_cast<int>(parsed.heuristic), call->heuristic);
        EXPECT_EQ(parsed.engine, call->engine);
        EXPECT_EQ(parsed.engine_name, "eng7");
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * 7 * 2);
}

// A clamp without bounds keeps none through the plan's JSON (null there).
TEST(CudnnConvGraphTest, AnUnboundedClampStaysUnbounded) {
  auto call = codegen::DescribeCudnnConv(
      ConvEpilogueTask(kF32, {.n = 1, .c = 4, .h = 8, .w = 8, .k = 8, .r = 3, .s = 3}, true,
                       {"clamp"}),
      Point(0, 0));
  ASSERT_TRUE(call.ok()) << call.status();
  call->epilogue.back().upper = std::numeric_limits<double>::infinity();
  call->epilogue.back().scalar = -std::numeric_limits<double>::infinity();
  const std::string json = codegen::CudnnConvCallJson(*call, "");
  EXPECT_THAT(json, HasSubstr("\"scalar\": null, \"upper\": null"));
  forge_cudnn::Call parsed;
  ASSERT_EQ(forge_cudnn::ParseCall(json, &parsed), "");
  EXPECT_EQ(parsed.conv.epilogue.back().upper, std::numeric_limits<float>::infinity());
  EXPECT_EQ(parsed.conv.epilogue.back().scalar, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(forge_cudnn::Describe(parsed.conv), DescribeCudnnConvGraph(*call));
}

// Text that is not a call is refused with what is wrong, never a crash.
TEST(CudnnConvGraphTest, ParseCallRefusesWhatIsNotACall) {
  forge_cudnn::Call parsed;
  EXPECT_THAT(forge_cudnn::ParseCall("[1, 2", &parsed), HasSubstr("not a JSON object"));
  EXPECT_THAT(forge_cudnn::ParseCall("{\"dtype\": \"float32\"}", &parsed),
              HasSubstr("the cudnn_conv call: "));
  auto call = CallOf(ConvEpilogueTask(kF32, {.n = 1, .c = 4, .h = 8, .w = 8, .k = 8, .r = 3, .s = 3},
                                      true, {"batch_norm"}));
  std::string json = codegen::CudnnConvCallJson(call, "");
  const std::string norms = "\"batch_norms\": [";
  json.insert(json.find(norms) + norms.size(),
              "{\"mean\": {\"input\": 3, \"type\": 0}, \"var\": {\"input\": 4, \"type\": 0}, "
              "\"weight\": {\"input\": -1, \"type\": 0}, \"bias\": {\"input\": -1, \"type\": 0}, "
              "\"eps\": 0.001}, ");
  EXPECT_THAT(forge_cudnn::ParseCall(json, &parsed), HasSubstr("2 batch norms' operands for 1"));
}

class CudnnConvGpuTest : public forge::testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto conv = CudnnConv::Create(*device_);
    ASSERT_TRUE(conv.ok()) << conv.status();
    conv_ = *std::move(conv);
  }

  void RunGroupedStridedConv(bool with_residual, int& ran);

  std::unique_ptr<CudnnConv> conv_;
};

// Small integers: every sum below is exact in float32.
using forge::testing::SmallIntegerRamp;

// Runs a grouped, strided float32 conv + bias (+ residual) + relu through every heuristic mode
// that has an engine for it, on the NCHW tensors and channels-last inside, and checks each result
// exactly; counts the points that ran in `ran`.
void CudnnConvGpuTest::RunGroupedStridedConv(bool with_residual, int& ran) {
  const ConvShape s = {.n = 2, .c = 8, .h = 9, .w = 7, .k = 12, .r = 3, .s = 3, .stride = 2,
                       .padding = 1, .groups = 2};
  const forge::v1::KernelTask task = ConvEpilogueTask(
      kF32, s, /*bias=*/true,
      with_residual ? std::vector<std::string>{"residual", "relu"} : std::vector<std::string>{"relu"});
  const int64_t p = (s.h + 2 * s.padding - s.r) / s.stride + 1;
  const int64_t q = (s.w + 2 * s.padding - s.s) / s.stride + 1;
  const std::vector<float> x = SmallIntegerRamp(s.n * s.c * s.h * s.w, 7, 1);
  const std::vector<float> w = SmallIntegerRamp(s.k * (s.c / s.groups) * s.r * s.s, 5, 2);
  const std::vector<float> bias = SmallIntegerRamp(s.k, 9, 3);
  const std::vector<float> residual = SmallIntegerRamp(s.n * s.k * p * q, 11, 4);
  std::vector<double> expected(s.n * s.k * p * q);
  const int64_t cg = s.c / s.groups, kg = s.k / s.groups;
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t k = 0; k < s.k; ++k)
      for (int64_t i = 0; i < p; ++i)
        for (int64_t j = 0; j < q; ++j) {
          double sum = bias[k];
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t r = 0; r < s.r; ++r)
              for (int64_t t = 0; t < s.s; ++t) {
                const int64_t h = i * s.stride - s.padding + r, ww = j * s.stride - s.padding + t;
                if (h < 0 || h >= s.h || ww < 0 || ww >= s.w) continue;
                const int64_t channel = (k / kg) * cg + c;
                sum += double{x[((n * s.c + channel) * s.h + h) * s.w + ww]} *
                       w[((k * cg + c) * s.r + r) * s.s + t];
              }
          const int64_t at = ((n * s.k + k) * p + i) * q + j;
          expected[at] = std::max(0.0, sum + (with_residual ? residual[at] : 0.0));
        }
  gpu::DeviceBuffer xb = UploadFloats(x), wb = UploadFloats(w);
  gpu::DeviceBuffer bb = UploadFloats(bias), rb = UploadFloats(residual);
  const std::vector<float> poison(expected.size(), NAN);
  for (int index = 0; index < 2 * CudnnConvFamily::kHeuristicModes; ++index) {
    // Each mode on the task's NCHW tensors, then channels-last inside.
    const int heuristic = index % CudnnConvFamily::kHeuristicModes;
    const bool inside = index >= CudnnConvFamily::kHeuristicModes;
    auto launch =
        LoadCudnnConvCandidate(*conv_, task, inside ? NhwcPoint(heuristic, 0) : Point(heuristic, 0));
    if (absl::IsOutOfRange(launch.status())) continue;  // that mode has nothing for the graph
    ASSERT_TRUE(launch.ok()) << launch.status();
    EXPECT_FALSE(launch->engine_name.empty());
    auto stream = device_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    gpu::DeviceBuffer yb = UploadFloats(poison);  // NaN: every element must be written
    std::vector<CUdeviceptr> args = {xb.address(), wb.address(), bb.address()};
    if (with_residual) args.push_back(rb.address());
    args.push_back(yb.address());
    ASSERT_TRUE(launch->launch(*stream, args).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    std::vector<float> y(expected.size());
    ASSERT_TRUE(yb.CopyToHost(y.data(), y.size() * sizeof(float)).ok());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_EQ(y[i], expected[i]) << "heuristic " << heuristic << (inside ? " nhwc" : "")
                                   << " element " << i;
    }
    ++ran;
  }
  // An engine index past the list is an unsupported candidate, not an error.
  auto past = LoadCudnnConvCandidate(*conv_, task, Point(0, CudnnConvFamily::kEngineConfigs - 1));
  if (!past.ok()) EXPECT_TRUE(absl::IsOutOfRange(past.status())) << past.status();
}

// On the H200 (cuDNN 9.19) no engine without TF32 runs the float32 graph with the residual add
// (an unsupported candidate, which the family reports as such); the graph without it runs. What
// runs must be exact on small integers.
TEST_F(CudnnConvGpuTest, GroupedStridedConvWithBiasResidualAndRelu) {
  int ran = 0;
  RunGroupedStridedConv(/*with_residual=*/true, ran);
  RunGroupedStridedConv(/*with_residual=*/false, ran);
  EXPECT_GE(ran, 1)
      << "no heuristic mode of cuDNN runs a float32 grouped conv + bias (+ residual) + relu";
}

}  // namespace
}  // namespace forge::library

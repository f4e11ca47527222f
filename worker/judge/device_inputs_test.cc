#include "worker/judge/device_inputs.h"

#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/inputs.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

// The draw kernel is compiled where no GPU is: every architecture the workers target.
TEST(DeviceInputsSourceTest, CompilesForEveryTargetArchitecture) {
  auto pool = compile::CompilePool::Create({.threads = 1});
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    compile::CompileRequest request;
    request.source = DeviceInputsSource();
    request.arch = arch;
    request.options = DeviceInputsOptions();
    compile::CompileResult compiled = (*pool)->Compile(request);
    EXPECT_TRUE(compiled.ok()) << arch << ": " << compiled.status << "\n" << compiled.log;
    EXPECT_EQ(compiled.ptxas.functions.count("forge_draw"), 1u) << arch;
  }
}

// The element rule the device runs is the header the host compiles, as it is now on disk (after
// its top comment), and the module is built without FMA contraction.
TEST(DeviceInputsSourceTest, EmbedsTheHostsDrawElement) {
  const std::string path = FORGE_JUDGE_SOURCE_DIR "/draw_element.h";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  std::stringstream text;
  text << file.rdbuf();
  const std::string header = text.str();
  const size_t body = header.find("// FORGE_EMBED_BEGIN\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_TRUE(absl::StartsWith(DeviceInputsSource(),
                               header.substr(body + std::string("// FORGE_EMBED_BEGIN\n").size())));
  EXPECT_TRUE(absl::StrContains(DeviceInputsSource(), "forge_draw"));
  EXPECT_EQ(DeviceInputsOptions()[0], "--fmad=false");
}

TEST(DrawLayoutOfTest, RowMajorStridedAndTooManyDimensions) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(forge::v1::DTYPE_BFLOAT16);
  for (int64_t size : {3, 4}) spec.add_shape(size);
  absl::StatusOr<DrawLayout> dense = DrawLayoutOf(spec);
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->count, 12);
  EXPECT_EQ(dense->element_bytes, 2);
  EXPECT_EQ(dense->row_major, 1);
  for (int64_t stride : {1, 5}) spec.add_strides(stride);
  absl::StatusOr<DrawLayout> strided = DrawLayoutOf(spec);
  ASSERT_TRUE(strided.ok()) << strided.status();
  EXPECT_EQ(strided->row_major, 0);
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(DrawOffset(*strided, i), StorageOffsetOf(spec, i));
  forge::v1::TensorSpec deep;
  deep.set_dtype(forge::v1::DTYPE_FLOAT32);
  for (int d = 0; d < kMaxDrawRank + 1; ++d) deep.add_shape(2);
  for (int d = 0; d < kMaxDrawRank + 1; ++d) deep.add_strides(int64_t{1} << (kMaxDrawRank - d + 1));
  EXPECT_EQ(DrawLayoutOf(deep).status().code(), absl::StatusCode::kUnimplemented);
}

class DeviceInputsTest : public testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto inputs = DeviceInputs::Create(*device_);
    ASSERT_TRUE(inputs.ok()) << inputs.status();
    inputs_ = *std::move(inputs);
    auto stream = device_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_.emplace(*std::move(stream));
  }

  // The device's draw of `spec` by `rule`, read back.
  std::string DrawOnDevice(const forge::v1::TensorSpec& spec, const DrawRule& rule) {
    auto buffer = device_->Allocate(*StorageBytes(spec));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return "";
    EXPECT_TRUE(buffer->Fill8(0xA5, *stream_).ok());  // what a missed element would show
    absl::Status drawn = inputs_->Draw(spec, rule, *buffer, *stream_);
    EXPECT_TRUE(drawn.ok()) << drawn;
    EXPECT_TRUE(stream_->Synchronize().ok());
    std::string bytes(buffer->size_bytes(), '\0');
    EXPECT_TRUE(buffer->CopyToHost(bytes.data(), bytes.size()).ok());
    return bytes;
  }

  std::unique_ptr<DeviceInputs> inputs_;
  std::optional<gpu::Stream> stream_;
};

std::string HostBytes(const HostTensor& tensor) {
  return std::string(reinterpret_cast<const char*>(tensor.storage.data()), tensor.storage.size());
}

// Every standard and adversarial draw of every dtype the judge draws, a few chunks long and
// strided too, holds the host's bytes; drawing twice gives the same bytes.
TEST_F(DeviceInputsTest, DrawsEqualTheHostsAndRepeat) {
  constexpr int64_t kCount = 3 * ThreadPool::kChunkElements + 777;
  for (DType dtype : {forge::v1::DTYPE_FLOAT32, forge::v1::DTYPE_FLOAT64, forge::v1::DTYPE_FLOAT16,
                      forge::v1::DTYPE_BFLOAT16, forge::v1::DTYPE_FLOAT8_E4M3FN,
                      forge::v1::DTYPE_FLOAT8_E5M2, forge::v1::DTYPE_INT32,
                      forge::v1::DTYPE_INT64, forge::v1::DTYPE_UINT8, forge::v1::DTYPE_BOOL}) {
    SCOPED_TRACE(forge::v1::DType_Name(dtype));
    forge::v1::TensorSpec spec;
    spec.set_dtype(dtype);
    spec.add_shape(kCount);
    std::vector<DrawRule> rules;
    const InputDomain any;
    const InputDomain classes{InputDomain::Kind::kIntegerRange, {0, 1000}, "classes"};
    const InputDomain positive{InputDomain::Kind::kPositive, {}, "positive"};
    const bool floating = IsFloatingPoint(dtype);
    for (int draw = 0; draw < 3; ++draw) {
      rules.push_back(*StandardDrawRule(spec, any, draw, 1, 42));
      if (floating) rules.push_back(*StandardDrawRule(spec, positive, draw, 2, 42));
    }
    if (floating) {
      for (ops::AdversarialDraw kind :
           {ops::kLargeLogits, ops::kLargeMean, ops::kTinyVariance, ops::kCancellation,
            ops::kActivationKinks, ops::kZerosAndSubnormals}) {
        rules.push_back(*AdversarialDrawRule(spec, any, kind, 3, 0, 42));
      }
    } else if (dtype != forge::v1::DTYPE_BOOL) {
      rules.push_back(*AdversarialDrawRule(spec, classes, ops::kIntegerEdges, 3, 0, 42));
    }
    for (size_t r = 0; r < rules.size(); ++r) {
      SCOPED_TRACE(absl::StrCat("rule ", r, ", distribution ", rules[r].distribution));
      absl::StatusOr<HostTensor> host = DrawTensor(spec, rules[r]);
      ASSERT_TRUE(host.ok()) << host.status();
      const std::string device = DrawOnDevice(spec, rules[r]);
      ASSERT_EQ(device, HostBytes(*host));
      ASSERT_EQ(DrawOnDevice(spec, rules[r]), device);
    }
  }
  // Strided: the logical elements at their offsets, the gaps zero.
  forge::v1::TensorSpec strided;
  strided.set_dtype(forge::v1::DTYPE_FLOAT16);
  for (int64_t size : {300, 70}) strided.add_shape(size);
  for (int64_t stride : {1, 301}) strided.add_strides(stride);
  const DrawRule rule = *StandardDrawRule(strided, {}, 0, 0, 3);
  EXPECT_EQ(DrawOnDevice(strided, rule), HostBytes(*DrawTensor(strided, rule)));
}

TEST_F(DeviceInputsTest, RefusesAMismatchedRuleOrBuffer) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(forge::v1::DTYPE_FLOAT32);
  spec.add_shape(1024);
  auto small = device_->Allocate(1024);
  ASSERT_TRUE(small.ok());
  const DrawRule rule = *StandardDrawRule(spec, {}, 0, 0, 1);
  EXPECT_EQ(inputs_->Draw(spec, rule, *small, *stream_).code(),
            absl::StatusCode::kInvalidArgument);
  auto large = device_->Allocate(4096);
  ASSERT_TRUE(large.ok());
  DrawRule wrong = rule;
  wrong.dtype = kDrawFloat16;
  EXPECT_EQ(inputs_->Draw(spec, wrong, *large, *stream_).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace forge::judge

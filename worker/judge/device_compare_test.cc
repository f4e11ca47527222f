#include "worker/judge/device_compare.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"
#include "worker/judge/device_draws.h"
#include "worker/judge/host_tensor.h"
#include "worker/judge/thread_pool.h"

namespace forge::judge {
namespace {

using forge::v1::DType;

// The device source is compiled where no GPU is: every architecture the workers target.
TEST(DeviceCompareSourceTest, CompilesForEveryTargetArchitecture) {
  auto pool = compile::CompilePool::Create({.threads = 1});
  ASSERT_TRUE(pool.ok()) << pool.status();
  for (const char* arch : {"sm_80", "sm_89", "sm_90", "sm_90a", "sm_100"}) {
    compile::CompileRequest request;
    request.source = DeviceCompareSource();
    request.arch = arch;
    request.options = DeviceCompareOptions();
    compile::CompileResult compiled = (*pool)->Compile(request);
    EXPECT_TRUE(compiled.ok()) << arch << ": " << compiled.status << "\n" << compiled.log;
    for (const auto& [name, function] : compiled.ptxas.functions) {
      EXPECT_EQ(function.spill_store_bytes, 0) << arch << " " << name;
    }
    EXPECT_EQ(compiled.ptxas.functions.count("forge_compare_chunks"), 1u) << arch;
  }
}

// The element rule the device runs is the header the host compiles, as it is now on disk.
TEST(DeviceCompareSourceTest, EmbedsTheHostsElementRule) {
  // The header beside this test's source (FORGE_JUDGE_SOURCE_DIR: worker/judge/CMakeLists.txt).
  const std::string path = FORGE_JUDGE_SOURCE_DIR "/compare_chunk.h";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  std::stringstream header;
  header << file.rdbuf();
  EXPECT_TRUE(absl::StartsWith(DeviceCompareSource(), header.str()));
  EXPECT_TRUE(absl::StrContains(DeviceCompareSource(), "forge_compare_chunks"));
  EXPECT_EQ(DeviceCompareOptions()[0], "--fmad=false");
}

forge::v1::TensorSpec Spec(DType dtype, int64_t count) {
  forge::v1::TensorSpec spec;
  spec.set_dtype(dtype);
  spec.add_shape(count);
  return spec;
}

class DeviceCompareTest : public testing::GpuTest {
 protected:
  void SetUpDevice() override {
    auto comparer = DeviceComparer::Create(*device_);
    ASSERT_TRUE(comparer.ok()) << comparer.status();
    comparer_ = *std::move(comparer);
    auto stream = device_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_.emplace(*std::move(stream));
  }

  gpu::DeviceBuffer Upload(const void* data, size_t bytes) {
    auto buffer = device_->Allocate(bytes);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return gpu::DeviceBuffer();
    EXPECT_TRUE(buffer->CopyFromHost(data, bytes).ok());
    return *std::move(buffer);
  }

  std::unique_ptr<DeviceComparer> comparer_;
  std::optional<gpu::Stream> stream_;
};

// Four chunks and a tail, with every kind of element the rule tells apart: near the reference,
// off by more than the tolerance, unwritten (poison), a NaN and an infinite reference, a NaN
// candidate, references beyond the dtype's range (OverflowThreshold). The device's figures must be
// the host's exactly, sums included.
TEST_F(DeviceCompareTest, TalliesEqualTheHostsForEveryDtype) {
  constexpr int64_t kCount = 4 * ThreadPool::kChunkElements + 1234;
  std::mt19937_64 random(7);
  std::normal_distribution<double> normal;
  for (DType dtype : {forge::v1::DTYPE_FLOAT32, forge::v1::DTYPE_FLOAT64,
                      forge::v1::DTYPE_FLOAT16, forge::v1::DTYPE_BFLOAT16,
                      forge::v1::DTYPE_FLOAT8_E4M3FN, forge::v1::DTYPE_INT32,
                      forge::v1::DTYPE_INT64, forge::v1::DTYPE_UINT8, forge::v1::DTYPE_BOOL}) {
    SCOPED_TRACE(forge::v1::DType_Name(dtype));
    const bool floating = DefaultTolerances(dtype).atol > 0;
    const forge::v1::TensorSpec spec = Spec(dtype, kCount);
    ASSERT_TRUE(DeviceComparer::Handles(spec));
    std::vector<double> reference(kCount);
    std::vector<double> native(kCount);
    HostTensor candidate = *HostTensor::Allocate(spec);
    for (int64_t i = 0; i < kCount; ++i) {
      // Representable references, candidates a little off, eager's values a little further.
      reference[i] = RoundToDType(
          dtype, floating ? normal(random) * 4 : std::floor(std::fabs(normal(random)) * 3));
      if (dtype == forge::v1::DTYPE_BOOL) reference[i] = reference[i] > 1 ? 1 : 0;
      const double atol = DefaultTolerances(dtype).atol;
      native[i] = reference[i] + normal(random) * atol;
      candidate.Set(i, reference[i] + normal(random) * atol * 0.1);
    }
    for (bool wrong : {false, true}) {
      SCOPED_TRACE(wrong ? "with planted errors" : "clean");
      HostTensor output = candidate;
      std::vector<double> want = reference;
      if (std::isfinite(OverflowThreshold(dtype))) {
        // A reference beyond the dtype's range is its infinity: the same infinity passes, a
        // finite value fails.
        want[20] = 1e228;
        output.Set(20, std::numeric_limits<double>::infinity());
        if (wrong) want[21] = -1e228;
      }
      if (wrong) {
        output.Set(kCount - 5, dtype == forge::v1::DTYPE_BOOL ? 1 - want[kCount - 5]
                                                              : want[kCount - 5] + 50);
        const uint64_t poison = PoisonElementBits(dtype, *ElementBytes(dtype));
        std::memcpy(output.storage.data() + 3 * ThreadPool::kChunkElements * *ElementBytes(dtype),
                    &poison, *ElementBytes(dtype));
        want[17] = std::numeric_limits<double>::quiet_NaN();
        if (floating) {
          want[18] = std::numeric_limits<double>::infinity();
          output.Set(19, std::numeric_limits<double>::quiet_NaN());
        }
      }
      gpu::DeviceBuffer output_buffer = Upload(output.storage.data(), output.storage.size());
      gpu::DeviceBuffer reference_buffer = Upload(want.data(), want.size() * sizeof(double));
      gpu::DeviceBuffer native_buffer = Upload(native.data(), native.size() * sizeof(double));
      for (bool with_native : {false, true}) {
        SCOPED_TRACE(with_native ? "eager's values widen the tolerance" : "float64 only");
        const Tolerances tolerances = DefaultTolerances(dtype);
        OutputComparison host = CompareOutput(
            output, want, tolerances,
            with_native ? absl::Span<const double>(native) : absl::Span<const double>());
        auto tallies = comparer_->CompareChunks(spec, output_buffer, reference_buffer,
                                                with_native ? &native_buffer : nullptr,
                                                tolerances, *stream_);
        ASSERT_TRUE(tallies.ok()) << tallies.status();
        ASSERT_EQ(tallies->size(), 5u);
        const double bound = with_native ? WidenedRelNormBound(tolerances, RelativeNormError(
                                                                              native, want))
                                         : tolerances.rel_norm;
        OutputComparison device = SummarizeTallies(*tallies, kCount, bound);
        EXPECT_EQ(device.passed, host.passed) << host.failure;
        EXPECT_EQ(device.passed, !wrong);
        EXPECT_EQ(device.unwritten, host.unwritten);
        EXPECT_EQ(device.mismatches, host.mismatches);
        EXPECT_EQ(device.nan_reference, host.nan_reference);
        EXPECT_EQ(device.max_abs_error, host.max_abs_error);
        EXPECT_EQ(device.max_rel_error, host.max_rel_error);
        EXPECT_EQ(device.rel_norm_error, host.rel_norm_error);
      }
    }
  }
}

TEST_F(DeviceCompareTest, EqualFindsOneChangedByteAnywhere) {
  constexpr size_t kBytes = (size_t{3} << 20) + 13;  // a tail past the 16-byte words
  std::vector<unsigned char> bytes(kBytes);
  for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<unsigned char>(i * 31 + 7);
  gpu::DeviceBuffer a = Upload(bytes.data(), kBytes);
  gpu::DeviceBuffer same = Upload(bytes.data(), kBytes);
  auto equal = comparer_->Equal(a, same, kBytes, *stream_);
  ASSERT_TRUE(equal.ok()) << equal.status();
  EXPECT_TRUE(*equal);
  for (size_t changed : {size_t{0}, kBytes / 2, kBytes - 14, kBytes - 1}) {
    std::vector<unsigned char> other = bytes;
    other[changed] ^= 0x01;
    gpu::DeviceBuffer b = Upload(other.data(), kBytes);
    auto differs = comparer_->Equal(a, b, kBytes, *stream_);
    ASSERT_TRUE(differs.ok()) << differs.status();
    EXPECT_FALSE(*differs) << "byte " << changed;
    auto fingerprints = std::make_pair(comparer_->Fingerprint(a, *stream_),
                                       comparer_->Fingerprint(b, *stream_));
    ASSERT_TRUE(fingerprints.first.ok() && fingerprints.second.ok());
    EXPECT_NE(*fingerprints.first, *fingerprints.second) << "byte " << changed;
  }
  auto first = comparer_->Fingerprint(a, *stream_);
  auto second = comparer_->Fingerprint(same, *stream_);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST_F(DeviceCompareTest, DeviceDrawsUploadOnceAndUploadAgainWhenChanged) {
  forge::v1::TensorSpec spec = Spec(forge::v1::DTYPE_FLOAT32, 1000);
  auto input = std::make_shared<std::vector<HostTensor>>();
  input->push_back(*HostTensor::Allocate(spec));
  for (int64_t i = 0; i < 1000; ++i) (*input)[0].Set(i, 0.5 * i);
  auto references = std::make_shared<DrawReferences>();
  references->float64.push_back(std::vector<double>(1000, 2.0));
  CachedDraw draw{input, references};
  DrawKey key;
  key.task = "task";

  DeviceDraws draws(*device_, *comparer_, /*capacity_bytes=*/1 << 20);
  auto uploaded = draws.Get(key, draw, *stream_);
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  auto again = draws.Get(key, draw, *stream_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->get(), uploaded->get());
  EXPECT_EQ(draws.stats().uploads, 1);
  EXPECT_EQ(draws.stats().hits, 1);

  // A stray write into the resident reference: found, and the draw uploaded afresh.
  ASSERT_TRUE(const_cast<gpu::DeviceBuffer&>((*uploaded)->float64[0]).Fill32(0, *stream_).ok());
  ASSERT_TRUE(stream_->Synchronize().ok());
  auto fresh = draws.Get(key, draw, *stream_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(fresh->get(), uploaded->get());
  EXPECT_EQ(draws.stats().corrupt, 1);
  EXPECT_EQ(draws.stats().uploads, 2);
  std::vector<double> back(1000);
  ASSERT_TRUE((*fresh)->float64[0].CopyToHost(back.data(), back.size() * sizeof(double)).ok());
  EXPECT_EQ(back, references->float64[0]);

  // Over a third of the capacity: refused, so the host judges it.
  DeviceDraws small(*device_, *comparer_, /*capacity_bytes=*/3 * 8000);
  auto refused = small.Get(key, draw, *stream_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(small.stats().too_large, 1);
}

}  // namespace
}  // namespace forge::judge

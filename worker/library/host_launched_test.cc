// The loader of host-launched candidates over the shared object the compile pool builds from
// worker/compile/testdata/host_launch_scale.cu (and its variant whose forge_launch fails). Loading,
// the ABI version, the workspace size and the failing launch's message need no GPU and run
// everywhere; the launch itself skips without one.
#include "worker/library/host_launched.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"
#include "worker/compile/compile_pool.h"

namespace forge::library {
namespace {

using ::testing::HasSubstr;

// The test source: $FORGE_HOST_LAUNCH_TEST_SOURCE where the build tree's path does not exist (the
// GPU machine: benchmarks/gpu/run_gpu_tests.sh sets it), else the tree's.
std::string TestSourcePath() {
  const char* path = std::getenv("FORGE_HOST_LAUNCH_TEST_SOURCE");
  return path != nullptr ? path : FORGE_HOST_LAUNCH_TEST_SOURCE;
}

// The test object, built once per process, and once for all the test processes through a disk
// cache in the temporary directory (a few seconds of nvcc for both variants at once).
const std::string& TestObject(bool launch_fails) {
  static const auto* objects = [] {
    auto* built = new std::vector<std::string>(2);
    const std::filesystem::path cache =
        std::filesystem::temp_directory_path() / "forge-host-launched-test-objects";
    absl::StatusOr<std::unique_ptr<compile::CompilePool>> pool =
        compile::CompilePool::Create({.disk_cache_dir = cache.string()});
    if (!pool.ok()) {
      std::cerr << pool.status() << "\n";
      return built;
    }
    std::ifstream in(TestSourcePath());
    const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::future<compile::CompileResult>> futures;
    for (bool fails : {false, true}) {
      compile::CompileRequest request;
      request.output = codegen::CompileOutput::kNvccSharedObject;
      request.source = source;
      if (fails) request.options = {"-DFORGE_TEST_LAUNCH_FAILS"};
      futures.push_back((*pool)->Submit(std::move(request)));
    }
    for (int i = 0; i < 2; ++i) {
      compile::CompileResult result = futures[i].get();
      if (!result.ok()) std::cerr << result.status << "\n" << result.log << "\n";
      (*built)[i] = std::move(result.cubin);
    }
    return built;
  }();
  return (*objects)[launch_fails ? 1 : 0];
}

TEST(HostLaunchedObjectTest, LoadsWithoutAGpuAndAnswersTheAbi) {
  ASSERT_FALSE(TestObject(false).empty());
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> object =
      HostLaunchedObject::Load(TestObject(false));
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ((*object)->abi_version(), codegen::kHostLaunchAbiVersion);
  const std::vector<int64_t> args = {1000, 2};
  EXPECT_EQ((*object)->WorkspaceBytes(args).value_or(-1), 4000);
  absl::StatusOr<int64_t> refused = (*object)->WorkspaceBytes({});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange) << refused.status();

  // A second copy of the same bytes is a separate object; unloading one leaves the other working,
  // and the name freed by an unloaded object can be taken by the next.
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> second =
      HostLaunchedObject::Load(TestObject(false));
  ASSERT_TRUE(second.ok()) << second.status();
  object->reset();
  EXPECT_EQ((*second)->WorkspaceBytes(args).value_or(-1), 4000);
  second->reset();
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> third =
      HostLaunchedObject::Load(TestObject(true));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ((*third)->WorkspaceBytes(args).value_or(-1), 4000);
}

TEST(HostLaunchedObjectTest, FailingLaunchCarriesTheObjectsMessage) {
  ASSERT_FALSE(TestObject(true).empty());
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> object =
      HostLaunchedObject::Load(TestObject(true));
  ASSERT_TRUE(object.ok()) << object.status();
  // The planted failure returns before it touches a buffer or the stream.
  const absl::Status launched =
      (*object)->Launch({0, 0}, std::vector<int64_t>{16, 2}, 0, 0, nullptr);
  EXPECT_EQ(launched.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(launched.message(), HasSubstr("planted failure: this object refuses every launch"));
}

TEST(HostLaunchedObjectTest, BadBytesAreClearErrors) {
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> not_elf =
      HostLaunchedObject::Load("not a shared object");
  EXPECT_EQ(not_elf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_elf.status().message(), HasSubstr("ELF"));
  // An ELF file cut short: the dynamic loader's own complaint comes back.
  const std::string truncated = TestObject(false).substr(0, 256);
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> cut = HostLaunchedObject::Load(truncated);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut.status().message(), HasSubstr("dlopen"));
}

// On a GPU: the object scales a vector through its workspace on the given stream.
class HostLaunchedGpuTest : public forge::testing::GpuTest {};

TEST_F(HostLaunchedGpuTest, LaunchesOnTheGivenStreamWithItsWorkspace) {
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> object =
      HostLaunchedObject::Load(TestObject(false));
  ASSERT_TRUE(object.ok()) << object.status();
  constexpr int64_t n = 5000;
  absl::StatusOr<judge::CandidateLaunch> launch =
      LoadHostLaunchedCandidate(*device_, std::move(*object), {n, 3});
  ASSERT_TRUE(launch.ok()) << launch.status();
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  auto upload = [&](const std::vector<float>& values) {
    absl::StatusOr<gpu::DeviceBuffer> buffer = device_->Allocate(n * sizeof(float));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(buffer->CopyFromHost(values.data(), n * sizeof(float)).ok());
    return *std::move(buffer);
  };
  gpu::DeviceBuffer dx = upload(x), out = upload(std::vector<float>(n, -1.0f));
  absl::StatusOr<gpu::Stream> stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  const std::vector<CUdeviceptr> args = {dx.address(), out.address()};
  ASSERT_TRUE((*launch)(*stream, args).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  std::vector<float> result(n);
  ASSERT_TRUE(out.CopyToHost(result.data(), n * sizeof(float)).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(result[i], static_cast<float>(3 * i)) << i;

  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> another =
      HostLaunchedObject::Load(TestObject(false));
  ASSERT_TRUE(another.ok());
  absl::StatusOr<judge::CandidateLaunch> unsupported =
      LoadHostLaunchedCandidate(*device_, std::move(*another), {-3, 2});
  EXPECT_EQ(unsupported.status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace forge::library

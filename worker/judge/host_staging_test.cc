#include "worker/judge/host_staging.h"

#include <cstring>
#include <utility>

#include "gtest/gtest.h"
#include "tests/support/gpu_test.h"

namespace forge::judge {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(HostStagingTest, ABufferGivenBackIsHandedOutAgain) {
  HostStaging staging;
  EXPECT_FALSE(staging.page_locked());
  std::byte* first = nullptr;
  {
    HostStaging::Buffer buffer = staging.Acquire(3 * kMiB);
    ASSERT_NE(buffer.data(), nullptr);
    EXPECT_EQ(buffer.size(), 3 * kMiB);
    EXPECT_FALSE(buffer.page_locked());
    std::memset(buffer.data(), 0x5A, buffer.size());  // all of it is writable
    first = buffer.data();
  }
  HostStaging::Buffer again = staging.Acquire(2 * kMiB);  // fits in the kept block
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.size(), 2 * kMiB);
  const HostStagingStats stats = staging.stats();
  EXPECT_EQ(stats.acquired, 2);
  EXPECT_EQ(stats.reused, 1);
  EXPECT_EQ(stats.allocations, 1);
  EXPECT_EQ(stats.kept_bytes, static_cast<int64_t>(3 * kMiB));
}

TEST(HostStagingTest, BuffersHeldAtOnceAreDistinctAndTheSmallestFitIsChosen) {
  HostStaging staging;
  std::byte* large_data = nullptr;
  std::byte* small_data = nullptr;
  {
    HostStaging::Buffer large = staging.Acquire(8 * kMiB);
    HostStaging::Buffer small = staging.Acquire(kMiB);
    EXPECT_NE(large.data(), small.data());
    large_data = large.data();
    small_data = small.data();
  }
  HostStaging::Buffer fits_small = staging.Acquire(kMiB / 2);
  EXPECT_EQ(fits_small.data(), small_data);
  HostStaging::Buffer needs_large = staging.Acquire(4 * kMiB);
  EXPECT_EQ(needs_large.data(), large_data);
  HostStaging::Buffer neither_idle = staging.Acquire(kMiB);
  EXPECT_NE(neither_idle.data(), small_data);
  EXPECT_NE(neither_idle.data(), large_data);
}

TEST(HostStagingTest, KeepsNoMoreThanItsCapacity) {
  HostStaging staging(/*capacity_bytes=*/4 * kMiB);
  {
    HostStaging::Buffer kept = staging.Acquire(3 * kMiB);
    // Beyond the capacity while the first is held: lent, then freed rather than kept.
    HostStaging::Buffer beyond = staging.Acquire(3 * kMiB);
    EXPECT_NE(beyond.data(), nullptr);
    EXPECT_EQ(staging.stats().kept_bytes, static_cast<int64_t>(3 * kMiB));
  }
  // A block too large to keep beside the idle one replaces it.
  { HostStaging::Buffer larger = staging.Acquire(4 * kMiB); }
  EXPECT_EQ(staging.stats().kept_bytes, static_cast<int64_t>(4 * kMiB));
  HostStaging::Buffer reused = staging.Acquire(4 * kMiB);
  EXPECT_EQ(staging.stats().reused, 1);
  EXPECT_EQ(staging.stats().allocations, 3);
}

TEST(HostStagingTest, MovedBuffersGiveTheirBlockBackOnce) {
  HostStaging staging;
  HostStaging::Buffer buffer = staging.Acquire(kMiB);
  std::byte* data = buffer.data();
  HostStaging::Buffer moved = std::move(buffer);
  EXPECT_EQ(moved.data(), data);
  HostStaging::Buffer assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), data);
  assigned = HostStaging::Buffer();  // gives the block back
  HostStaging::Buffer first = staging.Acquire(kMiB);
  HostStaging::Buffer second = staging.Acquire(kMiB);
  EXPECT_EQ(first.data(), data);
  EXPECT_NE(second.data(), data);  // the block came back once, not twice
}

class PageLockedStagingTest : public forge::testing::GpuTest {};

TEST_F(PageLockedStagingTest, BuffersArePageLockedAndKept) {
  HostStaging staging(*device_);
  EXPECT_TRUE(staging.page_locked());
  std::byte* first = nullptr;
  {
    HostStaging::Buffer buffer = staging.Acquire(16 * kMiB);
    EXPECT_TRUE(buffer.page_locked());
    first = buffer.data();
    // A copy from the device lands in it.
    auto device_buffer = device_->Allocate(16 * kMiB);
    ASSERT_TRUE(device_buffer.ok()) << device_buffer.status();
    auto stream = device_->CreateStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    ASSERT_TRUE(device_buffer->Fill8(0x3C, *stream).ok());
    ASSERT_TRUE(stream->Synchronize().ok());
    ASSERT_TRUE(device_buffer->CopyToHost(buffer.data(), buffer.size()).ok());
    EXPECT_EQ(buffer.data()[0], std::byte{0x3C});
    EXPECT_EQ(buffer.data()[16 * kMiB - 1], std::byte{0x3C});
  }
  HostStaging::Buffer again = staging.Acquire(16 * kMiB);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(staging.stats().page_lock_failures, 0);
}

}  // namespace
}  // namespace forge::judge

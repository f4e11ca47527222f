// Host memory the judge moves tensors through: the outputs it reads back, the inputs it reads back
// to see they came back unchanged, and (when page-locked) the inputs it uploads. Buffers are kept
// and handed out again, so a large task does not pay for fresh pages on every draw of every
// candidate; made for a device, they are page-locked, so that copies run at the bus's speed instead
// of through the driver's staging of pageable memory.
//
// The staging never decides what is compared with what: the judge's pristine inputs stay in the
// draw cache (or the call), and every buffer read back is filled by a copy before it is read.
#ifndef FORGE_WORKER_JUDGE_HOST_STAGING_H_
#define FORGE_WORKER_JUDGE_HOST_STAGING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "worker/gpu/device.h"

namespace forge::judge {

struct HostStagingStats {
  int64_t acquired = 0;     // buffers handed out
  int64_t reused = 0;       // of which served from a kept block
  int64_t allocations = 0;  // blocks allocated
  int64_t page_lock_failures = 0;  // page-locked allocations that failed (pageable memory instead)
  int64_t kept_bytes = 0;   // bytes of the blocks kept (idle or handed out), at most the capacity
};

class HostStaging {
 public:
  static constexpr int64_t kDefaultCapacityBytes = int64_t{2} << 30;

  // Pageable buffers.
  explicit HostStaging(int64_t capacity_bytes = kDefaultCapacityBytes);
  // Page-locked buffers from `device`, which must outlive the staging (and be current on the
  // threads that acquire); pageable ones where page-locking fails.
  explicit HostStaging(const gpu::Device& device,
                       int64_t capacity_bytes = kDefaultCapacityBytes);
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  class Buffer;
  // A buffer of `bytes` bytes, of unspecified contents: the smallest idle block that holds them,
  // or a new one. Blocks beyond the capacity are freed when their buffer goes rather than kept.
  Buffer Acquire(size_t bytes);

  // Whether buffers are page-locked (made for a device).
  bool page_locked() const { return device_ != nullptr; }
  HostStagingStats stats() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Block;

  void Return(std::unique_ptr<Block> block) ABSL_LOCKS_EXCLUDED(mutex_);

  const gpu::Device* const device_;
  const int64_t capacity_bytes_;
  mutable absl::Mutex mutex_;
  std::vector<std::unique_ptr<Block>> idle_ ABSL_GUARDED_BY(mutex_);
  HostStagingStats stats_ ABSL_GUARDED_BY(mutex_);
};

// A block of host memory lent by a HostStaging, given back when destroyed; the staging must
// outlive it. Move-only.
class HostStaging::Buffer {
 public:
  Buffer();
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;

  std::byte* data() const;
  // The bytes asked for (the block may be larger).
  size_t size() const { return size_; }
  absl::Span<std::byte> span() const { return {data(), size_}; }
  absl::Span<const std::byte> bytes() const { return {data(), size_}; }
  bool page_locked() const;

 private:
  friend class HostStaging;
  Buffer(HostStaging* staging, std::unique_ptr<Block> block, size_t size);
  void Release();

  HostStaging* staging_ = nullptr;
  std::unique_ptr<Block> block_;
  size_t size_ = 0;
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_HOST_STAGING_H_

#include "worker/judge/host_staging.h"

#include <algorithm>
#include <utility>

namespace forge::judge {
namespace {

// Blocks come in multiples of this, so that tensors of nearly the same size share blocks.
constexpr size_t kBlockGranule = size_t{64} << 10;

size_t BlockSize(size_t bytes) {
  return (std::max<size_t>(bytes, 1) + kBlockGranule - 1) / kBlockGranule * kBlockGranule;
}

}  // namespace

struct HostStaging::Block {
  std::byte* data() const { return pinned.data() != nullptr ? pinned.data() : pageable.get(); }

  gpu::PinnedHostBuffer pinned;              // when page-locked
  std::unique_ptr<std::byte[]> pageable;     // otherwise
  size_t size = 0;
  // Counted in the kept bytes: goes back to the idle blocks when its buffer goes.
  bool kept = false;
};

HostStaging::HostStaging(int64_t capacity_bytes)
    : device_(nullptr), capacity_bytes_(capacity_bytes) {}

HostStaging::HostStaging(const gpu::Device& device, int64_t capacity_bytes)
    : device_(&device), capacity_bytes_(capacity_bytes) {}

HostStaging::~HostStaging() = default;

HostStaging::Buffer HostStaging::Acquire(size_t bytes) {
  const size_t size = BlockSize(bytes);
  auto block = std::make_unique<Block>();
  std::vector<std::unique_ptr<Block>> freed;  // freed outside the lock
  {
    absl::MutexLock lock(&mutex_);
    ++stats_.acquired;
    auto best = idle_.end();
    for (auto it = idle_.begin(); it != idle_.end(); ++it) {
      if ((*it)->size >= bytes && (best == idle_.end() || (*it)->size < (*best)->size)) best = it;
    }
    if (best != idle_.end()) {
      ++stats_.reused;
      std::unique_ptr<Block> reused = std::move(*best);
      idle_.erase(best);
      return Buffer(this, std::move(reused), bytes);
    }
    // Room for the new block: idle blocks go, largest first.
    std::sort(idle_.begin(), idle_.end(),
              [](const auto& a, const auto& b) { return a->size < b->size; });
    while (stats_.kept_bytes + static_cast<int64_t>(size) > capacity_bytes_ && !idle_.empty()) {
      stats_.kept_bytes -= static_cast<int64_t>(idle_.back()->size);
      freed.push_back(std::move(idle_.back()));
      idle_.pop_back();
    }
    block->kept = stats_.kept_bytes + static_cast<int64_t>(size) <= capacity_bytes_;
    if (block->kept) stats_.kept_bytes += static_cast<int64_t>(size);
    ++stats_.allocations;
  }
  freed.clear();
  block->size = size;
  if (device_ != nullptr) {
    // Page-locking is slow (the reason blocks are kept); it happens outside the lock.
    absl::StatusOr<gpu::PinnedHostBuffer> pinned = device_->AllocatePinned(size);
    if (pinned.ok()) {
      block->pinned = *std::move(pinned);
    } else {
      absl::MutexLock lock(&mutex_);
      ++stats_.page_lock_failures;
    }
  }
  if (block->pinned.data() == nullptr) block->pageable.reset(new std::byte[size]);
  return Buffer(this, std::move(block), bytes);
}

HostStagingStats HostStaging::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

void HostStaging::Return(std::unique_ptr<Block> block) {
  if (!block->kept) return;
  absl::MutexLock lock(&mutex_);
  idle_.push_back(std::move(block));
}

HostStaging::Buffer::Buffer(HostStaging* staging, std::unique_ptr<Block> block, size_t size)
    : staging_(staging), block_(std::move(block)), size_(size) {}

HostStaging::Buffer::Buffer() = default;

HostStaging::Buffer::~Buffer() { Release(); }

HostStaging::Buffer::Buffer(Buffer&& other) noexcept
    : staging_(std::exchange(other.staging_, nullptr)),
      block_(std::move(other.block_)),
      size_(std::exchange(other.size_, 0)) {}

HostStaging::Buffer& HostStaging::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Release();
    staging_ = std::exchange(other.staging_, nullptr);
    block_ = std::move(other.block_);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::byte* HostStaging::Buffer::data() const {
  return block_ != nullptr ? block_->data() : nullptr;
}

bool HostStaging::Buffer::page_locked() const {
  return block_ != nullptr && block_->pinned.data() != nullptr;
}

void HostStaging::Buffer::Release() {
  if (block_ != nullptr) staging_->Return(std::move(block_));
  staging_ = nullptr;
  size_ = 0;
}

}  // namespace forge::judge

// A task's draws resident on the GPU, for the judge's device path (judge.h, device_compare.h):
// per draw the pristine inputs, uploaded once and copied on the device into each candidate's own
// fresh buffers, and the float64 (and eager's) references the device comparison reads. Uploaded
// from the host DrawCache's entries, so they hold the same values.
//
// Bounded by bytes, least recently used out; a draw larger than a third of the capacity is never
// made resident (a task's three draws must fit together, or every candidate would upload them
// again). Every buffer is fingerprinted on the device when uploaded and checked before each use: a
// candidate runs on the same device, and its stray write into a resident draw would otherwise
// mislead every later candidate. Thread-safe.
#ifndef FORGE_WORKER_JUDGE_DEVICE_DRAWS_H_
#define FORGE_WORKER_JUDGE_DEVICE_DRAWS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/gpu/device.h"
#include "worker/judge/device_compare.h"
#include "worker/judge/draw_cache.h"

namespace forge::judge {

struct DeviceDraw {
  std::vector<gpu::DeviceBuffer> inputs;   // one per task input, bytes as HostTensor::storage
  std::vector<gpu::DeviceBuffer> float64;  // one per task output, one double per element
  std::vector<gpu::DeviceBuffer> native;   // eager's values likewise; empty without them
};

struct DeviceDrawsStats {
  int64_t hits = 0;
  int64_t uploads = 0;
  int64_t corrupt = 0;    // resident draws whose fingerprint changed; uploaded again
  int64_t too_large = 0;  // draws refused: over a third of the capacity
  int64_t evictions = 0;
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t capacity_bytes = 0;
};

class DeviceDraws {
  // Draws of one task that must fit together: the judge's three.
  static constexpr int64_t kDrawsPerTask = 3;

 public:
  // Below this many bytes of inputs and outputs a task is judged on the host, whose passes take
  // milliseconds there. Measured on the H200 (benchmarks/results/2026-11-30-h200-judge-device.md),
  // seconds per later candidate, host against device: 0.077 against 0.008 for a 2^24-element
  // float32 task (128 MiB), 2.9 against 0.055 for 2^28 elements.
  static constexpr int64_t kDefaultMinTaskBytes = int64_t{32} << 20;

  // The comparer must outlive this.
  DeviceDraws(const gpu::Device& device, DeviceComparer& comparer, int64_t capacity_bytes,
              int64_t min_task_bytes = kDefaultMinTaskBytes);
  DeviceDraws(const DeviceDraws&) = delete;
  DeviceDraws& operator=(const DeviceDraws&) = delete;

  // The device copy of `draw` (its references set), kept under `key`: the resident one when its
  // fingerprints hold, else uploaded now. ResourceExhausted when it is too large for the capacity
  // (or the device has no room); the caller then judges on the host.
  absl::StatusOr<std::shared_ptr<const DeviceDraw>> Get(const DrawKey& key, const CachedDraw& draw,
                                                        gpu::Stream& stream)
      ABSL_LOCKS_EXCLUDED(mutex_);

  // Whether a copy of the draw is resident (unchecked until Get).
  bool Contains(const DrawKey& key) const ABSL_LOCKS_EXCLUDED(mutex_);
  DeviceComparer& comparer() const { return comparer_; }
  // Whether a task whose inputs and outputs take `task_bytes` is judged on the device at all.
  bool WorthIt(int64_t task_bytes) const { return task_bytes >= min_task_bytes_; }
  DeviceDrawsStats stats() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  struct Resident {
    std::shared_ptr<const DeviceDraw> draw;
    std::vector<uint64_t> fingerprints;  // of every buffer, inputs then float64 then native
    int64_t bytes = 0;
    int64_t last_use = 0;
  };

  absl::StatusOr<std::vector<uint64_t>> FingerprintsOf(const DeviceDraw& draw,
                                                       gpu::Stream& stream);
  absl::StatusOr<std::shared_ptr<const DeviceDraw>> Upload(const CachedDraw& draw,
                                                           gpu::Stream& stream);
  // Drops least recently used draws until `incoming` more bytes fit.
  void MakeRoomLocked(int64_t incoming) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const gpu::Device& device_;
  DeviceComparer& comparer_;
  const int64_t min_task_bytes_;
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<DrawKey, Resident> resident_ ABSL_GUARDED_BY(mutex_);
  int64_t uses_ ABSL_GUARDED_BY(mutex_) = 0;
  DeviceDrawsStats stats_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_DEVICE_DRAWS_H_

// A task's draws resident on the GPU, for the judge's device path (judge.h, device_compare.h):
// per draw the pristine inputs, copied on the device into each candidate's own fresh buffers, and
// the float64 (and eager's) references the device comparison reads. Either uploaded from the host
// DrawCache's entries (Get), or made on the device by a large task's first candidate (Insert):
// inputs drawn there (DeviceInputs, bit for bit the host's draw), references computed there
// (DeviceReference) with their facts. Both hold the values the host would.
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
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/gpu/device.h"
#include "worker/judge/device_compare.h"
#include "worker/judge/device_inputs.h"
#include "worker/judge/draw_cache.h"

namespace forge::judge {

struct DeviceDraw {
  std::vector<gpu::DeviceBuffer> inputs;   // one per task input, bytes as HostTensor::storage
  std::vector<gpu::DeviceBuffer> float64;  // one per task output, one double per element
  std::vector<gpu::DeviceBuffer> native;   // eager's values likewise; empty without them
  // A draw made on the device has no host copy: per output its references' facts under
  // `facts_tolerances` (agrees_with_first_draw against draw 0 of the same task and seed, made on
  // the device before it), and why eager's values are missing where they were asked for. Empty
  // for a draw uploaded from the host, whose facts the host's DrawReferences keep.
  std::vector<ReferenceFacts> facts;
  std::vector<Tolerances> facts_tolerances;
  std::string native_unavailable;

  bool made_on_device() const { return !facts.empty(); }
};

struct DeviceDrawsStats {
  int64_t hits = 0;
  int64_t uploads = 0;
  int64_t made = 0;       // draws made on the device and kept (Insert)
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

  // The comparer (and `inputs`, when given) must outlive this. Without `inputs` no draw is made
  // on the device: every draw comes from the host.
  DeviceDraws(const gpu::Device& device, DeviceComparer& comparer, int64_t capacity_bytes,
              int64_t min_task_bytes = kDefaultMinTaskBytes, const DeviceInputs* inputs = nullptr);
  DeviceDraws(const DeviceDraws&) = delete;
  DeviceDraws& operator=(const DeviceDraws&) = delete;

  // The device copy of `draw` (its references set), kept under `key`: the resident one when its
  // fingerprints hold, else uploaded now. ResourceExhausted when it is too large for the capacity
  // (or the device has no room); the caller then judges on the host.
  absl::StatusOr<std::shared_ptr<const DeviceDraw>> Get(const DrawKey& key, const CachedDraw& draw,
                                                        gpu::Stream& stream)
      ABSL_LOCKS_EXCLUDED(mutex_);

  // The resident draw under `key` when its fingerprints hold (a hit); NotFound when none is (a
  // corrupt one is dropped).
  absl::StatusOr<std::shared_ptr<const DeviceDraw>> Find(const DrawKey& key, gpu::Stream& stream)
      ABSL_LOCKS_EXCLUDED(mutex_);
  // Keeps `draw`, made on the device, under `key` (replacing what was there), fingerprinted now.
  // ResourceExhausted when it is too large for the capacity: the caller still has it for itself.
  absl::Status Insert(const DrawKey& key, std::shared_ptr<const DeviceDraw> draw,
                      gpu::Stream& stream) ABSL_LOCKS_EXCLUDED(mutex_);

  // Whether a copy of the draw is resident (unchecked until Get or Find).
  bool Contains(const DrawKey& key) const ABSL_LOCKS_EXCLUDED(mutex_);
  DeviceComparer& comparer() const { return comparer_; }
  // The device's input drawer; null when draws are not made on the device.
  const DeviceInputs* inputs() const { return inputs_; }
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
  // The resident draw under `key` when its fingerprints hold; null when none (a corrupt one is
  // dropped).
  absl::StatusOr<std::shared_ptr<const DeviceDraw>> FindLocked(const DrawKey& key,
                                                               gpu::Stream& stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // OK when a draw of `bytes` fits with the rest of its task's; ResourceExhausted (counted in
  // too_large) otherwise.
  absl::Status FitsLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Keeps `draw` of `bytes` under `key`, fingerprinted now; ResourceExhausted when too large.
  absl::Status KeepLocked(const DrawKey& key, std::shared_ptr<const DeviceDraw> draw,
                          int64_t bytes, gpu::Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Drops least recently used draws until `incoming` more bytes fit.
  void MakeRoomLocked(int64_t incoming) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const gpu::Device& device_;
  DeviceComparer& comparer_;
  const int64_t min_task_bytes_;
  const DeviceInputs* const inputs_;
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<DrawKey, Resident> resident_ ABSL_GUARDED_BY(mutex_);
  int64_t uses_ ABSL_GUARDED_BY(mutex_) = 0;
  DeviceDrawsStats stats_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_DEVICE_DRAWS_H_

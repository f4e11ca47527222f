// Guard zones: the judge allocates every input and output buffer with bytes before and after the
// tensor (gpu::Device::AllocateGuarded), writes into them, before each judged launch, contents
// that depend on the launch and the buffer (GuardContents: a kernel cannot learn them from an
// earlier launch), and reads back only those zones afterwards: a kernel that writes one element
// past the end of a tensor or before its start, which an exact allocation would hide (the bytes
// belong to a neighbour or to nobody), changes a guard and fails the judge with
// FAILURE_REASON_OUT_OF_BOUNDS_WRITE, naming the buffer and the first changed byte.
//
// What it catches: any write within kGuardBytes (256) bytes before a tensor or within the padding
// to 256 bytes plus kGuardBytes after it, when the written value differs from the guard byte
// (a random byte: a write that happens to store the same byte goes unseen, with probability 1/256
// per byte). Writes farther away land in other allocations or fault (CRASH); the sandbox's
// compute-sanitizer run is the check for those.
//
// Cost per judged launch: one host-to-device copy of 2 x ~256 bytes per buffer before it, one
// device-to-host copy of the same after it (the buffers themselves are never copied for this), and
// a host comparison of those bytes.
#ifndef FORGE_WORKER_JUDGE_GUARD_H_
#define FORGE_WORKER_JUDGE_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/gpu/device.h"

namespace forge::judge {

// The guard zone before each judged buffer; the zone after it is as large, plus the padding of
// the tensor to a multiple of 256 bytes.
inline constexpr size_t kGuardBytes = 256;

// The `bytes` bytes the guard zones of buffer `buffer` (its position in the launch's arguments)
// hold for launch `launch` of a judge seeded with `seed`: pseudo-random, different for every
// seed, launch and buffer, the same for the same three.
std::vector<std::byte> GuardContents(uint64_t seed, int64_t launch, int buffer, size_t bytes);

// Where `actual` (guard zones as read back: `before_bytes` bytes of the zone before the tensor,
// then the zone after it) first differs from `expected`, in address order, as an offset from the
// tensor: negative in the zone before (-4 is 4 bytes before its first byte), and from its end in
// the zone after (0 is the first byte past its last). Nothing when they are equal; `actual` and
// `expected` must be as large.
std::optional<int64_t> FirstGuardChange(absl::Span<const std::byte> expected,
                                        absl::Span<const std::byte> actual, size_t before_bytes);

// "input 1 (float32[4]) was written outside its bounds: its guard zone after it changed, first at
// byte 0 past its end".
std::string DescribeGuardChange(absl::string_view buffer_name, int64_t offset);

// A changed guard: the buffer (its position in the arguments) and FirstGuardChange's offset.
struct GuardBreach {
  int buffer = 0;
  int64_t offset = 0;
};

// Writes GuardContents(seed, launch, b, ...) into the guard zones of each buffers[b] (allocated
// with AllocateGuarded), ordered on `stream`.
absl::Status ArmGuards(uint64_t seed, int64_t launch,
                       absl::Span<gpu::DeviceBuffer* const> buffers, gpu::Stream& stream);

// Reads the guard zones of each buffer back (ordered on `stream`, which it synchronizes) and
// compares them with what ArmGuards wrote for `launch`: the first buffer whose guards changed, or
// nothing. An error status is a CUDA error of the copies.
absl::StatusOr<std::optional<GuardBreach>> CheckGuards(
    uint64_t seed, int64_t launch, absl::Span<gpu::DeviceBuffer* const> buffers,
    gpu::Stream& stream);

}  // namespace forge::judge

#endif  // FORGE_WORKER_JUDGE_GUARD_H_

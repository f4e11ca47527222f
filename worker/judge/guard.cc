#include "worker/judge/guard.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::judge {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

size_t GuardBytesOf(const gpu::DeviceBuffer& buffer) {
  return buffer.guard_before_bytes() + buffer.guard_after_bytes();
}

}  // namespace

std::vector<std::byte> GuardContents(uint64_t seed, int64_t launch, int buffer, size_t bytes) {
  uint64_t state = seed;
  state = SplitMix64(state) ^ static_cast<uint64_t>(launch);
  state = SplitMix64(state) ^ static_cast<uint64_t>(buffer);
  std::vector<std::byte> contents(bytes);
  for (size_t i = 0; i < bytes; i += sizeof(uint64_t)) {
    const uint64_t word = SplitMix64(state);
    std::memcpy(contents.data() + i, &word, std::min(sizeof(word), bytes - i));
  }
  return contents;
}

std::optional<int64_t> FirstGuardChange(absl::Span<const std::byte> expected,
                                        absl::Span<const std::byte> actual, size_t before_bytes) {
  const size_t size = std::min(expected.size(), actual.size());
  for (size_t i = 0; i < size; ++i) {
    if (expected[i] == actual[i]) continue;
    return static_cast<int64_t>(i) - static_cast<int64_t>(before_bytes);
  }
  return std::nullopt;
}

std::string DescribeGuardChange(absl::string_view buffer_name, int64_t offset) {
  return offset < 0
             ? absl::StrCat(buffer_name,
                            " was written outside its bounds: its guard zone before it changed, "
                            "first at byte ", -offset, " before its start")
             : absl::StrCat(buffer_name,
                            " was written outside its bounds: its guard zone after it changed, "
                            "first at byte ", offset, " past its end");
}

absl::Status ArmGuards(uint64_t seed, int64_t launch,
                       absl::Span<gpu::DeviceBuffer* const> buffers, gpu::Stream& stream) {
  for (size_t b = 0; b < buffers.size(); ++b) {
    const std::vector<std::byte> contents =
        GuardContents(seed, launch, static_cast<int>(b), GuardBytesOf(*buffers[b]));
    // From pageable memory, the copy is staged before the call returns: `contents` may go.
    FORGE_RETURN_IF_ERROR(buffers[b]->CopyGuardsFromHostAsync(contents.data(), stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<GuardBreach>> CheckGuards(
    uint64_t seed, int64_t launch, absl::Span<gpu::DeviceBuffer* const> buffers,
    gpu::Stream& stream) {
  std::vector<std::vector<std::byte>> read(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    read[b].resize(GuardBytesOf(*buffers[b]));
    FORGE_RETURN_IF_ERROR(buffers[b]->CopyGuardsToHostAsync(read[b].data(), stream));
  }
  FORGE_RETURN_IF_ERROR(stream.Synchronize());
  for (size_t b = 0; b < buffers.size(); ++b) {
    const std::vector<std::byte> expected =
        GuardContents(seed, launch, static_cast<int>(b), read[b].size());
    if (std::optional<int64_t> offset =
            FirstGuardChange(expected, read[b], buffers[b]->guard_before_bytes())) {
      return std::optional<GuardBreach>(GuardBreach{static_cast<int>(b), *offset});
    }
  }
  return std::optional<GuardBreach>();
}

}  // namespace forge::judge

// SHA-256 throughput of forge::digest: prints one line per case, from the fastest repetition.
//   forge_sha256_bench [--mib=256] [--reps=5] [--small_bytes=256] [--small_count=200000]
// Cases: the whole buffer in one Sha256Digest call; the same buffer streamed through Sha256 in
// 64 KiB pieces (the blob store's upload chunks); `small_count` messages of `small_bytes` each
// (task, candidate and cache-key digests are of that size).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/digest/sha256.h"

namespace forge {
namespace {

struct Options {
  int64_t mib = 256;
  int reps = 5;
  int64_t small_bytes = 256;
  int64_t small_count = 200000;
};

bool ParseFlag(absl::string_view arg, absl::string_view name, int64_t& value) {
  if (!absl::ConsumePrefix(&arg, name) || !absl::ConsumePrefix(&arg, "=")) return false;
  return absl::SimpleAtoi(arg, &value) && value > 0;
}

// The shortest of `reps` runs of `run`, in seconds: on a machine shared with other work, the run
// it disturbed least.
double BestSeconds(int reps, const std::function<void()>& run) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < reps; ++i) {
    const absl::Time start = absl::Now();
    run();
    best = std::min(best, absl::ToDoubleSeconds(absl::Now() - start));
  }
  return best;
}

int Run(const Options& options) {
  std::string buffer(static_cast<size_t>(options.mib) << 20, '\0');
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<char>((i * 2654435761u) >> 24);
  const double mb = static_cast<double>(buffer.size()) / 1e6;

  Digest whole;
  const double one_call = BestSeconds(options.reps, [&] { whole = Sha256Digest(buffer); });
  absl::PrintF("one call      %5lld MiB  %8.1f MB/s  %s\n", options.mib, mb / one_call,
               whole.ToHex().substr(0, 16));

  Digest streamed;
  const double pieces = BestSeconds(options.reps, [&] {
    Sha256 hasher;
    constexpr size_t kPiece = 64 << 10;
    for (size_t at = 0; at < buffer.size(); at += kPiece) {
      hasher.Update(absl::string_view(buffer).substr(at, kPiece));
    }
    streamed = hasher.Finish();
  });
  absl::PrintF("64 KiB pieces %5lld MiB  %8.1f MB/s  %s\n", options.mib, mb / pieces,
               streamed.ToHex().substr(0, 16));

  const absl::string_view message = absl::string_view(buffer).substr(0, options.small_bytes);
  uint8_t fold = 0;  // keeps the loop's results alive
  const double small = BestSeconds(options.reps, [&] {
    for (int64_t i = 0; i < options.small_count; ++i) fold ^= Sha256Digest(message).bytes()[0];
  });
  absl::PrintF("%lld x %lld B   %8.0f digests/s  %8.1f MB/s  (fold %d)\n", options.small_count,
               options.small_bytes, options.small_count / small,
               options.small_count * options.small_bytes / 1e6 / small, fold);
  return whole == streamed ? 0 : 1;
}

}  // namespace
}  // namespace forge

int main(int argc, char** argv) {
  forge::Options options;
  for (int i = 1; i < argc; ++i) {
    int64_t reps = 0;
    if (forge::ParseFlag(argv[i], "--mib", options.mib) ||
        forge::ParseFlag(argv[i], "--small_bytes", options.small_bytes) ||
        forge::ParseFlag(argv[i], "--small_count", options.small_count)) {
      continue;
    }
    if (forge::ParseFlag(argv[i], "--reps", reps)) {
      options.reps = static_cast<int>(reps);
      continue;
    }
    std::fprintf(stderr,
                 "usage: forge_sha256_bench [--mib=256] [--reps=5] [--small_bytes=256] "
                 "[--small_count=200000]\nunknown argument: %s\n",
                 argv[i]);
    return 2;
  }
  return forge::Run(options);
}

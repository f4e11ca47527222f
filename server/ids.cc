#include "server/ids.h"

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace forge::server {

std::string NewId(absl::string_view kind, int64_t number) {
  // One generator for the process, seeded from the OS; BitGen is not thread-safe.
  static absl::Mutex mutex(absl::kConstInit);
  static absl::BitGen* bits ABSL_GUARDED_BY(mutex) = new absl::BitGen();
  uint64_t random = 0;
  {
    absl::MutexLock lock(&mutex);
    random = absl::Uniform<uint64_t>(*bits);
  }
  return absl::StrCat(kind, "-", number, "-", absl::StrFormat("%016x", random));
}

std::optional<int64_t> IdNumber(absl::string_view id, absl::string_view kind) {
  absl::string_view rest = id;
  if (!absl::ConsumePrefix(&rest, kind) || !absl::ConsumePrefix(&rest, "-")) return std::nullopt;
  rest = rest.substr(0, rest.find('-'));
  int64_t number = 0;
  if (rest.empty() || !absl::SimpleAtoi(rest, &number)) return std::nullopt;
  return number;
}

}  // namespace forge::server

// A CUPTI result as an absl::Status, for the timer's CUPTI users (kernel activity, range-profiler
// counters). Internal to worker/timer: include it only from .cc files that already use CUPTI.
#ifndef FORGE_WORKER_TIMER_CUPTI_STATUS_H_
#define FORGE_WORKER_TIMER_CUPTI_STATUS_H_

#include <cupti.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace forge::timer {

// OK for CUPTI_SUCCESS; otherwise Unavailable naming the call and CUPTI's description: CUPTI
// failing means "no kernel durations or counters here", never a failed measurement.
inline absl::Status CuptiStatus(CUptiResult result, absl::string_view call) {
  if (result == CUPTI_SUCCESS) return absl::OkStatus();
  const char* description = nullptr;
  cuptiGetResultString(result, &description);
  return absl::UnavailableError(absl::StrCat(
      "CUPTI ", call, ": ", description != nullptr ? description : "error ",
      description != nullptr ? "" : absl::StrCat(static_cast<int>(result))));
}

}  // namespace forge::timer

#endif  // FORGE_WORKER_TIMER_CUPTI_STATUS_H_

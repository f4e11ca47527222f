#include "server/fair_share.h"

#include <algorithm>

#include "common/status/status_macros.h"

namespace forge::server {

absl::Status ShareFairly(std::vector<JobRun*> jobs, uint64_t rotation, int room,
                         absl::FunctionRef<absl::StatusOr<int>(JobRun& job, int most)> take) {
  std::sort(jobs.begin(), jobs.end(), [](const JobRun* a, const JobRun* b) {
    if (a->options.priority() != b->options.priority()) {
      return a->options.priority() > b->options.priority();
    }
    return a->number < b->number;
  });
  int given = 0;
  size_t level_start = 0;
  while (level_start < jobs.size() && given < room) {
    size_t level_end = level_start;
    while (level_end < jobs.size() &&
           jobs[level_end]->options.priority() == jobs[level_start]->options.priority()) {
      ++level_end;
    }
    std::rotate(jobs.begin() + level_start,
                jobs.begin() + level_start + rotation % (level_end - level_start),
                jobs.begin() + level_end);
    for (bool progress = true; progress && given < room;) {
      progress = false;
      const int share = std::max<int>(1, (room - given) / static_cast<int>(level_end - level_start));
      for (size_t i = level_start; i < level_end && given < room; ++i) {
        FORGE_ASSIGN_OR_RETURN(const int taken, take(*jobs[i], std::min(share, room - given)));
        if (taken > 0) progress = true;
        given += taken;
      }
    }
    level_start = level_end;
  }
  return absl::OkStatus();
}

}  // namespace forge::server

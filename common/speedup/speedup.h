// The whole-model estimate from per-task results, as the report (client/forge/results.cc) and the
// job's progress (JobProgress.best_speedup, written by the scheduler) both state it: over the
// tasks that have a best measurement, the sum of their eager times times their occurrences (at
// least 1) over the sum of their best times times their occurrences. Tasks with no best yet have
// no eager time either and are counted as untimed, not guessed.
#ifndef FORGE_COMMON_SPEEDUP_SPEEDUP_H_
#define FORGE_COMMON_SPEEDUP_SPEEDUP_H_

#include "forge/v1/service.pb.h"

namespace forge {

struct ModelTimes {
  double eager_us = 0;  // sum over timed tasks of occurrences x the best's eager median
  double best_us = 0;   // sum over timed tasks of occurrences x the best's median
  int timed = 0;        // tasks with a best
  int untimed = 0;      // tasks without one

  // eager_us / best_us; 1.0 while nothing is timed.
  double Speedup() const { return best_us > 0 ? eager_us / best_us : 1.0; }
};

// One task's share of the sums (no effect for a task without a best).
void AddTask(const forge::v1::TaskResults& task, ModelTimes& times);

ModelTimes SumModelTimes(const google::protobuf::RepeatedPtrField<forge::v1::TaskResults>& tasks);

}  // namespace forge

#endif  // FORGE_COMMON_SPEEDUP_SPEEDUP_H_

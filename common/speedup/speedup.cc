#include "common/speedup/speedup.h"

#include <algorithm>

namespace forge {

void AddTask(const forge::v1::TaskResults& task, ModelTimes& times) {
  if (!task.has_best()) {
    ++times.untimed;
    return;
  }
  const int occurrences = std::max(task.task().occurrences(), 1);
  times.eager_us += occurrences * task.best().eager_median_us();
  times.best_us += occurrences * task.best().median_us();
  ++times.timed;
}

ModelTimes SumModelTimes(const google::protobuf::RepeatedPtrField<forge::v1::TaskResults>& tasks) {
  ModelTimes times;
  for (const forge::v1::TaskResults& task : tasks) AddTask(task, times);
  return times;
}

}  // namespace forge

#include "common/speedup/speedup.h"

#include "gtest/gtest.h"

namespace forge {
namespace {

forge::v1::TaskResults Task(int occurrences, double eager_us, double best_us) {
  forge::v1::TaskResults task;
  task.mutable_task()->set_occurrences(occurrences);
  task.mutable_best()->set_eager_median_us(eager_us);
  task.mutable_best()->set_median_us(best_us);
  return task;
}

TEST(SpeedupTest, WholeModelWeighsTasksByTimeAndOccurrences) {
  google::protobuf::RepeatedPtrField<forge::v1::TaskResults> tasks;
  *tasks.Add() = Task(1, 100, 25);   // 4x on a small task
  *tasks.Add() = Task(3, 300, 300);  // no gain on the big one, three times
  tasks.Add();                       // not timed yet
  const ModelTimes times = SumModelTimes(tasks);
  EXPECT_EQ(times.timed, 2);
  EXPECT_EQ(times.untimed, 1);
  EXPECT_DOUBLE_EQ(times.eager_us, 100 + 900);
  EXPECT_DOUBLE_EQ(times.best_us, 25 + 900);
  EXPECT_DOUBLE_EQ(times.Speedup(), 1000.0 / 925.0);  // not the best task's 4x
  EXPECT_DOUBLE_EQ(ModelTimes().Speedup(), 1.0);
  // occurrences 0 (unset) counts once.
  ModelTimes once;
  AddTask(Task(0, 10, 5), once);
  EXPECT_DOUBLE_EQ(once.eager_us, 10);
}

}  // namespace
}  // namespace forge

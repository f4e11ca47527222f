// Fair shares of one lease between the jobs a GPU may serve.
//
// Rules. Higher priority first: a lower level gets only what the higher ones leave. Within one
// priority level, jobs go in submission order (JobRun::number) rotated by `rotation` (the caller
// passes a counter it moves on each lease, so no job always comes first), in rounds: each round
// offers every job of the level an equal share of what is left of `room` (at least 1), and rounds
// go on until the lease is full or a whole round took nothing.
//
// `take(job, most)` hands out up to `most` of the job's candidates and returns how many it gave
// (0 for a job with nothing to give, such as one that finished meanwhile); an error ends the
// share-out and is returned. Pure logic over the caller's jobs: no Redis, no locking.
#ifndef FORGE_SERVER_FAIR_SHARE_H_
#define FORGE_SERVER_FAIR_SHARE_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/job_budget.h"

namespace forge::server {

absl::Status ShareFairly(std::vector<JobRun*> jobs, uint64_t rotation, int room,
                         absl::FunctionRef<absl::StatusOr<int>(JobRun& job, int most)> take);

}  // namespace forge::server

#endif  // FORGE_SERVER_FAIR_SHARE_H_

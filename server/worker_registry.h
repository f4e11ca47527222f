// The workers the coordinator knows: what each registered (its GPUs, host, generator versions,
// counts of candidates it finished) and when it was last heard from.
//
// Contract. A worker registers with at least one GPU, each with a name and an arch, and with the
// coordinator's generator versions (Validate says why a request is refused). Registering again
// under a known id replaces what it registered and keeps its counts. Any call of the worker
// (heartbeat, lease, report) marks it seen; it is live while it was seen within `live_window` (the
// lease duration). A worker not seen for a long while is forgotten (Dead lists them; the caller
// erases them from the store first, then from here).
//
// The results of a GPU are valid in its "space" (redis_keys.h): the GPU's name for measured
// results, "predicted:<name>" for the emulated backend's (ResultSpace).
//
// In memory only: SchedulerStore persists the records, and Restore puts them back after a
// restart. Not thread-safe: the Scheduler's mutex guards it.
#ifndef FORGE_SERVER_WORKER_REGISTRY_H_
#define FORGE_SERVER_WORKER_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "forge/v1/service.pb.h"

namespace forge::server {

struct WorkerRecord {
  forge::v1::WorkerStatus status;  // as registered, with its counts
  absl::Time last_seen;
};

// Where results of this GPU are valid (redis_keys.h).
std::string ResultSpace(const forge::v1::GpuInfo& gpu);

class WorkerRegistry {
 public:
  explicit WorkerRegistry(absl::Duration live_window) : live_window_(live_window) {}

  // InvalidArgument for a request without GPUs or with a GPU lacking a name or an arch,
  // FailedPrecondition when the worker's generator versions differ from `generator_versions`.
  static absl::Status Validate(const forge::v1::RegisterRequest& request,
                               absl::string_view generator_versions);

  // A record loaded from the store.
  void Restore(const std::string& id, WorkerRecord record) { workers_[id] = std::move(record); }

  // Registers (or registers again) worker `id` from a validated request, seen at `now`.
  WorkerRecord& Register(const std::string& id, const forge::v1::RegisterRequest& request,
                         absl::Time now);

  // The worker, marked seen at `now`; nullptr when it is unknown (it must register again).
  WorkerRecord* Touch(absl::string_view id, absl::Time now);

  // The worker's GPU of this arch; nullptr when it registered none.
  static const forge::v1::GpuInfo* GpuOfArch(const WorkerRecord& worker, absl::string_view arch);
  // True when any of its GPUs is emulated: its results must all be predicted times.
  static bool IsEmulated(const WorkerRecord& worker);
  // Counts a result the worker reported that was new to the results cache.
  static void CountResult(WorkerRecord& worker, bool measured);

  // Workers seen within the live window at `now`.
  int LiveCount(absl::Time now) const;

  // Every worker's status as the client sees it (live, last heartbeat, candidates it holds under
  // leases from `leased_per_worker`): live ones first, then dead ones when `include_dead`, each
  // group by id.
  std::vector<forge::v1::WorkerStatus> Statuses(
      absl::Time now, bool include_dead, const std::map<std::string, int>& leased_per_worker) const;

  // Workers not seen for longer than `forget_after`, by id.
  std::vector<std::string> Dead(absl::Time now, absl::Duration forget_after) const;
  void Erase(const std::string& id) { workers_.erase(id); }

 private:
  bool IsLive(const WorkerRecord& worker, absl::Time now) const {
    return now - worker.last_seen <= live_window_;
  }

  const absl::Duration live_window_;
  std::map<std::string, WorkerRecord> workers_;
};

}  // namespace forge::server

#endif  // FORGE_SERVER_WORKER_REGISTRY_H_

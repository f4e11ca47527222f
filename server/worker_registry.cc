#include "server/worker_registry.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"

namespace forge::server {

using ::google::protobuf::util::TimeUtil;

std::string ResultSpace(const forge::v1::GpuInfo& gpu) {
  return gpu.emulated() ? absl::StrCat("predicted:", gpu.name()) : gpu.name();
}

absl::Status WorkerRegistry::Validate(const forge::v1::RegisterRequest& request,
                                      absl::string_view generator_versions) {
  if (request.gpus().empty()) {
    return absl::InvalidArgumentError("Register: a worker must offer at least one GPU");
  }
  for (const forge::v1::GpuInfo& gpu : request.gpus()) {
    if (gpu.name().empty() || gpu.arch().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Register: GPU ", gpu.index(), " lacks a name or an arch"));
    }
  }
  if (request.generator_version() != generator_versions) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Register: the worker's generators (", request.generator_version(),
        ") differ from the coordinator's (", generator_versions,
        "); run a worker built from the same Forge version"));
  }
  return absl::OkStatus();
}

WorkerRecord& WorkerRegistry::Register(const std::string& id,
                                       const forge::v1::RegisterRequest& request, absl::Time now) {
  WorkerRecord& worker = workers_[id];
  const int64_t completed = worker.status.candidates_completed();
  const int64_t failed = worker.status.candidates_failed();
  worker.status = forge::v1::WorkerStatus();
  worker.status.set_worker_id(id);
  worker.status.set_hostname(request.hostname());
  *worker.status.mutable_gpus() = request.gpus();
  worker.status.set_compile_threads(request.compile_threads());
  worker.status.set_generator_version(request.generator_version());
  worker.status.set_candidates_completed(completed);
  worker.status.set_candidates_failed(failed);
  worker.last_seen = now;
  *worker.status.mutable_registered_at() =
      TimeUtil::MillisecondsToTimestamp(absl::ToUnixMillis(now));
  return worker;
}

WorkerRecord* WorkerRegistry::Touch(absl::string_view id, absl::Time now) {
  auto it = workers_.find(std::string(id));
  if (it == workers_.end()) return nullptr;
  it->second.last_seen = now;
  return &it->second;
}

const forge::v1::GpuInfo* WorkerRegistry::GpuOfArch(const WorkerRecord& worker,
                                                    absl::string_view arch) {
  const forge::v1::GpuInfo* found = nullptr;
  for (const forge::v1::GpuInfo& gpu : worker.status.gpus()) {
    if (gpu.arch() == arch) found = &gpu;  // the last one, as workers list GPUs by index
  }
  return found;
}

bool WorkerRegistry::IsEmulated(const WorkerRecord& worker) {
  return std::any_of(worker.status.gpus().begin(), worker.status.gpus().end(),
                     [](const forge::v1::GpuInfo& gpu) { return gpu.emulated(); });
}

void WorkerRegistry::CountResult(WorkerRecord& worker, bool measured) {
  if (measured) {
    worker.status.set_candidates_completed(worker.status.candidates_completed() + 1);
  } else {
    worker.status.set_candidates_failed(worker.status.candidates_failed() + 1);
  }
}

int WorkerRegistry::LiveCount(absl::Time now) const {
  int live = 0;
  for (const auto& [id, worker] : workers_) live += IsLive(worker, now);
  return live;
}

std::vector<forge::v1::WorkerStatus> WorkerRegistry::Statuses(
    absl::Time now, bool include_dead, const std::map<std::string, int>& leased_per_worker) const {
  std::vector<forge::v1::WorkerStatus> live;
  std::vector<forge::v1::WorkerStatus> dead;
  for (const auto& [id, worker] : workers_) {
    forge::v1::WorkerStatus status = worker.status;
    status.set_live(IsLive(worker, now));
    *status.mutable_last_heartbeat_at() =
        TimeUtil::MillisecondsToTimestamp(absl::ToUnixMillis(worker.last_seen));
    auto leased = leased_per_worker.find(id);
    status.set_candidates_leased(leased == leased_per_worker.end() ? 0 : leased->second);
    if (status.live()) {
      live.push_back(std::move(status));
    } else if (include_dead) {
      dead.push_back(std::move(status));
    }
  }
  live.insert(live.end(), dead.begin(), dead.end());
  return live;
}

std::vector<std::string> WorkerRegistry::Dead(absl::Time now, absl::Duration forget_after) const {
  std::vector<std::string> dead;
  for (const auto& [id, worker] : workers_) {
    if (now - worker.last_seen > forget_after) dead.push_back(id);
  }
  return dead;
}

}  // namespace forge::server

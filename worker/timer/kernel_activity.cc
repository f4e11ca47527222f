#include "worker/timer/kernel_activity.h"

#include <cupti.h>

#include <algorithm>
#include <cstdlib>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status/status_macros.h"
#include "worker/gpu/device.h"
#include "worker/timer/cupti_status.h"

namespace forge::timer {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlignment = 8;

// CUPTI calls back on its own threads into process-wide state.
struct Records {
  absl::Mutex mutex;
  bool recorder_active ABSL_GUARDED_BY(mutex) = false;
  std::vector<KernelActivity> kernels ABSL_GUARDED_BY(mutex);
};

Records& GlobalRecords() {
  static Records* const records = new Records;
  return *records;
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  std::vector<KernelActivity> kernels;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
      continue;
    }
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    kernels.push_back({kernel->name != nullptr ? kernel->name : "", kernel->start, kernel->end,
                       kernel->streamId});
  }
  std::free(buffer);
  Records& records = GlobalRecords();
  absl::MutexLock lock(&records.mutex);
  if (records.recorder_active) {
    records.kernels.insert(records.kernels.end(), kernels.begin(), kernels.end());
  }
}

absl::Status RegisterCallbacksOnce() {
  static const absl::Status* const registered = new absl::Status(CuptiStatus(
      cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted),
      "cuptiActivityRegisterCallbacks"));
  return *registered;
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelActivityRecorder>> KernelActivityRecorder::Start() {
  FORGE_RETURN_IF_ERROR(Annotate(gpu::DriverStatus(), "CUPTI needs a GPU"));
  Records& records = GlobalRecords();
  {
    absl::MutexLock lock(&records.mutex);
    if (records.recorder_active) {
      return absl::UnavailableError("another KernelActivityRecorder is recording");
    }
    records.recorder_active = true;
    records.kernels.clear();
  }
  absl::Status status = RegisterCallbacksOnce();
  if (status.ok()) {
    status = CuptiStatus(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
                         "cuptiActivityEnable(CONCURRENT_KERNEL)");
  }
  if (!status.ok()) {
    absl::MutexLock lock(&records.mutex);
    records.recorder_active = false;
    return status;
  }
  return std::unique_ptr<KernelActivityRecorder>(new KernelActivityRecorder());
}

KernelActivityRecorder::~KernelActivityRecorder() {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Records& records = GlobalRecords();
  absl::MutexLock lock(&records.mutex);
  records.recorder_active = false;
  records.kernels.clear();
}

absl::StatusOr<std::vector<KernelActivity>> KernelActivityRecorder::Collect() {
  FORGE_RETURN_IF_ERROR(
      CuptiStatus(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll"));
  std::vector<KernelActivity> kernels;
  {
    Records& records = GlobalRecords();
    absl::MutexLock lock(&records.mutex);
    kernels.swap(records.kernels);
  }
  std::sort(kernels.begin(), kernels.end(),
            [](const KernelActivity& a, const KernelActivity& b) { return a.start_ns < b.start_ns; });
  return kernels;
}

}  // namespace forge::timer

#include "worker/judge/device_draws.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::judge {
namespace {

// A buffer holding `bytes` from `data`, copied in the order of `stream` (whose later work, the
// fingerprints and the candidates' copies, reads it).
absl::StatusOr<gpu::DeviceBuffer> UploadBytes(const gpu::Device& device, const void* data,
                                              size_t bytes, gpu::Stream& stream) {
  FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer, device.Allocate(bytes));
  if (bytes > 0) FORGE_RETURN_IF_ERROR(buffer.CopyFromHostAsync(data, bytes, stream));
  return buffer;
}

}  // namespace

DeviceDraws::DeviceDraws(const gpu::Device& device, DeviceComparer& comparer,
                         int64_t capacity_bytes, int64_t min_task_bytes,
                         const DeviceInputs* inputs)
    : device_(device), comparer_(comparer), min_task_bytes_(min_task_bytes), inputs_(inputs) {
  stats_.capacity_bytes = capacity_bytes;
}

absl::StatusOr<std::vector<uint64_t>> DeviceDraws::FingerprintsOf(const DeviceDraw& draw,
                                                                  gpu::Stream& stream) {
  std::vector<uint64_t> fingerprints;
  for (const auto* buffers : {&draw.inputs, &draw.float64, &draw.native}) {
    for (const gpu::DeviceBuffer& buffer : *buffers) {
      FORGE_ASSIGN_OR_RETURN(const uint64_t fingerprint, comparer_.Fingerprint(buffer, stream));
      fingerprints.push_back(fingerprint);
    }
  }
  return fingerprints;
}

absl::StatusOr<std::shared_ptr<const DeviceDraw>> DeviceDraws::Upload(const CachedDraw& draw,
                                                                      gpu::Stream& stream) {
  auto uploaded = std::make_shared<DeviceDraw>();
  for (const HostTensor& input : *draw.inputs) {
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                           UploadBytes(device_, input.storage.data(), input.storage.size(),
                                       stream));
    uploaded->inputs.push_back(std::move(buffer));
  }
  for (const auto& [host, device] :
       {std::pair{&draw.references->float64, &uploaded->float64},
        std::pair{&draw.references->native, &uploaded->native}}) {
    for (const std::vector<double>& output : *host) {
      FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                             UploadBytes(device_, output.data(), output.size() * sizeof(double),
                                         stream));
      device->push_back(std::move(buffer));
    }
  }
  return uploaded;
}

absl::StatusOr<std::shared_ptr<const DeviceDraw>> DeviceDraws::FindLocked(const DrawKey& key,
                                                                          gpu::Stream& stream) {
  auto found = resident_.find(key);
  if (found == resident_.end()) return std::shared_ptr<const DeviceDraw>();
  FORGE_ASSIGN_OR_RETURN(const std::vector<uint64_t> fingerprints,
                         FingerprintsOf(*found->second.draw, stream));
  if (fingerprints == found->second.fingerprints) {
    ++stats_.hits;
    found->second.last_use = ++uses_;
    return found->second.draw;
  }
  ++stats_.corrupt;
  stats_.bytes -= found->second.bytes;
  --stats_.entries;
  resident_.erase(found);
  return std::shared_ptr<const DeviceDraw>();
}

absl::Status DeviceDraws::FitsLocked(int64_t bytes) {
  if (bytes * kDrawsPerTask <= stats_.capacity_bytes) return absl::OkStatus();
  ++stats_.too_large;
  return absl::ResourceExhaustedError(absl::StrCat(
      "a draw of ", bytes, " bytes does not fit a third of the device draws' capacity of ",
      stats_.capacity_bytes, " bytes"));
}

absl::Status DeviceDraws::KeepLocked(const DrawKey& key, std::shared_ptr<const DeviceDraw> draw,
                                     int64_t bytes, gpu::Stream& stream) {
  if (auto found = resident_.find(key); found != resident_.end()) {
    stats_.bytes -= found->second.bytes;
    --stats_.entries;
    resident_.erase(found);
  }
  FORGE_RETURN_IF_ERROR(FitsLocked(bytes));
  MakeRoomLocked(bytes);
  FORGE_ASSIGN_OR_RETURN(std::vector<uint64_t> fingerprints, FingerprintsOf(*draw, stream));
  resident_[key] = Resident{std::move(draw), std::move(fingerprints), bytes, ++uses_};
  ++stats_.entries;
  stats_.bytes += bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const DeviceDraw>> DeviceDraws::Get(const DrawKey& key,
                                                                   const CachedDraw& draw,
                                                                   gpu::Stream& stream) {
  if (draw.inputs == nullptr || draw.references == nullptr) {
    return absl::InvalidArgumentError("a draw is made resident with its inputs and references");
  }
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceDraw> resident, FindLocked(key, stream));
  if (resident != nullptr) return resident;
  const int64_t bytes = DataBytes(draw);
  FORGE_RETURN_IF_ERROR(FitsLocked(bytes));
  MakeRoomLocked(bytes);
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceDraw> uploaded, Upload(draw, stream));
  FORGE_RETURN_IF_ERROR(KeepLocked(key, uploaded, bytes, stream));
  ++stats_.uploads;
  return uploaded;
}

absl::StatusOr<std::shared_ptr<const DeviceDraw>> DeviceDraws::Find(const DrawKey& key,
                                                                    gpu::Stream& stream) {
  absl::MutexLock lock(&mutex_);
  FORGE_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceDraw> resident, FindLocked(key, stream));
  if (resident == nullptr) return absl::NotFoundError("no resident draw under the key");
  return resident;
}

absl::Status DeviceDraws::Insert(const DrawKey& key, std::shared_ptr<const DeviceDraw> draw,
                                 gpu::Stream& stream) {
  int64_t bytes = 0;
  for (const auto* buffers : {&draw->inputs, &draw->float64, &draw->native}) {
    for (const gpu::DeviceBuffer& buffer : *buffers) bytes += buffer.size_bytes();
  }
  absl::MutexLock lock(&mutex_);
  FORGE_RETURN_IF_ERROR(KeepLocked(key, std::move(draw), bytes, stream));
  ++stats_.made;
  return absl::OkStatus();
}

void DeviceDraws::MakeRoomLocked(int64_t incoming) {
  while (!resident_.empty() && stats_.bytes + incoming > stats_.capacity_bytes) {
    auto oldest = resident_.begin();
    for (auto it = resident_.begin(); it != resident_.end(); ++it) {
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    }
    stats_.bytes -= oldest->second.bytes;
    --stats_.entries;
    ++stats_.evictions;
    resident_.erase(oldest);
  }
}

bool DeviceDraws::Contains(const DrawKey& key) const {
  absl::MutexLock lock(&mutex_);
  return resident_.contains(key);
}

DeviceDrawsStats DeviceDraws::stats() const {
  absl::MutexLock lock(&mutex_);
  return stats_;
}

}  // namespace forge::judge

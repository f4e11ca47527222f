#include "worker/gpu/device.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <string>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"

namespace forge::gpu {
namespace {

// Every driver entry point Forge uses, with the ABI version it is called through. Each pointer has
// the type cudaTypedefs.h gives that version, and cuGetProcAddress is asked for that version: the
// plain prototypes in cuda.h are not always the newest ABI (cuCtxSynchronize takes a context since
// CUDA 13), so asking for CUDA_VERSION could hand back a function of another signature.
#define FORGE_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit, 2000) X(cuGetErrorName, 6000) X(cuGetErrorString, 6000)                            \
  X(cuDriverGetVersion, 2020) X(cuDeviceGetCount, 2000) X(cuDeviceGet, 2000)                   \
  X(cuDeviceGetName, 2000) X(cuDeviceGetAttribute, 2000) X(cuDeviceTotalMem, 3020)             \
  X(cuDevicePrimaryCtxRetain, 7000) X(cuDevicePrimaryCtxRelease, 11000)                        \
  X(cuCtxSetCurrent, 4000) X(cuCtxSynchronize, 2000) X(cuMemGetInfo, 3020)                     \
  X(cuMemAlloc, 3020) X(cuMemFree, 3020) X(cuMemcpyHtoD, 3020) X(cuMemcpyDtoH, 3020)           \
  X(cuMemcpyDtoHAsync, 3020) X(cuMemcpyDtoDAsync, 3020) X(cuMemsetD32Async, 3020)              \
  X(cuMemcpyHtoDAsync, 3020)                                                                   \
  X(cuMemsetD16Async, 3020) X(cuMemsetD8Async, 3020) X(cuStreamCreate, 2000)                   \
  X(cuStreamDestroy, 4000) X(cuStreamSynchronize, 2000) X(cuEventCreate, 2000)                 \
  X(cuEventDestroy, 4000) X(cuEventRecord, 2000) X(cuEventSynchronize, 2000)                   \
  X(cuEventElapsedTime, 12080) X(cuModuleLoadData, 2000) X(cuModuleUnload, 2000)               \
  X(cuModuleGetFunction, 2000) X(cuFuncSetAttribute, 9000) X(cuLaunchKernel, 4000)             \
  X(cuMemHostAlloc, 2020) X(cuMemFreeHost, 2000) X(cuStreamBeginCapture, 10010)                \
  X(cuStreamEndCapture, 10000) X(cuGraphInstantiateWithFlags, 11040) X(cuGraphLaunch, 10000)   \
  X(cuGraphExecDestroy, 10000) X(cuGraphDestroy, 10000)

struct Driver {
#define FORGE_DECLARE_POINTER(name, version) PFN_##name##_v##version fn_##name = nullptr;
  FORGE_DRIVER_FUNCTIONS(FORGE_DECLARE_POINTER)
#undef FORGE_DECLARE_POINTER
  absl::Status load_status;  // whether every entry point resolved
};

absl::Status ResolveEntryPoints(Driver& driver) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    return absl::UnavailableError(absl::StrCat("no CUDA driver: dlopen(libcuda.so.1) failed: ",
                                               error != nullptr ? error : "unknown error"));
  }
  auto get_proc_address =
      reinterpret_cast<decltype(&cuGetProcAddress)>(dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc_address == nullptr) {
    return absl::UnavailableError(
        "the CUDA driver libcuda.so.1 has no cuGetProcAddress_v2: it predates CUDA 12");
  }
  auto resolve = [&](const char* name, int version, void** pointer) -> absl::Status {
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult result =
        get_proc_address(name, pointer, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (result != CUDA_SUCCESS || *pointer == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "the CUDA driver has no ", name, " of CUDA version ", version,
          " (cuGetProcAddress returned ", static_cast<int>(result), ", query result ",
          static_cast<int>(found), "): the driver is older than the toolkit Forge was built with"));
    }
    return absl::OkStatus();
  };
#define FORGE_RESOLVE(name, version) \
  FORGE_RETURN_IF_ERROR(resolve(#name, version, reinterpret_cast<void**>(&driver.fn_##name)));
  FORGE_DRIVER_FUNCTIONS(FORGE_RESOLVE)
#undef FORGE_RESOLVE
  return absl::OkStatus();
}

// The entry points, resolved once; the library stays loaded for the life of the process.
const Driver& EntryPoints() {
  static const Driver* const driver = [] {
    auto* resolved = new Driver;
    resolved->load_status = ResolveEntryPoints(*resolved);
    return resolved;
  }();
  return *driver;
}

// Only reached through objects that exist, which implies a driver that loaded and initialized.
const Driver& D() { return EntryPoints(); }

absl::Status InitializeDriver() {
  const Driver& driver = EntryPoints();
  FORGE_RETURN_IF_ERROR(driver.load_status);
  FORGE_RETURN_IF_ERROR(CudaStatus(driver.fn_cuInit(0), "cuInit"));
  int count = 0;
  FORGE_RETURN_IF_ERROR(CudaStatus(driver.fn_cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return absl::UnavailableError("the CUDA driver sees no device");
  return absl::OkStatus();
}

constexpr absl::string_view kStickyPayload = "forge.gpu/sticky-error";

bool IsStickyResult(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
      return true;
    default:
      return false;
  }
}

absl::StatusCode CodeOf(CUresult result) {
  if (IsStickyResult(result)) return absl::StatusCode::kAborted;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_PTX:
      return absl::StatusCode::kInvalidArgument;
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NOT_INITIALIZED:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

int Attribute(CUdevice device, CUdevice_attribute attribute, absl::Status& status) {
  int value = 0;
  if (status.ok()) {
    status = CudaStatus(D().fn_cuDeviceGetAttribute(&value, attribute, device),
                        absl::StrCat("cuDeviceGetAttribute(", static_cast<int>(attribute), ")"));
  }
  return value;
}

}  // namespace

absl::Status DriverStatus() {
  static const absl::Status* const status = new absl::Status(InitializeDriver());
  return *status;
}

absl::Status CudaStatus(CUresult result, absl::string_view call) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const Driver& driver = EntryPoints();
  const char* name = nullptr;
  const char* description = nullptr;
  if (driver.fn_cuGetErrorName != nullptr) driver.fn_cuGetErrorName(result, &name);
  if (driver.fn_cuGetErrorString != nullptr) driver.fn_cuGetErrorString(result, &description);
  std::string message = absl::StrCat(
      call, ": ", name != nullptr ? std::string(name) : absl::StrCat("CUresult ", result), " (",
      description != nullptr ? description : "no description", ")");
  if (!IsStickyResult(result)) return absl::Status(CodeOf(result), message);
  absl::Status status(CodeOf(result),
                      absl::StrCat(message, "; sticky error: the CUDA context is unusable and the "
                                            "process must restart to use the GPU again"));
  status.SetPayload(kStickyPayload, absl::Cord("1"));
  return status;
}

bool IsStickyError(const absl::Status& status) {
  return status.GetPayload(kStickyPayload).has_value();
}

std::string DeviceProperties::arch() const {
  return absl::StrCat("sm_", compute_capability_major, compute_capability_minor);
}

// ---- DeviceBuffer ----

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : address_(std::exchange(other.address_, 0)),
      size_bytes_(std::exchange(other.size_bytes_, 0)),
      guard_before_(std::exchange(other.guard_before_, 0)),
      guard_after_(std::exchange(other.guard_after_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    address_ = std::exchange(other.address_, 0);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
    guard_before_ = std::exchange(other.guard_before_, 0);
    guard_after_ = std::exchange(other.guard_after_, 0);
  }
  return *this;
}

void DeviceBuffer::Release() {
  // A failed free (after a sticky error) leaks nothing the dying context will not reclaim.
  if (address_ != 0) D().fn_cuMemFree(address_ - guard_before_);
  address_ = 0;
  size_bytes_ = 0;
  guard_before_ = 0;
  guard_after_ = 0;
}

absl::Status DeviceBuffer::CopyGuardsFromHostAsync(const void* host, Stream& stream) {
  const auto* bytes = static_cast<const std::byte*>(host);
  if (guard_before_ > 0) {
    FORGE_RETURN_IF_ERROR(CudaStatus(
        D().fn_cuMemcpyHtoDAsync(address_ - guard_before_, bytes, guard_before_, stream.handle()),
        "cuMemcpyHtoDAsync(guard before)"));
  }
  if (guard_after_ == 0) return absl::OkStatus();
  return CudaStatus(D().fn_cuMemcpyHtoDAsync(address_ + size_bytes_, bytes + guard_before_,
                                             guard_after_, stream.handle()),
                    "cuMemcpyHtoDAsync(guard after)");
}

absl::Status DeviceBuffer::CopyGuardsToHostAsync(void* host, Stream& stream) const {
  auto* bytes = static_cast<std::byte*>(host);
  if (guard_before_ > 0) {
    FORGE_RETURN_IF_ERROR(CudaStatus(
        D().fn_cuMemcpyDtoHAsync(bytes, address_ - guard_before_, guard_before_, stream.handle()),
        "cuMemcpyDtoHAsync(guard before)"));
  }
  if (guard_after_ == 0) return absl::OkStatus();
  return CudaStatus(D().fn_cuMemcpyDtoHAsync(bytes + guard_before_, address_ + size_bytes_,
                                             guard_after_, stream.handle()),
                    "cuMemcpyDtoHAsync(guard after)");
}

absl::Status DeviceBuffer::CopyFromHost(const void* host, size_t bytes) {
  if (bytes != size_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes into a device buffer of ",
                                                   size_bytes_, " bytes"));
  }
  return CudaStatus(D().fn_cuMemcpyHtoD(address_, host, bytes),
                    absl::StrCat("cuMemcpyHtoD(", bytes, " bytes)"));
}

absl::Status DeviceBuffer::CopyFromHostAsync(const void* host, size_t bytes, Stream& stream) {
  if (bytes != size_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes into a device buffer of ",
                                                   size_bytes_, " bytes"));
  }
  return CudaStatus(D().fn_cuMemcpyHtoDAsync(address_, host, bytes, stream.handle()),
                    absl::StrCat("cuMemcpyHtoDAsync(", bytes, " bytes)"));
}

absl::Status DeviceBuffer::CopyToHost(void* host, size_t bytes) const {
  if (bytes != size_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes out of a device buffer of ",
                                                   size_bytes_, " bytes"));
  }
  return CudaStatus(D().fn_cuMemcpyDtoH(host, address_, bytes),
                    absl::StrCat("cuMemcpyDtoH(", bytes, " bytes)"));
}

absl::Status DeviceBuffer::CopyToHostAsync(void* host, size_t bytes, Stream& stream) const {
  if (bytes != size_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("copy of ", bytes, " bytes out of a device buffer of ",
                                                   size_bytes_, " bytes"));
  }
  return CudaStatus(D().fn_cuMemcpyDtoHAsync(host, address_, bytes, stream.handle()),
                    absl::StrCat("cuMemcpyDtoHAsync(", bytes, " bytes)"));
}

absl::Status DeviceBuffer::CopyFromDeviceAsync(const DeviceBuffer& source, Stream& stream) {
  if (source.size_bytes_ != size_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("device copy of ", source.size_bytes_,
                                                   " bytes into a buffer of ", size_bytes_));
  }
  return CudaStatus(D().fn_cuMemcpyDtoDAsync(address_, source.address_, size_bytes_, stream.handle()),
                    absl::StrCat("cuMemcpyDtoDAsync(", size_bytes_, " bytes)"));
}

absl::Status DeviceBuffer::Fill32(uint32_t pattern, Stream& stream) {
  if (size_bytes_ % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fill32 of a buffer of ", size_bytes_, " bytes, not a multiple of 4"));
  }
  return CudaStatus(D().fn_cuMemsetD32Async(address_, pattern, size_bytes_ / 4, stream.handle()),
                    absl::StrCat("cuMemsetD32Async(", size_bytes_, " bytes)"));
}

absl::Status DeviceBuffer::Fill16(uint16_t pattern, Stream& stream) {
  if (size_bytes_ % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fill16 of a buffer of ", size_bytes_, " bytes, not a multiple of 2"));
  }
  return CudaStatus(D().fn_cuMemsetD16Async(address_, pattern, size_bytes_ / 2, stream.handle()),
                    absl::StrCat("cuMemsetD16Async(", size_bytes_, " bytes)"));
}

absl::Status DeviceBuffer::Fill8(uint8_t pattern, Stream& stream) {
  return CudaStatus(D().fn_cuMemsetD8Async(address_, pattern, size_bytes_, stream.handle()),
                    absl::StrCat("cuMemsetD8Async(", size_bytes_, " bytes)"));
}

// ---- PinnedHostBuffer ----

PinnedHostBuffer::~PinnedHostBuffer() { Release(); }

PinnedHostBuffer::PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

void PinnedHostBuffer::Release() {
  if (data_ != nullptr) D().fn_cuMemFreeHost(data_);
  data_ = nullptr;
  size_bytes_ = 0;
}

// ---- Stream ----

Stream::~Stream() {
  if (stream_ != nullptr) D().fn_cuStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) D().fn_cuStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

absl::Status Stream::Synchronize() {
  return CudaStatus(D().fn_cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

absl::Status Stream::BeginCapture() {
  return CudaStatus(D().fn_cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED),
                    "cuStreamBeginCapture");
}

absl::StatusOr<Graph> Stream::EndCapture() {
  CUgraph graph = nullptr;
  const CUresult ended = D().fn_cuStreamEndCapture(stream_, &graph);
  if (ended == CUDA_ERROR_STREAM_CAPTURE_UNJOINED) {
    if (graph != nullptr) D().fn_cuGraphDestroy(graph);
    return absl::FailedPreconditionError(
        "cuStreamEndCapture: CUDA_ERROR_STREAM_CAPTURE_UNJOINED (work forked from the captured "
        "stream was not joined back into it)");
  }
  FORGE_RETURN_IF_ERROR(CudaStatus(ended, "cuStreamEndCapture"));
  CUgraphExec exec = nullptr;
  const CUresult instantiated = D().fn_cuGraphInstantiateWithFlags(&exec, graph, 0);
  D().fn_cuGraphDestroy(graph);
  FORGE_RETURN_IF_ERROR(CudaStatus(instantiated, "cuGraphInstantiateWithFlags"));
  return Graph(exec);
}

// ---- Graph ----

void Graph::Destroy::operator()(CUgraphExec exec) const { D().fn_cuGraphExecDestroy(exec); }

absl::Status Graph::Launch(Stream& stream) {
  return CudaStatus(D().fn_cuGraphLaunch(exec_.get(), stream.handle()), "cuGraphLaunch");
}

// ---- Event ----

Event::~Event() {
  if (event_ != nullptr) D().fn_cuEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) D().fn_cuEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

absl::Status Event::Record(Stream& stream) {
  return CudaStatus(D().fn_cuEventRecord(event_, stream.handle()), "cuEventRecord");
}

absl::Status Event::Synchronize() {
  return CudaStatus(D().fn_cuEventSynchronize(event_), "cuEventSynchronize");
}

absl::StatusOr<float> Event::MillisecondsSince(const Event& start) const {
  float milliseconds = 0;
  FORGE_RETURN_IF_ERROR(CudaStatus(D().fn_cuEventElapsedTime(&milliseconds, start.event_, event_),
                                   "cuEventElapsedTime"));
  return milliseconds;
}

// ---- Module and Kernel ----

Module::~Module() {
  if (module_ != nullptr) D().fn_cuModuleUnload(module_);
}

Module::Module(Module&& other) noexcept : module_(std::exchange(other.module_, nullptr)) {}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (module_ != nullptr) D().fn_cuModuleUnload(module_);
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

absl::StatusOr<Kernel> Module::GetKernel(absl::string_view name) const {
  std::string name_string(name);
  CUfunction function = nullptr;
  FORGE_RETURN_IF_ERROR(CudaStatus(D().fn_cuModuleGetFunction(&function, module_, name_string.c_str()),
                                   absl::StrCat("cuModuleGetFunction(", name, ")")));
  return Kernel(function, std::move(name_string));
}

absl::Status Kernel::Launch(const LaunchShape& shape, absl::Span<void* const> args,
                            Stream& stream) const {
  // Above 48 KiB of dynamic shared memory a kernel must opt in.
  constexpr uint32_t kDefaultDynamicSharedLimit = 48 * 1024;
  if (shape.dynamic_shared_bytes > kDefaultDynamicSharedLimit) {
    FORGE_RETURN_IF_ERROR(CudaStatus(
        D().fn_cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               static_cast<int>(shape.dynamic_shared_bytes)),
        absl::StrCat("cuFuncSetAttribute(", name_, ", max dynamic shared ",
                     shape.dynamic_shared_bytes, " bytes)")));
  }
  return CudaStatus(
      D().fn_cuLaunchKernel(function_, shape.grid[0], shape.grid[1], shape.grid[2], shape.block[0],
                         shape.block[1], shape.block[2], shape.dynamic_shared_bytes,
                         stream.handle(), const_cast<void**>(args.data()), nullptr),
      absl::StrCat("cuLaunchKernel(", name_, ", grid ", shape.grid[0], "x", shape.grid[1], "x",
                   shape.grid[2], ", block ", shape.block[0], "x", shape.block[1], "x",
                   shape.block[2], ")"));
}

// ---- Device ----

absl::StatusOr<std::unique_ptr<Device>> Device::Open(int ordinal) {
  FORGE_RETURN_IF_ERROR(DriverStatus());
  const Driver& driver = D();
  CUdevice device = 0;
  FORGE_RETURN_IF_ERROR(CudaStatus(driver.fn_cuDeviceGet(&device, ordinal),
                                   absl::StrCat("cuDeviceGet(", ordinal, ")")));
  DeviceProperties properties;
  properties.ordinal = ordinal;
  char name[256] = {};
  FORGE_RETURN_IF_ERROR(
      CudaStatus(driver.fn_cuDeviceGetName(name, sizeof(name), device), "cuDeviceGetName"));
  properties.name = name;
  size_t total_memory = 0;
  FORGE_RETURN_IF_ERROR(
      CudaStatus(driver.fn_cuDeviceTotalMem(&total_memory, device), "cuDeviceTotalMem"));
  properties.total_memory_bytes = static_cast<int64_t>(total_memory);
  FORGE_RETURN_IF_ERROR(CudaStatus(driver.fn_cuDriverGetVersion(&properties.driver_version),
                                   "cuDriverGetVersion"));
  absl::Status status;
  properties.compute_capability_major =
      Attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, status);
  properties.compute_capability_minor =
      Attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, status);
  properties.sm_count = Attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, status);
  properties.l2_cache_bytes = Attribute(device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, status);
  properties.max_threads_per_block =
      Attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, status);
  properties.max_shared_memory_per_block_optin =
      Attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, status);
  FORGE_RETURN_IF_ERROR(status);

  CUcontext context = nullptr;
  FORGE_RETURN_IF_ERROR(CudaStatus(driver.fn_cuDevicePrimaryCtxRetain(&context, device),
                                   absl::StrCat("cuDevicePrimaryCtxRetain(device ", ordinal, ")")));
  std::unique_ptr<Device> opened(new Device(device, context, std::move(properties)));
  FORGE_RETURN_IF_ERROR(opened->MakeCurrent());
  return opened;
}

Device::~Device() { D().fn_cuDevicePrimaryCtxRelease(device_); }

absl::Status Device::MakeCurrent() const {
  return CudaStatus(D().fn_cuCtxSetCurrent(context_), "cuCtxSetCurrent");
}

absl::Status Device::Synchronize() const {
  return CudaStatus(D().fn_cuCtxSynchronize(), "cuCtxSynchronize");
}

absl::StatusOr<int64_t> Device::FreeMemoryBytes() const {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  FORGE_RETURN_IF_ERROR(CudaStatus(D().fn_cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  return static_cast<int64_t>(free_bytes);
}

absl::StatusOr<DeviceBuffer> Device::Allocate(size_t bytes) const {
  CUdeviceptr address = 0;
  // cuMemAlloc rejects zero bytes; a zero-element tensor still gets a distinct address.
  size_t allocated = bytes == 0 ? 4 : bytes;
  FORGE_RETURN_IF_ERROR(CudaStatus(D().fn_cuMemAlloc(&address, allocated),
                                   absl::StrCat("cuMemAlloc(", bytes, " bytes)")));
  return DeviceBuffer(address, bytes);
}

absl::StatusOr<DeviceBuffer> Device::AllocateGuarded(size_t bytes, size_t guard_bytes) const {
  constexpr size_t kAlignment = 256;
  if (guard_bytes == 0 || guard_bytes % kAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "guard zones of ", guard_bytes, " bytes: they must be a positive multiple of ",
        kAlignment));
  }
  const size_t padded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  const size_t guard_after = padded - bytes + guard_bytes;
  CUdeviceptr base = 0;
  FORGE_RETURN_IF_ERROR(
      CudaStatus(D().fn_cuMemAlloc(&base, guard_bytes + bytes + guard_after),
                 absl::StrCat("cuMemAlloc(", bytes, " bytes and guard zones of ", guard_bytes,
                              ")")));
  return DeviceBuffer(base + guard_bytes, bytes, guard_bytes, guard_after);
}

absl::StatusOr<PinnedHostBuffer> Device::AllocatePinned(size_t bytes) const {
  void* host = nullptr;
  // Like cuMemAlloc, cuMemHostAlloc rejects zero bytes.
  FORGE_RETURN_IF_ERROR(
      CudaStatus(D().fn_cuMemHostAlloc(&host, bytes == 0 ? 4 : bytes, CU_MEMHOSTALLOC_PORTABLE),
                 absl::StrCat("cuMemHostAlloc(", bytes, " bytes)")));
  return PinnedHostBuffer(static_cast<std::byte*>(host), bytes);
}

absl::StatusOr<Stream> Device::CreateStream() const {
  CUstream stream = nullptr;
  FORGE_RETURN_IF_ERROR(
      CudaStatus(D().fn_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return Stream(stream);
}

absl::StatusOr<Event> Device::CreateEvent() const {
  CUevent event = nullptr;
  FORGE_RETURN_IF_ERROR(CudaStatus(D().fn_cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate"));
  return Event(event);
}

absl::StatusOr<Module> Device::LoadModule(absl::string_view cubin) const {
  if (cubin.empty()) return absl::InvalidArgumentError("cuModuleLoadData: empty cubin");
  // The driver reads an ELF image from a pointer with no length; keep it aligned.
  std::string image(cubin);
  CUmodule module = nullptr;
  FORGE_RETURN_IF_ERROR(CudaStatus(D().fn_cuModuleLoadData(&module, image.data()),
                                   absl::StrCat("cuModuleLoadData(", cubin.size(), " bytes)")));
  return Module(module);
}

}  // namespace forge::gpu

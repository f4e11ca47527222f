// A thin RAII layer over the CUDA driver API: one device's primary context, device memory, streams,
// events, modules loaded from cubins, and kernel launches. Every CUresult becomes an absl::Status
// that names the driver call and the error (cuGetErrorName and cuGetErrorString).
//
// The driver (libcuda.so.1) is loaded at run time with dlopen rather than linked, so that every
// binary that uses this library starts on a machine without a GPU or driver (CI, the emulated
// backend) and finds out through DriverStatus() instead of failing to load.
//
// A context is current per thread: Device::Open makes the device's primary context current on the
// calling thread; any other thread that uses the device, its buffers, streams or modules must call
// Device::MakeCurrent first.
#ifndef FORGE_WORKER_GPU_DEVICE_H_
#define FORGE_WORKER_GPU_DEVICE_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace forge::gpu {

// OK when the driver loaded, cuInit succeeded and at least one device is present; otherwise
// Unavailable with the reason (no libcuda.so.1, the toolkit's stub library, no device, ...).
// Cached after the first call.
absl::Status DriverStatus();

// A status for `result`, naming `call`: "cuMemAlloc(4096 bytes): CUDA_ERROR_OUT_OF_MEMORY (out of
// memory)". OK for CUDA_SUCCESS. Errors that leave the context unusable (illegal address, trap,
// illegal instruction, ...) carry a marker that IsStickyError() detects, and say so.
absl::Status CudaStatus(CUresult result, absl::string_view call);

// True for a status from an error after which the CUDA context is unusable and the process must
// be restarted to use the GPU again (the sandbox child's cue to exit).
bool IsStickyError(const absl::Status& status);

struct DeviceProperties {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int sm_count = 0;
  int64_t l2_cache_bytes = 0;
  int64_t total_memory_bytes = 0;
  int max_threads_per_block = 0;
  int64_t max_shared_memory_per_block_optin = 0;  // dynamic shared memory a kernel may opt into
  int driver_version = 0;                          // e.g. 13000 for CUDA 13.0

  // NVRTC's name of the architecture: "sm_90".
  std::string arch() const;
};

class Stream;

// Device memory, freed on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr address() const { return address_; }
  size_t size_bytes() const { return size_bytes_; }

  // Blocking copies of the whole buffer; `host` must hold size_bytes(). From pageable memory,
  // CopyFromHost may return before the data reaches the device (cuMemcpyHtoD returns once it is
  // staged), and work on a non-blocking stream is not ordered after it: a kernel launched there
  // right away can read the buffer's old contents. Use CopyFromHostAsync on the stream the
  // buffer's reader runs on.
  absl::Status CopyFromHost(const void* host, size_t bytes);
  absl::Status CopyToHost(void* host, size_t bytes) const;
  // A copy from host ordered on `stream`: work enqueued on `stream` after it reads the new
  // contents. From pageable memory, `host` is staged before the call returns and may then be
  // reused; from page-locked memory, `host` must stay unchanged until `stream` has reached the
  // copy.
  absl::Status CopyFromHostAsync(const void* host, size_t bytes, Stream& stream);
  // A copy to host ordered on `stream` (it waits for the stream's earlier work); returns once the
  // copy is enqueued, so synchronize `stream` before reading `host`.
  absl::Status CopyToHostAsync(void* host, size_t bytes, Stream& stream) const;

  // Copies all of `source` (which must be as large) into this buffer, ordered on `stream`.
  absl::Status CopyFromDeviceAsync(const DeviceBuffer& source, Stream& stream);

  // Fill every 4-, 2- or 1-byte word of the buffer with `pattern`, ordered on `stream`. The size
  // must be a multiple of the word size.
  absl::Status Fill32(uint32_t pattern, Stream& stream);
  absl::Status Fill16(uint16_t pattern, Stream& stream);
  absl::Status Fill8(uint8_t pattern, Stream& stream);

  // The guard zones of a buffer from Device::AllocateGuarded: the bytes of its allocation just
  // before address() and from address() + size_bytes() on, which no tensor owns, so that a kernel
  // writing a little outside its tensor changes them instead of faulting or corrupting a
  // neighbour. Both zero for a buffer from Allocate.
  size_t guard_before_bytes() const { return guard_before_; }
  size_t guard_after_bytes() const { return guard_after_; }
  // Copies into and out of both guard zones, ordered on `stream`: `host` holds
  // guard_before_bytes() bytes for the zone before, then guard_after_bytes() for the zone after.
  // Like CopyToHostAsync, the copy out is complete only once `stream` is synchronized.
  absl::Status CopyGuardsFromHostAsync(const void* host, Stream& stream);
  absl::Status CopyGuardsToHostAsync(void* host, Stream& stream) const;

 private:
  friend class Device;
  DeviceBuffer(CUdeviceptr address, size_t size_bytes, size_t guard_before = 0,
               size_t guard_after = 0)
      : address_(address),
        size_bytes_(size_bytes),
        guard_before_(guard_before),
        guard_after_(guard_after) {}
  void Release();

  CUdeviceptr address_ = 0;  // the tensor's start; the allocation's is guard_before_ earlier
  size_t size_bytes_ = 0;
  size_t guard_before_ = 0;
  size_t guard_after_ = 0;
};

// Page-locked host memory (cuMemHostAlloc, usable from every context), freed on destruction. Copies
// between it and device memory run at the bus's speed; pageable memory goes through the driver's
// own staging copy first. Move-only.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size_bytes() const { return size_bytes_; }

 private:
  friend class Device;
  PinnedHostBuffer(std::byte* data, size_t size_bytes) : data_(data), size_bytes_(size_bytes) {}
  void Release();

  std::byte* data_ = nullptr;
  size_t size_bytes_ = 0;
};

class Graph;

// A non-blocking stream (no implicit synchronization with the legacy default stream). Move-only.
class Stream {
 public:
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream handle() const { return stream_; }
  absl::Status Synchronize();

  // Starts capturing what is enqueued on this stream into a graph, which runs nothing until it is
  // launched (CU_STREAM_CAPTURE_MODE_RELAXED: calls such as cuMemAlloc stay legal meanwhile;
  // synchronizing the stream does not). Work enqueued on other streams runs as usual, unless
  // that stream waits on an event recorded here during the capture: it then joins the capture.
  absl::Status BeginCapture();
  // Ends the capture and instantiates what it recorded. FailedPrecondition when work forked from
  // the capture into another stream was never joined back into this one
  // (CUDA_ERROR_STREAM_CAPTURE_UNJOINED); a capture that a call invalidated gives that error.
  // The stream is out of capture mode afterwards either way.
  absl::StatusOr<Graph> EndCapture();

 private:
  friend class Device;
  explicit Stream(CUstream stream) : stream_(stream) {}
  CUstream stream_ = nullptr;
};

// Work captured from a stream (Stream::EndCapture), instantiated. Move-only; destroying it while a
// launch is in flight is safe (the driver frees it once the launch completes).
class Graph {
 public:
  // Enqueues the captured work on `stream`.
  absl::Status Launch(Stream& stream);

 private:
  friend class Stream;
  struct Destroy {
    void operator()(CUgraphExec exec) const;
  };
  explicit Graph(CUgraphExec exec) : exec_(exec) {}
  std::unique_ptr<CUgraphExec_st, Destroy> exec_;
};

// A timing event. Move-only.
class Event {
 public:
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  absl::Status Record(Stream& stream);
  absl::Status Synchronize();
  // Milliseconds between `start` and this event; both must have completed.
  absl::StatusOr<float> MillisecondsSince(const Event& start) const;

 private:
  friend class Device;
  explicit Event(CUevent event) : event_(event) {}
  CUevent event_ = nullptr;
};

struct LaunchShape {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamic_shared_bytes = 0;
};

// A kernel of a loaded module; valid while its Module lives.
class Kernel {
 public:
  // Enqueues the kernel on `stream`. `args` points at each parameter's value, in order (for a
  // pointer parameter, a pointer to a CUdeviceptr). Launch errors come back here; errors of the
  // running kernel come back at the next synchronization.
  absl::Status Launch(const LaunchShape& shape, absl::Span<void* const> args, Stream& stream) const;
  const std::string& name() const { return name_; }

 private:
  friend class Module;
  Kernel(CUfunction function, std::string name) : function_(function), name_(std::move(name)) {}
  CUfunction function_;
  std::string name_;
};

// A cubin loaded into the context. Move-only.
class Module {
 public:
  ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The kernel named `name` (the cubin's symbol: an extern "C" name or a lowered C++ name).
  absl::StatusOr<Kernel> GetKernel(absl::string_view name) const;

 private:
  friend class Device;
  explicit Module(CUmodule module) : module_(module) {}
  CUmodule module_ = nullptr;
};

// One GPU through its primary context, retained for the object's lifetime.
class Device {
 public:
  // Initializes the driver, retains device `ordinal`'s primary context and makes it current on
  // the calling thread. Unavailable when there is no usable driver or device.
  static absl::StatusOr<std::unique_ptr<Device>> Open(int ordinal = 0);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceProperties& properties() const { return properties_; }
  // Makes the context current on the calling thread.
  absl::Status MakeCurrent() const;
  // Waits for all work on every stream of the context; the place where a crashed kernel's sticky
  // error shows.
  absl::Status Synchronize() const;
  // Bytes of device memory free now.
  absl::StatusOr<int64_t> FreeMemoryBytes() const;

  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes) const;
  // `bytes` with guard zones around them (DeviceBuffer::guard_before_bytes): `guard_bytes` before
  // (a positive multiple of 256, so that address() keeps cuMemAlloc's 256-byte alignment), and
  // after, `guard_bytes` plus the padding up to the next multiple of 256.
  absl::StatusOr<DeviceBuffer> AllocateGuarded(size_t bytes, size_t guard_bytes) const;
  // Page-locked host memory; free it (destroy the buffer) while the device is open.
  absl::StatusOr<PinnedHostBuffer> AllocatePinned(size_t bytes) const;
  absl::StatusOr<Stream> CreateStream() const;
  absl::StatusOr<Event> CreateEvent() const;
  absl::StatusOr<Module> LoadModule(absl::string_view cubin) const;

 private:
  Device(CUdevice device, CUcontext context, DeviceProperties properties)
      : device_(device), context_(context), properties_(std::move(properties)) {}

  CUdevice device_;
  CUcontext context_;
  DeviceProperties properties_;
};

}  // namespace forge::gpu

#endif  // FORGE_WORKER_GPU_DEVICE_H_

#include "worker/library/host_launched.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status/status_macros.h"

namespace forge::library {
namespace {

constexpr int32_t kErrorCapacity = 1024;

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dynamic loader error";
}

absl::Status WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("writing the shared object to its memory file: ",
                                              std::strerror(errno)));
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

template <typename Fn>
absl::StatusOr<Fn> Symbol(void* handle, const char* name) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the shared object does not export ", name, " (host_launch_abi.h): ", DlError()));
  }
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostLaunchedObject>> HostLaunchedObject::Load(
    absl::string_view bytes) {
  if (bytes.size() < 4 || bytes.substr(0, 4) != "\x7f" "ELF") {
    return absl::InvalidArgumentError(
        absl::StrCat("a host-launched candidate's object must be an ELF shared object; got ",
                     bytes.size(), " bytes that are not"));
  }
  const int fd = memfd_create("forge-host-launched", MFD_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  auto fail = [fd](absl::Status status) {
    close(fd);
    return status;
  };
  if (absl::Status written = WriteAll(fd, bytes); !written.ok()) return fail(written);
  // The loader knows objects by name: one still loaded under this name would be returned instead.
  if (void* stale = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD); stale != nullptr) {
    dlclose(stale);
    return fail(absl::InternalError(absl::StrCat("an object named ", path, " is still loaded")));
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("dlopen of the host-launched candidate's shared object: ", DlError())));
  }
  auto entry_points = [&]() -> absl::StatusOr<std::unique_ptr<HostLaunchedObject>> {
    FORGE_ASSIGN_OR_RETURN(auto version, Symbol<codegen::HostAbiVersionFn>(
                                             handle, FORGE_HOST_ABI_VERSION_SYMBOL));
    FORGE_ASSIGN_OR_RETURN(auto workspace, Symbol<codegen::WorkspaceBytesFn>(
                                               handle, FORGE_WORKSPACE_BYTES_SYMBOL));
    FORGE_ASSIGN_OR_RETURN(auto launch,
                           Symbol<codegen::HostLaunchFn>(handle, FORGE_LAUNCH_SYMBOL));
    const int32_t abi_version = version();
    if (abi_version != codegen::kHostLaunchAbiVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat("the shared object was built for host-launch ABI version ", abi_version,
                       "; this worker runs version ", codegen::kHostLaunchAbiVersion));
    }
    return std::unique_ptr<HostLaunchedObject>(
        new HostLaunchedObject(fd, path, handle, workspace, launch, abi_version));
  };
  absl::StatusOr<std::unique_ptr<HostLaunchedObject>> object = entry_points();
  if (!object.ok()) {
    dlclose(handle);
    return fail(object.status());
  }
  return object;
}

HostLaunchedObject::~HostLaunchedObject() {
  dlclose(handle_);
  if (void* still = dlopen(path_.c_str(), RTLD_NOW | RTLD_NOLOAD); still != nullptr) {
    // Not unloadable (unique symbols mark it NODELETE): keep the name taken.
    dlclose(still);
    return;
  }
  close(fd_);
}

absl::StatusOr<int64_t> HostLaunchedObject::WorkspaceBytes(
    absl::Span<const int64_t> runtime_args) const {
  const int64_t bytes =
      workspace_bytes_(runtime_args.data(), static_cast<int32_t>(runtime_args.size()));
  if (bytes < 0) {
    return absl::OutOfRangeError(
        absl::StrCat("the host-launched object cannot run runtime_args [",
                     absl::StrJoin(runtime_args, ", "), "] (forge_workspace_bytes returned ",
                     bytes, ")"));
  }
  return bytes;
}

absl::Status HostLaunchedObject::Launch(absl::Span<const CUdeviceptr> buffers,
                                        absl::Span<const int64_t> runtime_args,
                                        CUdeviceptr workspace, int64_t workspace_bytes,
                                        CUstream stream) const {
  std::vector<void*> pointers(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    pointers[i] = reinterpret_cast<void*>(static_cast<uintptr_t>(buffers[i]));
  }
  char error[kErrorCapacity] = {};
  const int32_t status =
      launch_(pointers.data(), static_cast<int32_t>(pointers.size()), runtime_args.data(),
              static_cast<int32_t>(runtime_args.size()),
              reinterpret_cast<void*>(static_cast<uintptr_t>(workspace)), workspace_bytes,
              static_cast<void*>(stream), error, kErrorCapacity);
  if (status == 0) return absl::OkStatus();
  error[kErrorCapacity - 1] = '\0';
  return absl::InternalError(absl::StrCat("forge_launch of the host-launched candidate returned ",
                                          status, ": ", error[0] != '\0' ? error : "no message"));
}

absl::StatusOr<judge::CandidateLaunch> LoadHostLaunchedCandidate(
    const gpu::Device& device, std::shared_ptr<const HostLaunchedObject> object,
    std::vector<int64_t> runtime_args) {
  FORGE_ASSIGN_OR_RETURN(const int64_t workspace_bytes, object->WorkspaceBytes(runtime_args));
  std::shared_ptr<gpu::DeviceBuffer> workspace;
  if (workspace_bytes > 0) {
    FORGE_ASSIGN_OR_RETURN(gpu::DeviceBuffer buffer,
                           device.Allocate(static_cast<size_t>(workspace_bytes)));
    workspace = std::make_shared<gpu::DeviceBuffer>(std::move(buffer));
  }
  return judge::CandidateLaunch(
      [object = std::move(object), workspace, workspace_bytes,
       runtime_args = std::move(runtime_args)](gpu::Stream& stream,
                                               absl::Span<const CUdeviceptr> args) {
        return object->Launch(args, runtime_args, workspace ? workspace->address() : 0,
                              workspace_bytes, stream.handle());
      });
}

}  // namespace forge::library

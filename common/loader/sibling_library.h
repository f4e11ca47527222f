// Loading a shared library from the folder of another one.
//
// Some CUDA libraries open a companion library by name at run time: NVRTC its builtins
// (libnvrtc-builtins.so.<major>.<minor>), CUPTI its profiler hosts (libnvperf_host.so). Where the
// toolkit's folder is not in the loader's search path (no ld.so.conf entry, as on a fresh Debian
// with the toolkit at /usr/local/cuda), that lookup fails although the file sits right beside the
// library that asks for it. Loading the companion first, by full path, makes the later lookup by
// name find the already loaded copy.
#ifndef FORGE_COMMON_LOADER_SIBLING_LIBRARY_H_
#define FORGE_COMMON_LOADER_SIBLING_LIBRARY_H_

#include "absl/strings/string_view.h"

namespace forge {

// Loads `file_name` (RTLD_NOW | RTLD_GLOBAL) from the folder of the shared object that defines
// `symbol`. Returns false when that object or the file cannot be found or loaded; callers leave
// the error to the library that needs the companion, which reports it in its own words.
bool LoadSiblingLibrary(const void* symbol, absl::string_view file_name);

}  // namespace forge

#endif  // FORGE_COMMON_LOADER_SIBLING_LIBRARY_H_

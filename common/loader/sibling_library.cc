#include "common/loader/sibling_library.h"

#include <dlfcn.h>

#include <filesystem>
#include <string>

namespace forge {

bool LoadSiblingLibrary(const void* symbol, absl::string_view file_name) {
  Dl_info info;
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return false;
  const std::filesystem::path path =
      std::filesystem::path(info.dli_fname).parent_path() / std::string(file_name);
  return dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) != nullptr;
}

}  // namespace forge

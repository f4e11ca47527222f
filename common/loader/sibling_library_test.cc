#include "common/loader/sibling_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace forge {
namespace {

const void* LibcSymbol() { return reinterpret_cast<const void*>(&std::fputs); }

std::string FolderOf(const void* symbol) {
  Dl_info info;
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string path = info.dli_fname;
  return path.substr(0, path.rfind('/'));
}

TEST(LoadSiblingLibraryTest, LoadsAFileBesideTheLibraryThatDefinesTheSymbol) {
  // libm always sits beside libc.
  ASSERT_FALSE(FolderOf(LibcSymbol()).empty());
  EXPECT_TRUE(LoadSiblingLibrary(LibcSymbol(), "libm.so.6"));
  EXPECT_NE(dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(LoadSiblingLibraryTest, MissingFilesAndUnknownSymbolsAreFalse) {
  EXPECT_FALSE(LoadSiblingLibrary(LibcSymbol(), "libforge-no-such-library.so"));
  static const int not_in_a_shared_library_of_its_own = 0;
  // A symbol of the test executable itself: its folder has no libm.
  EXPECT_FALSE(LoadSiblingLibrary(&not_in_a_shared_library_of_its_own, "libm.so.6"));
}

}  // namespace
}  // namespace forge

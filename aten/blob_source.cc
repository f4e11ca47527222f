// The blob sources of the reference interpreter; kept apart from reference.cc so that this code
// compiles without LibTorch headers.
#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/digest/sha256.h"
#include "common/status/status_macros.h"
#include "aten/aten.h"

namespace forge::aten {

absl::StatusOr<std::string> DirectoryBlobSource::Read(absl::string_view sha256_hex) const {
  // Parsing first keeps a malformed name from reaching the file system as a path.
  FORGE_ASSIGN_OR_RETURN(Digest digest, Digest::FromHex(sha256_hex));
  const std::filesystem::path path = directory_ / digest.ToHex();
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::NotFoundError(absl::StrCat("blob ", digest.ToHex(), ": cannot open ", path.string()));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) {
    return absl::DataLossError(absl::StrCat("blob ", digest.ToHex(), ": read error on ", path.string()));
  }
  return std::move(contents).str();
}

absl::StatusOr<std::string> InMemoryBlobSource::Read(absl::string_view sha256_hex) const {
  auto it = blobs_.find(sha256_hex);
  if (it == blobs_.end()) {
    return absl::NotFoundError(absl::StrCat("blob ", sha256_hex, " is not in the in-memory source"));
  }
  return it->second;
}

}  // namespace forge::aten

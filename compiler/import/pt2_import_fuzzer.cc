// libFuzzer target over the .pt2 importer (ImportPt2FromBytes): LibTorch's zip reader, the JSON
// parser and the program converter with its functionalization. An input is a whole archive (zip,
// as the fixture seeds are) or, so that mutations reach the JSON layer without breaking the zip's
// CRCs, the text of models/model.json, which is wrapped into an archive of its own.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "compiler/import/pt2_archive.h"
#include "compiler/import/pt2_importer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  if (!absl::StartsWith(input, "PK")) {
    auto archive = forge::pt2::WriteArchive(
        {{"archive_format", "pt2"}, {"archive_version", "0"}, {"models/model.json", input}});
    if (!archive.ok()) return 0;
    input = *std::move(archive);
  }
  // Bounds that keep one input to milliseconds and within the fuzzer's memory limit.
  forge::ImportOptions options;
  options.max_archive_bytes = std::uint64_t{64} << 20;
  options.max_nodes = 10'000;
  options.max_tensor_elements = std::int64_t{1} << 24;
  // Errors are expected; crashes, leaks and memory errors are what the fuzzer looks for.
  (void)forge::ImportPt2FromBytes(std::move(input), "fuzz", options);
  return 0;
}

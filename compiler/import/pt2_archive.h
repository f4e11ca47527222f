// Read access to the records of a torch.export archive (a zip file), through LibTorch's own reader
// (caffe2::serialize::PyTorchStreamReader), and writing archives with LibTorch's writer. Internal to the importer: this header is LibTorch-free,
// the reader lives in pt2_archive.cc.
#ifndef FORGE_COMPILER_IMPORT_PT2_ARCHIVE_H_
#define FORGE_COMPILER_IMPORT_PT2_ARCHIVE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace forge::pt2 {

class Pt2Archive {
 public:
  // Opens the archive held in `bytes`. `max_record_bytes` bounds the uncompressed size of any
  // record read later, so that a small compressed record cannot expand without limit.
  // InvalidArgument when the bytes are not a zip archive LibTorch can read.
  static absl::StatusOr<std::unique_ptr<Pt2Archive>> Open(std::string bytes,
                                                          std::uint64_t max_record_bytes);
  ~Pt2Archive();
  Pt2Archive(const Pt2Archive&) = delete;
  Pt2Archive& operator=(const Pt2Archive&) = delete;

  // Record names relative to the archive's root folder (e.g. "models/model.json"), sorted.
  const std::vector<std::string>& record_names() const { return record_names_; }
  bool HasRecord(absl::string_view name) const;
  // The uncompressed bytes of record `name`. NotFound, ResourceExhausted past the size limit, or
  // DataLoss when the record cannot be decompressed (CRC mismatch, truncation).
  absl::StatusOr<std::string> ReadRecord(absl::string_view name) const;

 private:
  struct Reader;
  Pt2Archive(std::unique_ptr<Reader> reader, std::vector<std::string> record_names,
             std::uint64_t max_record_bytes);

  std::unique_ptr<Reader> reader_;
  std::vector<std::string> record_names_;
  std::uint64_t max_record_bytes_;
};

// An archive in LibTorch's zip layout (the writer torch.export.save uses) holding `records` under
// the root folder "archive/", plus LibTorch's own ".data/" records (records named ".data/..." in
// `records` are skipped). Tests and the fuzz driver build variants of real archives with it.
absl::StatusOr<std::string> WriteArchive(
    const std::vector<std::pair<std::string, std::string>>& records);

}  // namespace forge::pt2

#endif  // FORGE_COMPILER_IMPORT_PT2_ARCHIVE_H_

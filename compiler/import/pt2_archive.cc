#include "compiler/import/pt2_archive.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "caffe2/serialize/inline_container.h"
#include "caffe2/serialize/read_adapter_interface.h"
#include "c10/util/Exception.h"

namespace forge::pt2 {
namespace {

// Serves the zip reader from bytes already in memory.
class MemoryReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MemoryReadAdapter(std::string bytes) : bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    const size_t available = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, available);
    return available;
  }

 private:
  std::string bytes_;
};

// LibTorch's errors carry a C++ backtrace; the first line says what went wrong.
std::string ErrorText(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    std::string text = c10_error->what_without_backtrace();
    return text.substr(0, text.find('\n'));
  }
  return error.what();
}

}  // namespace

struct Pt2Archive::Reader {
  explicit Reader(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> adapter)
      : stream_reader(std::move(adapter)) {}
  // PyTorchStreamReader serializes access with its own lock, but its methods are not const.
  mutable caffe2::serialize::PyTorchStreamReader stream_reader;
};

Pt2Archive::Pt2Archive(std::unique_ptr<Reader> reader, std::vector<std::string> record_names,
                       std::uint64_t max_record_bytes)
    : reader_(std::move(reader)),
      record_names_(std::move(record_names)),
      max_record_bytes_(max_record_bytes) {}

Pt2Archive::~Pt2Archive() = default;

absl::StatusOr<std::unique_ptr<Pt2Archive>> Pt2Archive::Open(std::string bytes,
                                                            std::uint64_t max_record_bytes) {
  try {
    auto reader = std::make_unique<Reader>(std::make_shared<MemoryReadAdapter>(std::move(bytes)));
    std::vector<std::string> names = reader->stream_reader.getAllRecords();
    std::sort(names.begin(), names.end());
    return std::unique_ptr<Pt2Archive>(
        new Pt2Archive(std::move(reader), std::move(names), max_record_bytes));
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a readable torch.export archive (zip): ", ErrorText(error)));
  }
}

bool Pt2Archive::HasRecord(absl::string_view name) const {
  return std::binary_search(record_names_.begin(), record_names_.end(), name);
}

absl::StatusOr<std::string> Pt2Archive::ReadRecord(absl::string_view name) const {
  if (!HasRecord(name)) {
    return absl::NotFoundError(absl::StrCat("archive has no record '", name, "'"));
  }
  const std::string record(name);
  try {
    const size_t size = reader_->stream_reader.getRecordSize(record);
    if (size > max_record_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("record '", name, "' holds ", size, " bytes, over the limit of ",
                       max_record_bytes_, " (ImportOptions::max_archive_bytes)"));
    }
    std::string data(size, '\0');
    const size_t read = reader_->stream_reader.getRecord(record, data.data(), size);
    if (read != size) {
      return absl::DataLossError(
          absl::StrCat("record '", name, "': read ", read, " of ", size, " bytes"));
    }
    return data;
  } catch (const std::exception& error) {
    return absl::DataLossError(
        absl::StrCat("record '", name, "' cannot be read: ", ErrorText(error)));
  }
}

absl::StatusOr<std::string> WriteArchive(
    const std::vector<std::pair<std::string, std::string>>& records) {
  std::string archive;
  try {
    caffe2::serialize::PyTorchStreamWriter writer([&archive](const void* data, size_t size) {
      archive.append(static_cast<const char*>(data), size);
      return size;
    });
    for (const auto& [name, bytes] : records) {
      if (name.rfind(".data/", 0) == 0) continue;
      writer.writeRecord(name, bytes.data(), bytes.size());
    }
    writer.writeEndOfFile();
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("cannot write archive: ", ErrorText(error)));
  }
  return archive;
}

}  // namespace forge::pt2

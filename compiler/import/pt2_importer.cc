#include "compiler/import/pt2_importer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status/status_macros.h"
#include "compiler/import/exported_program.h"
#include "compiler/import/pt2_archive.h"

namespace forge {
namespace {

// Archive layout of torch/csrc/export/pt2_archive_constants.h (archive version 0).
constexpr absl::string_view kArchiveFormatRecord = "archive_format";
constexpr absl::string_view kArchiveFormat = "pt2";
constexpr absl::string_view kArchiveVersionRecord = "archive_version";
constexpr absl::string_view kArchiveVersion = "0";
constexpr absl::string_view kByteOrderRecord = "byteorder";
constexpr absl::string_view kModelsDir = "models/";
constexpr absl::string_view kJsonSuffix = ".json";

absl::Status CheckRecordText(const pt2::Pt2Archive& archive, absl::string_view record,
                             absl::string_view expected) {
  FORGE_ASSIGN_OR_RETURN(std::string text, archive.ReadRecord(record));
  if (absl::StripAsciiWhitespace(text) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(record, ": is '", absl::CHexEscape(text.substr(0, 64)), "', expected '",
                     expected, "'"));
  }
  return absl::OkStatus();
}

// The program's name: the `<name>` of models/<name>.json.
absl::StatusOr<std::string> ModelName(const pt2::Pt2Archive& archive,
                                      const ImportOptions& options) {
  std::vector<std::string> names;
  for (const std::string& record : archive.record_names()) {
    absl::string_view name = record;
    if (absl::ConsumePrefix(&name, kModelsDir) && absl::ConsumeSuffix(&name, kJsonSuffix) &&
        !absl::StrContains(name, '/')) {
      names.emplace_back(name);
    }
  }
  if (!options.model_name.empty()) {
    if (std::find(names.begin(), names.end(), options.model_name) == names.end()) {
      return absl::NotFoundError(absl::StrCat("archive has no models/", options.model_name,
                                              ".json (it has: ", absl::StrJoin(names, ", "), ")"));
    }
    return options.model_name;
  }
  if (names.empty()) {
    return absl::InvalidArgumentError(
        "archive has no program: models/<name>.json is missing (not a torch.export archive?)");
  }
  if (names.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("archive holds several programs (", absl::StrJoin(names, ", "),
                     "): choose one with ImportOptions::model_name"));
  }
  return names.front();
}

}  // namespace

absl::StatusOr<ImportedModel> ImportPt2FromBytes(std::string bytes, absl::string_view name,
                                                 const ImportOptions& options) {
  if (bytes.size() > options.max_archive_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("archive of ", bytes.size(), " bytes is over the limit of ",
                     options.max_archive_bytes, " (ImportOptions::max_archive_bytes)"));
  }
  FORGE_ASSIGN_OR_RETURN(std::unique_ptr<pt2::Pt2Archive> archive,
                         pt2::Pt2Archive::Open(std::move(bytes), options.max_archive_bytes));
  FORGE_RETURN_IF_ERROR(CheckRecordText(*archive, kArchiveFormatRecord, kArchiveFormat));
  FORGE_RETURN_IF_ERROR(CheckRecordText(*archive, kArchiveVersionRecord, kArchiveVersion));
  // Raw tensor files are in the writer's byte order; Forge's blobs are little-endian.
  if (archive->HasRecord(kByteOrderRecord)) {
    FORGE_RETURN_IF_ERROR(CheckRecordText(*archive, kByteOrderRecord, "little"));
  }
  FORGE_ASSIGN_OR_RETURN(std::string model_name, ModelName(*archive, options));

  pt2::ProgramRecords records;
  records.program = absl::StrCat(kModelsDir, model_name, kJsonSuffix);
  const std::string weights_config = absl::StrCat("data/weights/", model_name, "_weights_config.json");
  const std::string constants_config =
      absl::StrCat("data/constants/", model_name, "_constants_config.json");
  if (archive->HasRecord(weights_config)) records.weights_config = weights_config;
  if (archive->HasRecord(constants_config)) records.constants_config = constants_config;

  ImportedModel model;
  FORGE_RETURN_IF_ERROR(pt2::ConvertExportedProgram(
      records, [&archive](absl::string_view record) { return archive->ReadRecord(record); },
      options, model));
  forge::v1::ModelMetadata* metadata = model.graph.mutable_metadata();
  metadata->set_name(std::string(name));
  metadata->set_source_format(forge::v1::SOURCE_FORMAT_PT2_ARCHIVE);
  metadata->add_notes("shapes specialized to the example inputs");
  return model;
}

absl::StatusOr<ImportedModel> ImportPt2(const std::string& path, const ImportOptions& options) {
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", error.message()));
  }
  if (size > options.max_archive_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": ", size, " bytes, over the limit of ", options.max_archive_bytes,
                     " (ImportOptions::max_archive_bytes)"));
  }
  std::ifstream file(path, std::ios::binary);
  std::string bytes(size, '\0');
  if (!file.read(bytes.data(), static_cast<std::streamsize>(size))) {
    return absl::DataLossError(absl::StrCat(path, ": cannot read ", size, " bytes"));
  }
  auto model = ImportPt2FromBytes(std::move(bytes), std::filesystem::path(path).stem().string(),
                                  options);
  if (!model.ok()) return Annotate(model.status(), path);
  return model;
}

}  // namespace forge

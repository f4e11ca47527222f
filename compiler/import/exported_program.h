// Converts the JSON of a serialized ExportedProgram (torch/_export/serde/schema.py, schema 8.x)
// and its weight payloads into Forge's IR. Internal to the importer; pt2_importer.cc finds the
// records, this file interprets them.
#ifndef FORGE_COMPILER_IMPORT_EXPORTED_PROGRAM_H_
#define FORGE_COMPILER_IMPORT_EXPORTED_PROGRAM_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "compiler/import/pt2_importer.h"

namespace forge::pt2 {

// Reads one record of the archive by its name relative to the archive root.
using RecordReader = std::function<absl::StatusOr<std::string>(absl::string_view record)>;

// The records that make up one program of an archive.
struct ProgramRecords {
  std::string program;           // e.g. "models/model.json"
  std::string weights_config;    // e.g. "data/weights/model_weights_config.json"; "" if absent
  std::string constants_config;  // e.g. "data/constants/model_constants_config.json"; "" if absent
};

// Fills `model` (graph and blobs; the caller sets the metadata's name and source) from the
// program's records.
absl::Status ConvertExportedProgram(const ProgramRecords& records, const RecordReader& read_record,
                                    const ImportOptions& options, ImportedModel& model);

}  // namespace forge::pt2

#endif  // FORGE_COMPILER_IMPORT_EXPORTED_PROGRAM_H_

// The version of this build of Forge, as the binaries print it (`forge --version`,
// `forge-coordinator --version`, `forge-worker --version`) and the CLI's JSON outputs carry it.
//
// The version is CMake's PROJECT_VERSION ("0.1.0"); the commit is the git commit the source tree
// was at when the build was configured (empty when it is not a git checkout or git is missing; a
// commit made after configuring shows only after the next configure). Binaries that generate
// kernels add their generator versions (codegen::GeneratorVersions()), which decide which workers
// may take which candidates.
#ifndef FORGE_COMMON_VERSION_VERSION_H_
#define FORGE_COMMON_VERSION_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace forge {

// "0.1.0".
absl::string_view ProjectVersion();

// The commit, 12 hex digits; empty when unknown.
absl::string_view GitCommit();

// The version with the commit as semver build metadata: "0.1.0+e50d3ce1a2b3", or "0.1.0" when the
// commit is unknown. What the JSON outputs' "version" field holds.
std::string FullVersion();

struct VersionInfo {
  std::string program;     // "forge", "forge-coordinator", ...
  std::string generators;  // codegen::GeneratorVersions(); empty: not shown
};

// For --version:
//   forge-worker 0.1.0 (commit e50d3ce1a2b3)
//   generators: pointwise-1+reduction-4+...
// "(commit unknown)" without a commit; no generators line without generators.
std::string VersionText(const VersionInfo& info);

// For --version --json, one line:
//   {"program": "forge", "version": "0.1.0+e50d3ce1a2b3", "project_version": "0.1.0",
//    "commit": "e50d3ce1a2b3", "generators": "pointwise-1+..."}
std::string VersionJson(const VersionInfo& info);

}  // namespace forge

#endif  // FORGE_COMMON_VERSION_VERSION_H_

#include "common/version/version.h"

#include "absl/strings/str_cat.h"
#include "common/text/json.h"

namespace forge {
namespace internal_version {
extern const absl::string_view kProjectVersion;
extern const absl::string_view kGitCommit;
}  // namespace internal_version

absl::string_view ProjectVersion() { return internal_version::kProjectVersion; }

absl::string_view GitCommit() { return internal_version::kGitCommit; }

std::string FullVersion() {
  if (GitCommit().empty()) return std::string(ProjectVersion());
  return absl::StrCat(ProjectVersion(), "+", GitCommit());
}

std::string VersionText(const VersionInfo& info) {
  std::string text = absl::StrCat(info.program, " ", ProjectVersion(), " (commit ",
                                  GitCommit().empty() ? "unknown" : GitCommit(), ")\n");
  if (!info.generators.empty()) absl::StrAppend(&text, "generators: ", info.generators, "\n");
  return text;
}

std::string VersionJson(const VersionInfo& info) {
  return absl::StrCat("{\"program\": ", JsonString(info.program),
                      ", \"version\": ", JsonString(FullVersion()),
                      ", \"project_version\": ", JsonString(ProjectVersion()),
                      ", \"commit\": ", JsonString(GitCommit()),
                      ", \"generators\": ", JsonString(info.generators), "}\n");
}

}  // namespace forge

// The start of a daemon's main (forge-coordinator, forge-worker): the standard flags, then the
// config.
//
//   --help, -h   prints `about`, a blank line and the schema's keys (ConfigSchema::HelpText)
//   --version    prints `version_text` (common/version: VersionText)
// Either ends the program with exit code 0. Otherwise the config is loaded as
// Config::LoadWithConfigFile does (flags > FORGE_* environment > the --config file > defaults);
// its warnings (deprecated spellings) go to `err`, and a config that does not load is printed to
// `err` and ends the program with exit code 2, the daemons' code for a bad command line.
#ifndef FORGE_COMMON_CONFIG_PROGRAM_H_
#define FORGE_COMMON_CONFIG_PROGRAM_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace forge {

struct ProgramInfo {
  std::string about;         // e.g. "forge-worker: the Forge GPU worker daemon."
  std::string version_text;  // what --version prints, with its final newline
};

// The loaded config, or nullopt when the program must exit with `*exit_code` (help, version, a
// bad config). `schema` must declare the string key "config".
std::optional<Config> LoadProgramConfig(const ConfigSchema& schema, std::vector<std::string> args,
                                        const ProgramInfo& info, std::ostream& out,
                                        std::ostream& err, int* exit_code);

}  // namespace forge

#endif  // FORGE_COMMON_CONFIG_PROGRAM_H_

#include "common/config/program.h"

#include <utility>

namespace forge {

std::optional<Config> LoadProgramConfig(const ConfigSchema& schema, std::vector<std::string> args,
                                        const ProgramInfo& info, std::ostream& out,
                                        std::ostream& err, int* exit_code) {
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "--help" || arg == "-h") {
      out << info.about << "\n\n" << schema.HelpText();
      *exit_code = 0;
      return std::nullopt;
    }
    if (arg == "--version") {
      out << info.version_text;
      *exit_code = 0;
      return std::nullopt;
    }
  }
  absl::StatusOr<Config> config = Config::LoadWithConfigFile(schema, std::move(args));
  if (!config.ok()) {
    err << config.status().message() << "\n";
    *exit_code = 2;
    return std::nullopt;
  }
  for (const std::string& warning : config->warnings()) err << warning << "\n";
  return *std::move(config);
}

}  // namespace forge

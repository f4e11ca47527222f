// The forge command line: its commands, their flags and help, and the run of one command line.
// main.cc only hands argv to RunForge.
//
//   forge COMMAND [ARGS...]       run a command (inspect, predict, submit, watch, status, jobs,
//                                 workers, results, cancel)
//   forge help [COMMAND]          the overview, or a command's help (same as forge COMMAND --help)
//   forge version [--json]        the build's version (also forge --version [--json])
//
// Each command's flags are keys of a ConfigSchema (common/config), so they parse like the daemons'
// flags: typed values, one error format, "did you mean" for a misspelt flag, the short flag -o and
// repeatable flags (--label, --state). A command's own flags are read from the command line only;
// the remote commands add the connection settings (connection.h), which also come from FORGE_*
// variables and the config file. A misspelt command gets a suggestion too:
//   forge: unknown command 'sumbit' (did you mean 'submit'?)
// Usage errors exit with code 2 (exit_code.h).
#ifndef FORGE_CLIENT_FORGE_CLI_H_
#define FORGE_CLIENT_FORGE_CLI_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace forge::client {

// One command line, read: the command to run with its flags and positional arguments.
struct CommandLine {
  std::string command;            // its name, e.g. "submit"
  std::vector<std::string> args;  // the arguments after the name, as given
  Config config;                  // the flags of the command (and the connection's, for remote
                                  // commands; from flags and environment, not yet the config file)
};

// What reading a command line gave: a command to run, or an exit code and what to print instead
// (help, the version, a usage error).
struct ParsedCommandLine {
  std::optional<CommandLine> command_line;  // set: run it
  int exit_code = 0;                        // otherwise: exit with this code
  std::string out;                          // to print on stdout
  std::string err;  // to print on stderr; with a command to run, the config's warnings
};

// Reads `args` (argv without the program name); `environment` as for Config::Load (unset: this
// process's).
ParsedCommandLine ParseCommandLine(
    const std::vector<std::string>& args,
    const std::optional<std::vector<std::string>>& environment = std::nullopt);

// Reads and runs a command line, printing on `out` and `err`; returns the exit code. The live view
// of watch and submit --wait is drawn only when `out` is std::cout on a terminal.
int RunForge(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The names of the commands, in the order forge --help lists them.
std::vector<std::string> CommandNames();

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_CLI_H_

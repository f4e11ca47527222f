// The forge CLI's exit codes, one table for every command (listed by `forge --help` and README.md).
#ifndef FORGE_CLIENT_FORGE_EXIT_CODE_H_
#define FORGE_CLIENT_FORGE_EXIT_CODE_H_

#include "absl/status/status.h"

namespace forge::client {

enum ExitCode : int {
  kExitOk = 0,
  kExitJobUnsuccessful = 1,  // --wait / watch: a job FAILED or was CANCELLED
  kExitUsage = 2,            // bad command line or connection settings
  kExitUnreachable = 3,      // no answer from the coordinator (UNAVAILABLE, DEADLINE_EXCEEDED)
  kExitNotFound = 4,         // no such job, model file or GPU name
  kExitError = 5,            // any other error
};

// The exit code of a command that failed with `status` (kExitOk for OK).
inline int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnreachable;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    default:
      return kExitError;
  }
}

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_EXIT_CODE_H_

// Test support: child processes (real servers such as redis-server) and free loopback ports.
#ifndef FORGE_TESTS_SUPPORT_SUBPROCESS_H_
#define FORGE_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace forge::testing {

// The path of a tool a test runs: $env_var when set, else the first `name` on PATH; empty when
// neither exists.
std::string FindTool(const std::string& env_var, const std::string& name);

// A loopback TCP port that was free a moment ago (bound to port 0 and released).
int PickFreePort();

// Blocks until something accepts TCP connections on 127.0.0.1:port, or the timeout passes.
bool WaitForPort(int port, std::chrono::milliseconds timeout);

// A child process started with execv; killed (SIGKILL) when destroyed if still running.
class Subprocess {
 public:
  // Starts argv[0] (a path) with the given arguments. stdout/stderr go to log_path when set.
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::string& log_path = "");
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Sends the signal and reaps the child; returns its wait status.
  int Kill(int signal);
  // Waits for the child to exit on its own; returns its wait status, or -1 after the timeout.
  int Wait(std::chrono::milliseconds timeout);

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

// A fresh directory under $TMPDIR (or /tmp), removed with its contents when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace forge::testing

#endif  // FORGE_TESTS_SUPPORT_SUBPROCESS_H_

// The worker daemon's lease loop: registers with the coordinator's WorkerService, then keeps every
// GPU lane fed with leased candidates and reports their results.
//
// Pipeline per lane (one Executor per GPU; an emulated GPU is a virtual lane):
//   Lease (sized to the lane's share of the compile threads) -> queued
//   -> compile threads: Executor::Prepare (generate + NVRTC), any lane's work, many at once
//   -> ready -> the lane's thread: Executor::Execute (judge + time, or predict), one at a time
//   -> outbox -> Report, per lease, a few results at a time or after report_delay.
// A lane asks for more when half of its pipeline has drained, so compiles overlap the GPU's work
// and Lease round trips stay off the critical path.
//
// Lease semantics assumed of the coordinator (forge.v1.WorkerService):
//  - a lease's deadline is taken as the time the Lease call was sent plus duration_ms, and every
//    heartbeat the coordinator answers renews the leases it named and did not cancel (deadline =
//    the heartbeat's send time plus the lease duration), as the coordinator does;
//    candidates not started by then are dropped silently (the coordinator re-queues them), and
//    results still unreported then are logged and dropped;
//  - results of one lease may come in several Report calls, each result exactly once; a Report
//    that fails with UNAVAILABLE or DEADLINE_EXCEEDED is retried with backoff (the same results);
//  - a lease named in HeartbeatResponse.cancelled_lease_ids is dropped: its unstarted candidates
//    are discarded, in-flight ones finish unreported, and its pending results are not sent;
//  - HeartbeatResponse.register_again, or NOT_FOUND from Lease (the coordinator does not know the
//    worker id), makes the worker register again, asking for its current id;
//  - an empty LeaseResponse is followed by a wait of retry_after_ms (at least min_backoff).
// A candidate the worker cannot evaluate (its GPU's sandbox unavailable) is given back through
// ReportRequest.returned_candidate_digests, as are unstarted candidates at shutdown.
//
// Stop(): no more leases; unstarted candidates are given back at once; candidates already being
// compiled or executed finish within shutdown_grace and are reported (what is still running then
// is given back too); the last reports get report_grace; then Run returns.
#ifndef FORGE_WORKER_DAEMON_WORKER_DAEMON_H_
#define FORGE_WORKER_DAEMON_WORKER_DAEMON_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/metrics/metrics.h"
#include "grpcpp/security/credentials.h"
#include "worker/daemon/executor.h"

namespace forge::daemon {

struct WorkerDaemonOptions {
  // The coordinator's WorkerService, "host:port".
  std::string coordinator;
  // How to reach it (TLS, client certificate, the worker's token: common/tls); null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // The id to ask for (a restarted daemon reuses its old one); empty: the coordinator picks.
  std::string worker_id;
  std::string hostname;
  // Threads that generate and compile ahead of the lanes; the compile pool should have as many.
  int compile_threads = 2;
  // Most candidates per Lease call; 0: the coordinator's max_candidates_per_lease alone.
  int max_candidates_per_lease = 0;
  // A result waits at most report_delay for others of its lease to share a Report call, and is
  // sent at once when report_batch results of its lease are waiting.
  absl::Duration report_delay = absl::Milliseconds(200);
  int report_batch = 8;
  // Deadline of each call to the coordinator.
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Waits between failed calls (and the channel's reconnect attempts), doubling up to the maximum.
  absl::Duration min_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // Heartbeat interval until the coordinator's RegisterResponse sets one.
  absl::Duration default_heartbeat_interval = absl::Seconds(5);
  // After Stop: time for in-flight candidates to finish, then for the last reports.
  absl::Duration shutdown_grace = absl::Seconds(10);
  absl::Duration report_grace = absl::Seconds(5);
  // A task whose inputs and outputs take at least this many bytes is owned by the first GPU lane
  // that queues one of its candidates, and its later candidates run there while that lane is
  // available: each lane's sandbox keeps its own draws, and a large task's first candidate (inputs
  // drawn, float64 references computed) took up to a minute on the H200 (2026-11-30), paid again
  // by every lane that judged the task. 0: every task; negative: none.
  int64_t owned_task_bytes = int64_t{32} << 20;
};

// Counters and time per stage since the daemon started, for tests and benchmarks.
struct WorkerStats {
  int64_t registrations = 0;
  int64_t leases = 0;             // non-empty leases received
  int64_t candidates_leased = 0;
  int64_t measured = 0;           // evaluations that gave a measurement
  int64_t failed = 0;             // evaluations that gave a failure
  int64_t returned = 0;           // candidates given back unevaluated
  int64_t dropped = 0;            // outcomes neither reported nor given back (lease cancelled,
                                  // expired, or a report refused for good)
  int64_t rejected = 0;           // results the coordinator refused (rejected_candidate_digests)
  int64_t rpc_errors = 0;
  int64_t moved_to_owner = 0;     // candidates queued on their task's owning lane, not the leaser's
  std::array<double, kStageCount> stage_seconds{};  // summed over candidates, by Stage
  double rpc_seconds = 0;
};

class WorkerDaemon {
 public:
  // One lane per executor. The registry gets the forge_worker_* families (AlreadyExists when it
  // has them already) and must outlive the daemon.
  static absl::StatusOr<std::unique_ptr<WorkerDaemon>> Create(
      WorkerDaemonOptions options, std::vector<std::unique_ptr<Executor>> lanes,
      metrics::Registry* registry);
  ~WorkerDaemon();
  WorkerDaemon(const WorkerDaemon&) = delete;
  WorkerDaemon& operator=(const WorkerDaemon&) = delete;

  // Registers (retrying while the coordinator is unreachable), then leases, evaluates and
  // reports until Stop(), then drains as the header comment says and returns. Returns at once
  // when Stop comes before the coordinator was ever reached. Call once.
  void Run();
  // Makes Run wind down; callable from any thread, any number of times.
  void Stop();

  // The id the coordinator gave; empty before the first registration.
  std::string worker_id() const;
  WorkerStats stats() const;

 private:
  class Impl;
  explicit WorkerDaemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace forge::daemon

#endif  // FORGE_WORKER_DAEMON_WORKER_DAEMON_H_

// The CLI's link to a coordinator: where it is and how to authenticate (ConnectionSettings, from
// flags, FORGE_* variables and a config file), and JobClient, the JobService calls with deadlines
// and errors that name the coordinator's address, the RPC and the gRPC code.
//
// Settings (common/config; each source overrides the one before: default < file < env < flags):
//   server           --server HOST:PORT    FORGE_SERVER           the coordinator's address
//   tls              --tls                 FORGE_TLS              TLS instead of plaintext
//   tls-ca           --tls-ca PEM          FORGE_TLS_CA           roots to check it with
//   token            --token TOKEN         FORGE_TOKEN            sent as "authorization: Bearer"
//   connect-timeout  --connect-timeout 5s  FORGE_CONNECT_TIMEOUT  give up connecting after
//   timeout          --timeout 30s         FORGE_TIMEOUT          deadline of each unary call
// The file is --config PATH (FORGE_CONFIG), else $XDG_CONFIG_HOME/forge/config, else
// ~/.config/forge/config when it exists; e.g.
//   server = "forge.example.com:8443"
//   tls = true
#ifndef FORGE_CLIENT_FORGE_CONNECTION_H_
#define FORGE_CLIENT_FORGE_CONNECTION_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/config/config.h"
#include "forge/v1/service.pb.h"

namespace forge::client {

struct ConnectionSettings {
  std::string server;         // HOST:PORT
  std::string server_origin;  // where `server` came from, e.g. "env FORGE_SERVER"
  bool tls = false;
  std::string tls_ca_file;  // PEM roots; empty: the system's
  std::string token;        // bearer token; empty: none
  absl::Duration connect_timeout = absl::Seconds(5);
  absl::Duration call_timeout = absl::Seconds(30);
};

// Declares the connection keys (config, server, tls, tls-ca, token, connect-timeout, timeout) in
// `schema`; every remote command's schema has them.
void AddConnectionKeys(ConfigSchema& schema);

// Resolves the settings from the command line `args` (flags of `schema`, which has the connection
// keys, and positional arguments), `environment` ("NAME=value"; unset: this process's) and the
// config file. InvalidArgument when a value is malformed (naming key, value and origin), when
// --config names an unreadable file, or when no server is configured anywhere (saying where to set
// it).
absl::StatusOr<ConnectionSettings> LoadCommandConnectionSettings(
    const ConfigSchema& schema, const std::vector<std::string>& args,
    const std::optional<std::vector<std::string>>& environment = std::nullopt);

// LoadCommandConnectionSettings with a schema of the connection keys alone: `flags` are only
// connection flags ("--server=HOST:PORT" or "--server", "HOST:PORT").
absl::StatusOr<ConnectionSettings> LoadConnectionSettings(
    const std::vector<std::string>& flags,
    const std::optional<std::vector<std::string>>& environment = std::nullopt);

// The default config file: $XDG_CONFIG_HOME/forge/config, else $HOME/.config/forge/config; read
// from `environment` like LoadConnectionSettings.
std::string DefaultConfigPath(const std::optional<std::vector<std::string>>& environment);

// Yields the bytes of a blob to upload, by digest.
using BlobReader = std::function<absl::StatusOr<std::string>(const std::string& sha256)>;

// JobService (and CostModelService's one call) over one channel. Each unary call has the settings' call_timeout as its deadline;
// WatchJob has none (it lasts as long as the job). Errors keep the gRPC code as the absl code
// (UNAVAILABLE -> kUnavailable, NOT_FOUND -> kNotFound, ...) and read
//   "coordinator HOST:PORT: GetJob failed (NOT_FOUND): job "x" not found".
class JobClient {
 public:
  // Opens the channel and waits up to connect_timeout for it to connect. Unavailable, naming the
  // address and where it was configured, when it does not; InvalidArgument for an unreadable
  // tls-ca file.
  static absl::StatusOr<std::unique_ptr<JobClient>> Connect(const ConnectionSettings& settings);
  ~JobClient();
  JobClient(const JobClient&) = delete;
  JobClient& operator=(const JobClient&) = delete;

  const std::string& address() const;

  absl::StatusOr<forge::v1::MissingBlobsResponse> MissingBlobs(
      const forge::v1::MissingBlobsRequest& request);
  // Streams the header, then every blob of `upload_digests` in chunks of at most 1 MiB, read
  // through `read_blob` one blob at a time.
  absl::StatusOr<forge::v1::SubmitJobResponse> SubmitJob(
      const forge::v1::SubmitJobHeader& header, const std::vector<std::string>& upload_digests,
      const BlobReader& read_blob);
  absl::StatusOr<forge::v1::Job> GetJob(absl::string_view job_id);
  // Calls `on_event` for each event until the stream ends (the job ended: OK) or `on_event`
  // returns false (stops early: OK).
  absl::Status WatchJob(const forge::v1::WatchJobRequest& request,
                        const std::function<bool(const forge::v1::JobEvent&)>& on_event);
  absl::StatusOr<forge::v1::Job> CancelJob(absl::string_view job_id, absl::string_view reason);
  absl::StatusOr<forge::v1::ListJobsResponse> ListJobs(const forge::v1::ListJobsRequest& request);
  absl::StatusOr<forge::v1::GetResultsResponse> GetResults(
      const forge::v1::GetResultsRequest& request);
  absl::StatusOr<forge::v1::ListWorkersResponse> ListWorkers(
      const forge::v1::ListWorkersRequest& request);
  absl::StatusOr<forge::v1::PurgeResultsResponse> PurgeResults(
      const forge::v1::PurgeResultsRequest& request);
  absl::StatusOr<forge::v1::RevokeTokenResponse> RevokeToken(
      const forge::v1::RevokeTokenRequest& request);
  // forge.v1.CostModelService on the same channel: the learned performance model of a GPU.
  absl::StatusOr<forge::v1::GetCostModelResponse> GetCostModel(
      const forge::v1::GetCostModelRequest& request);

 private:
  struct Channel;
  explicit JobClient(std::unique_ptr<Channel> channel);
  std::unique_ptr<Channel> channel_;
};

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_CONNECTION_H_

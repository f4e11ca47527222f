// `forge admin`: the administrator's commands.
//   purge-results  removes cached results (of a worker identity, of none, of a candidate or a
//                  task) through PurgeResults; needs an admin token
//   mint-token     makes a signed token (common/signed_token) from the coordinator's token secret,
//                  locally: no coordinator is asked, the secret file is the authority; each token
//                  gets a random id
//   revoke-token   refuses one token (by its id, or the token itself, whose id is computed here)
//                  or every token of a worker identity, through RevokeToken; --restore undoes it
#ifndef FORGE_CLIENT_FORGE_ADMIN_H_
#define FORGE_CLIENT_FORGE_ADMIN_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/forge/connection.h"
#include "common/signed_token/signed_token.h"
#include "forge/v1/service.pb.h"

namespace forge::client {

// What was purged: the count and the tasks whose searches started over (or the response as JSON).
absl::StatusOr<std::string> PurgeResultsCommand(JobClient& client,
                                                const forge::v1::PurgeResultsRequest& request,
                                                bool json);

// What the revocation list holds after the change (or the response as JSON).
absl::StatusOr<std::string> RevokeTokenCommand(JobClient& client,
                                               const forge::v1::RevokeTokenRequest& request,
                                               bool json);

// The token for `claims` (with a fresh id) signed with the secret in `secret_file`, on a line of its own (for
// scripts: FORGE_TOKEN=$(forge admin mint-token ...)). InvalidArgument for an unknown role, a malformed cap, claims already expired
// or an unusable secret file.
absl::StatusOr<std::string> MintTokenCommand(const std::string& secret_file,
                                             TokenClaims claims);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_ADMIN_H_

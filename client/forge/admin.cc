#include "client/forge/admin.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/forge/proto_json.h"
#include "common/status/status_macros.h"
#include "server/auth/auth.h"

namespace forge::client {

absl::StatusOr<std::string> PurgeResultsCommand(JobClient& client,
                                                const forge::v1::PurgeResultsRequest& request,
                                                bool json) {
  FORGE_ASSIGN_OR_RETURN(forge::v1::PurgeResultsResponse response, client.PurgeResults(request));
  if (json) return ProtoJson(response, /*pretty=*/true);
  std::string out = absl::StrCat(response.results_removed(), " result(s) removed from the cache");
  if (response.compiled_objects_removed() > 0) {
    absl::StrAppend(&out, "; ", response.compiled_objects_removed(),
                    " compiled object(s) it published removed from the catalog");
  }
  if (response.identity_revoked()) {
    absl::StrAppend(&out, "; worker identity ", request.worker_identity(),
                    " revoked (forge admin revoke-token --identity ", request.worker_identity(),
                    " --restore lets it back)");
  }
  if (response.task_digests().empty()) return absl::StrCat(out, "\n");
  absl::StrAppend(&out, "; the searches of ", response.task_digests_size(),
                  " task(s) start over from the results left:\n");
  for (const std::string& task : response.task_digests()) absl::StrAppend(&out, "  ", task, "\n");
  return out;
}

absl::StatusOr<std::string> RevokeTokenCommand(JobClient& client,
                                               const forge::v1::RevokeTokenRequest& request,
                                               bool json) {
  FORGE_ASSIGN_OR_RETURN(forge::v1::RevokeTokenResponse response, client.RevokeToken(request));
  if (json) return ProtoJson(response, /*pretty=*/true);
  const std::string what = request.token_id().empty()
                               ? absl::StrCat("worker identity ", request.worker_identity())
                               : absl::StrCat("token ", request.token_id());
  return absl::StrCat(what, request.restore() ? " restored" : " revoked", "; ",
                      response.revoked_tokens(), " token(s) and ", response.revoked_identities(),
                      " worker identity(ies) revoked now\n");
}

absl::StatusOr<std::string> MintTokenCommand(const std::string& secret_file,
                                             TokenClaims claims) {
  // The coordinator's own reading of claims: what it would refuse is not minted.
  FORGE_RETURN_IF_ERROR(server::CallerFromClaims(claims).status());
  if (claims.expires <= absl::Now()) {
    return absl::InvalidArgumentError("the token would have expired already");
  }
  FORGE_ASSIGN_OR_RETURN(const std::string secret, ReadTokenSecret(secret_file));
  claims.id = MintTokenId();
  FORGE_ASSIGN_OR_RETURN(const std::string token, SignToken(secret, claims));
  return absl::StrCat(token, "\n");
}

}  // namespace forge::client

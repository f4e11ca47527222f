// Ids of jobs, leases and workers that stay unique when Redis loses its last writes.
//
// The coordinator numbers jobs, leases and workers with INCR counters in Redis (redis_keys.h).
// With `appendfsync everysec` a host crash can lose the last second of acknowledged writes, the
// counter increments included, so a plain "job-<n>" would be handed out again: to a second client
// while the first still holds it, or onto a record that survived. An id is therefore
// "<kind>-<n>-<r>": n the counter's number (the order people and listings see), r 16 hex digits
// from a random 64-bit value, so an id repeats only if both the number and 64 random bits do.
//
// IdNumber reads n back from such an id, and from the older "<kind>-<n>" form that stores
// written before this change still hold.
#ifndef FORGE_SERVER_IDS_H_
#define FORGE_SERVER_IDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace forge::server {

// "<kind>-<number>-<16 random hex digits>", e.g. "job-12-9f86d081884c7d65".
std::string NewId(absl::string_view kind, int64_t number);

// The number of a "<kind>-<n>" or "<kind>-<n>-<suffix>" id; nullopt for another form or kind.
std::optional<int64_t> IdNumber(absl::string_view id, absl::string_view kind);

}  // namespace forge::server

#endif  // FORGE_SERVER_IDS_H_

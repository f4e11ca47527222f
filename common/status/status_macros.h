// Early-return macros for absl::Status / absl::StatusOr, and a helper that adds context to an
// error. Abseil keeps its own versions of these macros internal, so Forge defines them once here.
#ifndef FORGE_COMMON_STATUS_STATUS_MACROS_H_
#define FORGE_COMMON_STATUS_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace forge {

// Returns `status` with "context: " in front of its message, keeping its code and payloads, so a
// caller can say what it was doing: Annotate(status, "loading config file forge.conf").
// An OK status stays OK.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload([&annotated](absl::string_view type_url, const absl::Cord& payload) {
    annotated.SetPayload(type_url, payload);
  });
  return annotated;
}

}  // namespace forge

// Evaluates `expr` (an absl::Status) once and returns it from the enclosing function if it is an
// error.
#define FORGE_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    if (::absl::Status forge_status_ = (expr); !forge_status_.ok()) { \
      return forge_status_;                                           \
    }                                                                 \
  } while (false)

// Evaluates `expr` (an absl::StatusOr<T>) once; on error returns its status from the enclosing
// function, otherwise moves the value into `lhs`, which may declare a variable:
//   FORGE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
//   FORGE_ASSIGN_OR_RETURN(existing_variable, Parse(text));
// Expands to several statements, so it cannot be the body of an unbraced if/else. A type with a
// comma in it needs an alias first (`using Pair = std::pair<int, int>;`).
#define FORGE_ASSIGN_OR_RETURN(lhs, expr) \
  FORGE_ASSIGN_OR_RETURN_IMPL_(FORGE_STATUS_CONCAT_(forge_statusor_, __COUNTER__), lhs, expr)

#define FORGE_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) {                                   \
    return std::move(statusor).status();                  \
  }                                                       \
  lhs = *std::move(statusor)

#define FORGE_STATUS_CONCAT_(a, b) FORGE_STATUS_CONCAT_INNER_(a, b)
#define FORGE_STATUS_CONCAT_INNER_(a, b) a##b

#endif  // FORGE_COMMON_STATUS_STATUS_MACROS_H_

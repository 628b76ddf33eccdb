#pragma once

#include <utility>

// Evaluates `expression` (an absl::StatusOr); returns its status from the calling function if it
// failed, or else moves its value into `lhs`, which may be a declaration.
#define BERTH_ASSIGN_OR_RETURN(lhs, expression) \
  BERTH_ASSIGN_OR_RETURN_IMPL(BERTH_STATUS_CONCAT(berth_status_or_, __LINE__), lhs, expression)

#define BERTH_ASSIGN_OR_RETURN_IMPL(temporary, lhs, expression) \
  auto temporary = (expression);                                \
  if (!temporary.ok()) return temporary.status();               \
  lhs = std::move(*temporary)

// Evaluates `expression` (an absl::Status) and returns it from the calling function if it failed.
#define BERTH_RETURN_IF_ERROR(expression)                               \
  do {                                                                  \
    if (absl::Status berth_status = (expression); !berth_status.ok()) { \
      return berth_status;                                              \
    }                                                                   \
  } while (false)

#define BERTH_STATUS_CONCAT(a, b) BERTH_STATUS_CONCAT_INNER(a, b)
#define BERTH_STATUS_CONCAT_INNER(a, b) a##b

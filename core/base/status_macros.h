// Early return on a non-OK absl::Status, the engine's one error-propagation helper.
#pragma once

#include "absl/status/status.h"

#define QUARK_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    if (::absl::Status quark_status_ = (expr);       \
        !quark_status_.ok()) return quark_status_;   \
  } while (0)

#define QUARK_CONCAT_INNER_(a, b) a##b
#define QUARK_CONCAT_(a, b) QUARK_CONCAT_INNER_(a, b)

/// `QUARK_ASSIGN_OR_RETURN(auto x, MakeX());` returns the error of a StatusOr, else moves its value into x.
#define QUARK_ASSIGN_OR_RETURN(lhs, expr) QUARK_ASSIGN_OR_RETURN_IMPL_(QUARK_CONCAT_(quark_or_, __LINE__), lhs, expr)
#define QUARK_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = *std::move(tmp)

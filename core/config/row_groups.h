// How a weight's row is split among its scales, from its QuantSpec alone.
#pragma once

#include <cstdint>

#include "core/config/quant_spec.h"

namespace quark {

/// The input columns one scale of a weight with `in` columns covers where `spec` groups along the row: its group size
/// per group (when positive), else the whole row (what AWQ's clip search takes a max |W| over, and the device budget
/// and the estimator count it by).
inline int64_t RowGroupColumns(const QuantSpec& spec, int64_t in) {
  return spec.qscheme == QScheme::kPerGroup && spec.group_size && *spec.group_size > 0 ? *spec.group_size : in;
}

}  // namespace quark

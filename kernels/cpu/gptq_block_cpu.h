// The sequential part of a GPTQ block (kernels/element/gptq_row.h) on CPU memory.
#pragma once

#include "kernels/element/gptq_row.h"

namespace quark::kernels {

/// Runs the segment of `args` for every row, rows in parallel (at::parallel_for).
void GptqBlockCpu(const element::GptqBlockArgs& args);

}  // namespace quark::kernels

#include "kernels/cpu/gptq_block_cpu.h"

#include <algorithm>

#include <ATen/Parallel.h>

namespace quark::kernels {

void GptqBlockCpu(const element::GptqBlockArgs& args) {
  if (args.rows <= 0 || args.begin >= args.end) return;
  // A row costs about count^2 / 2 multiply-subtracts; a few rows a task keep the scheduling cost small.
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, args.count));
  element::DispatchGptqRow(args, [&](auto grid, auto mode, auto float_zp, auto cast) {
    at::parallel_for(0, args.rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        element::GptqRow<decltype(grid)::value, decltype(mode)::value, decltype(float_zp)::value,
                         decltype(cast)::value>(args, r, args.work + r * args.ldw + args.block_begin);
      }
    });
  });
}

}  // namespace quark::kernels

// Parallel loops over a tensor viewed as [outer, channels, inner] (contiguous), where every element of channel c
// uses parameter c. Runs of one channel are handed to a body whose inner loop the compiler can vectorize.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>

namespace quark::kernels {

/// [outer, channels, inner] view of a contiguous tensor; element (o, c, i) is at (o * channels + c) * inner + i and
/// uses parameter c. per_tensor: (1, 1, n); per_channel on axis k: (prod before k, size k, prod after k);
/// per_group / per_token with the axis last: (1, numel / len, len).
struct ChannelLayout {
  int64_t outer = 1;
  int64_t channels = 1;
  int64_t inner = 1;
  int64_t Numel() const { return outer * channels * inner; }
};

inline constexpr int64_t kElementGrain = 1 << 15;

/// Calls run(begin, end, c) for maximal contiguous element ranges of one channel (inner > 1), or
/// column(row_begin_element, c_count) with per-element channels when inner == 1.
/// `run` processes [begin, end) with channel c; `columns` processes one row of `channels` elements starting at the
/// given element offset, element j using channel j.
template <typename Run, typename Columns>
void ForEachChannelRun(const ChannelLayout& l, Run run, Columns columns) {
  if (l.Numel() == 0) return;
  if (l.inner == 1 && l.channels > 1) {
    const int64_t grain = std::max<int64_t>(1, kElementGrain / l.channels);
    at::parallel_for(0, l.outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) columns(o * l.channels);
    });
    return;
  }
  at::parallel_for(0, l.Numel(), kElementGrain, [&](int64_t b, int64_t e) {
    while (b < e) {
      const int64_t seg = b / l.inner;
      const int64_t end = std::min((seg + 1) * l.inner, e);
      run(b, end, seg % l.channels);
      b = end;
    }
  });
}

}  // namespace quark::kernels

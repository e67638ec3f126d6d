#include "kernels/cpu/reduce_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/mx_kernels.h"
#include "kernels/cpu/scalar_convert.h"

namespace quark::kernels {
namespace {

struct Range {
  float lo = std::numeric_limits<float>::infinity();
  float hi = -std::numeric_limits<float>::infinity();
  bool nan = false;

  void Merge(const Range& o) {
    lo = o.lo < lo ? o.lo : lo;
    hi = o.hi > hi ? o.hi : hi;
    nan = nan || o.nan;
  }
};

// One scan in element order: of equal extremes (-0 and +0) the first one seen stays.
template <typename T>
Range ScanRange(const T* x, int64_t n) {
  float lo = std::numeric_limits<float>::infinity();
  float hi = -std::numeric_limits<float>::infinity();
  int nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = ToF32(x[i]);
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    nan |= static_cast<int>(v != v);
  }
  return Range{lo, hi, nan != 0};
}

void Store(const Range& r, float* min, float* max) {
  *min = r.nan ? NAN : r.lo;
  *max = r.nan ? NAN : r.hi;
}

// Per-channel partial ranges as separate arrays, so that a row's update vectorizes across channels. The NaN flags
// are as wide as the values (a byte array next to float ones kept GCC from vectorizing the update at all).
struct ChannelRanges {
  std::vector<float> lo, hi;
  std::vector<int32_t> nan;
  explicit ChannelRanges(int64_t c)
      : lo(static_cast<size_t>(c), std::numeric_limits<float>::infinity()),
        hi(static_cast<size_t>(c), -std::numeric_limits<float>::infinity()),
        nan(static_cast<size_t>(c), 0) {}
};

// Rows of c elements folded into c partial ranges, one per position in the row. Separate pointers (nothing aliases),
// compiled for AVX-512 and AVX2 too and picked at load: GPTQ observes every group of a 4096-wide weight through here.
template <typename T>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void FoldRows(const T* __restrict x, int64_t rows, int64_t c, float* __restrict lo, float* __restrict hi,
              int32_t* __restrict nan) {
  for (int64_t o = 0; o < rows; ++o) {
    const T* __restrict row = x + o * c;
    for (int64_t j = 0; j < c; ++j) {
      const float v = ToF32(row[j]);
      lo[j] = v < lo[j] ? v : lo[j];
      hi[j] = v > hi[j] ? v : hi[j];
      nan[j] |= static_cast<int32_t>(v != v);
    }
  }
}

// Elements of a run reduced in independent lanes (one AVX-512 register's worth), so that the compare-selects do not
// wait on each other.
constexpr int64_t kRangeLanes = 16;

// ScanRange's result, with the run folded as rows of kRangeLanes lanes: a minimum or maximum other than zero has one
// bit pattern whichever equal element supplies it, so lanes merged in any order give the scan's bits; a zero extreme
// may be -0 or +0, and only the scan in order knows which came first, so such runs are scanned again.
template <typename T>
Range RunRange(const T* x, int64_t n) {
  if (n < 2 * kRangeLanes) return ScanRange(x, n);
  float lo[kRangeLanes], hi[kRangeLanes];
  int32_t nan[kRangeLanes];
  std::fill_n(lo, kRangeLanes, std::numeric_limits<float>::infinity());
  std::fill_n(hi, kRangeLanes, -std::numeric_limits<float>::infinity());
  std::fill_n(nan, kRangeLanes, 0);
  const int64_t whole = n - n % kRangeLanes;
  FoldRows(x, whole / kRangeLanes, kRangeLanes, lo, hi, nan);
  Range r = ScanRange(x + whole, n - whole);
  for (int64_t k = 0; k < kRangeLanes; ++k) r.Merge(Range{lo[k], hi[k], nan[k] != 0});
  if (!r.nan && (r.lo == 0.0f || r.hi == 0.0f)) return ScanRange(x, n);
  return r;
}

// inner == 1: every row holds one element of each channel; threads keep partial ranges per channel, each scanning
// its rows in order, merged in thread (row) order, so the first of equal extremes wins as in one scan.
template <typename T>
void ColumnMinMax(const T* x, const ChannelLayout& l, float* min, float* max) {
  const int64_t c = l.channels;
  const int threads = at::get_num_threads();
  std::vector<ChannelRanges> partial(static_cast<size_t>(threads), ChannelRanges(0));
  at::parallel_for(0, l.outer, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(c, 1)), [&](int64_t b, int64_t e) {
    ChannelRanges& part = partial[static_cast<size_t>(at::get_thread_num())];
    if (part.lo.empty()) part = ChannelRanges(c);
    FoldRows(x + b * c, e - b, c, part.lo.data(), part.hi.data(), part.nan.data());
  });
  for (int64_t j = 0; j < c; ++j) {
    Range r;
    for (const ChannelRanges& part : partial) {
      if (!part.lo.empty()) r.Merge(Range{part.lo[j], part.hi[j], part.nan[j] != 0});
    }
    Store(r, min + j, max + j);
  }
}

}  // namespace

template <typename T>
void ChannelMinMax(const T* x, const ChannelLayout& l, float* min, float* max) {
  if (l.inner == 1 && l.channels > 1) {
    ColumnMinMax(x, l, min, max);
    return;
  }
  // Chunks of at most kElementGrain elements inside each segment, reduced in parallel, merged per channel.
  const int64_t chunks_per_segment = std::max<int64_t>(1, (l.inner + kElementGrain - 1) / kElementGrain);
  const int64_t segments = l.outer * l.channels;
  std::vector<Range> partial(segments * chunks_per_segment);
  const int64_t chunk = (l.inner + chunks_per_segment - 1) / chunks_per_segment;
  at::parallel_for(0, segments * chunks_per_segment, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(chunk, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t k = b; k < e; ++k) {
                       const int64_t seg = k / chunks_per_segment;
                       const int64_t start = (k % chunks_per_segment) * chunk;
                       const int64_t n = std::min(chunk, l.inner - start);
                       if (n > 0) partial[k] = RunRange(x + seg * l.inner + start, n);
                     }
                   });
  std::vector<Range> per_channel(l.channels);
  for (int64_t k = 0; k < segments * chunks_per_segment; ++k) {
    per_channel[(k / chunks_per_segment) % l.channels].Merge(partial[k]);
  }
  for (int64_t c = 0; c < l.channels; ++c) Store(per_channel[c], min + c, max + c);
}

template <typename T>
void MxBlockAmax(const T* x, int64_t rows, int64_t len, float* amax) {
  const int64_t nb = MxBlocksPerRow(len);
  at::parallel_for(0, rows * nb, 1024, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const int64_t start = (k % nb) * kMxBlock;
      const T* p = x + (k / nb) * len + start;
      const int64_t n = std::min(kMxBlock, len - start);
      float m = 0.0f;
      int nan = 0;
      for (int64_t i = 0; i < n; ++i) {
        const float a = std::fabs(ToF32(p[i]));
        m = a > m ? a : m;
        nan |= static_cast<int>(a != a);
      }
      amax[k] = nan ? NAN : m;
    }
  });
}

#define QUARK_INSTANTIATE_REDUCE(T)                                                   \
  template void ChannelMinMax<T>(const T*, const ChannelLayout&, float*, float*);     \
  template void MxBlockAmax<T>(const T*, int64_t, int64_t, float*);

QUARK_INSTANTIATE_REDUCE(float)
QUARK_INSTANTIATE_REDUCE(c10::BFloat16)
QUARK_INSTANTIATE_REDUCE(c10::Half)
#undef QUARK_INSTANTIATE_REDUCE

}  // namespace quark::kernels

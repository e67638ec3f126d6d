// How the CUDA kernels split their work, as plain __host__ __device__ code that the CPU tests walk (the GPU is the
// only place the kernels run, so the index arithmetic is proven here): an element-wise pass as aligned vectors of
// `width` consecutive elements with a scalar head and tail, the channel of each element of an [outer, channels,
// inner] layout without a division per element, the lanes of an MX launch that loads a vector per lane, and the
// words of a 16-byte vector.
// Index is uint32_t when every index fits in 31 bits (cheaper division on a GPU), else int64_t.
#pragma once

#include <cstdint>

#ifndef QUARK_HD
#if defined(__CUDACC__) || defined(__HIPCC__)
#define QUARK_HD __host__ __device__ __forceinline__
#else
#define QUARK_HD inline
#endif
#endif

namespace quark::kernels::element {

/// An element-wise pass over n elements: `head` scalar elements, then `vectors` aligned vectors of `width`
/// elements, then the scalar tail. Work item k < vectors is a vector; the others are the head's and tail's
/// scalars, so a grid-stride loop over Items() covers every element exactly once.
template <typename Index>
struct VecPlan {
  Index n = 0;
  Index head = 0;
  Index vectors = 0;
  Index width = 1;

  QUARK_HD Index Items() const { return vectors + (n - vectors * width); }
  /// First element of vector `item` (item < vectors).
  QUARK_HD Index VectorStart(Index item) const { return head + item * width; }
  /// Element of scalar item k (k = item - vectors, k < Items() - vectors): the head's, then the tail's.
  QUARK_HD Index ScalarIndex(Index k) const { return k < head ? k : head + vectors * width + (k - head); }

  template <typename To>
  QUARK_HD VecPlan<To> As() const {
    return VecPlan<To>{static_cast<To>(n), static_cast<To>(head), static_cast<To>(vectors), static_cast<To>(width)};
  }
};

/// The plan for reading elements of `in_bytes` at address `in` and writing results of `out_bytes` at `out`, in
/// vectors of `width` elements (width * in_bytes and width * out_bytes powers of two: the vector loads' and stores'
/// alignment). The head makes the input aligned; when the output is not aligned at the same element (pointers
/// misaligned differently, or an input not aligned to its own element size) the plan has no vectors at all.
inline VecPlan<int64_t> MakeVecPlan(uintptr_t in, int64_t in_bytes, uintptr_t out, int64_t out_bytes, int64_t n,
                                    int64_t width) {
  VecPlan<int64_t> p;
  p.n = n;
  p.width = width;
  const uint64_t in_vec = static_cast<uint64_t>(width * in_bytes);
  const uint64_t out_vec = static_cast<uint64_t>(width * out_bytes);
  if (in % static_cast<uint64_t>(in_bytes) != 0) return p;
  const int64_t head = static_cast<int64_t>(((in_vec - in % in_vec) % in_vec) / static_cast<uint64_t>(in_bytes));
  if (head >= n) return p;
  if ((out + static_cast<uint64_t>(head * out_bytes)) % out_vec != 0) return p;
  p.head = head;
  p.vectors = (n - head) / width;
  return p;
}

/// Whether every index of a pass over n elements (and one stride past it) fits a uint32_t index.
inline bool Fits32(int64_t n) { return n < (int64_t{1} << 31); }

/// The channel of element i of an [outer, channels, inner] layout, the old way: (i / inner) % channels.
template <typename Index>
QUARK_HD Index ChannelOf(Index i, Index inner, Index channels) {
  if (channels == 1) return 0;
  return (inner == 1 ? i : i / inner) % channels;
}

/// The channel of consecutive elements: one division at the start, then a step per element. Per tensor
/// (channels == 1) it never divides; inner == 1 needs only the modulo.
template <typename Index>
struct ChannelCursor {
  Index channel;
  Index offset;  // position inside the current run of `inner` elements
  Index inner;
  Index channels;

  QUARK_HD ChannelCursor(Index i, Index inner_, Index channels_) : channel(0), offset(0), inner(inner_),
                                                                   channels(channels_) {
    if (channels == 1) {
      inner = 1;  // every step wraps to channel 0
      return;
    }
    const Index q = inner == 1 ? i : i / inner;
    offset = i - q * inner;
    channel = q % channels;
  }
  /// Whether this element and the k - 1 after it all have `channel` (always per tensor; otherwise when they lie in
  /// one run of `inner`), so a kernel can load the channel's parameters once for all of them.
  QUARK_HD bool SameChannelFor(Index k) const { return channels == 1 || offset + k <= inner; }
  QUARK_HD void Next() {
    if (++offset == inner) {
      offset = 0;
      if (++channel == channels) channel = 0;
    }
  }
};

/// One lane of a vectorized MX launch on [rows, len] (blocks of 32 along len; len % width == 0): a warp covers
/// `width` consecutive MX blocks, each with 32 / width lanes of `width` consecutive elements.
template <typename Index>
struct MxVecLane {
  Index block;  // the lane's MX block, row-major over [rows, ceil(len / 32)]
  Index index;  // its first element's offset in the data
  bool valid;   // the block exists and the lane's elements lie inside the row (a tail block's last lanes do not)
  bool leader;  // the block's first lane (writes its scale)
};

/// Lane `lane` (0..31) of warp slot `slot` (slots count from 0 over ceil(blocks / width)).
template <typename Index>
QUARK_HD MxVecLane<Index> MxVecLaneOf(Index slot, int lane, Index rows, Index len, Index width) {
  const Index lanes_per_block = 32 / width;
  const Index blocks_per_row = (len + 31) / 32;
  MxVecLane<Index> l;
  l.block = slot * width + static_cast<Index>(lane) / lanes_per_block;
  const Index group_lane = static_cast<Index>(lane) % lanes_per_block;
  l.leader = group_lane == 0;
  const Index row = l.block / blocks_per_row;
  const Index col = (l.block - row * blocks_per_row) * 32 + group_lane * width;
  l.valid = row < rows && col < len;
  l.index = row * len + col;
  return l;
}

/// Warp slots of an MX launch with `width` elements per lane.
template <typename Index>
QUARK_HD Index MxVecSlots(Index rows, Index len, Index width) {
  return (rows * ((len + 31) / 32) + width - 1) / width;
}

/// A 16-byte vector as the kernels load and store it: four little-endian 32-bit words holding elements of 1, 2 or
/// 4 bytes.
/// The bits of element k (of kBytes bytes) of the vector held in w: element k starts at byte k * kBytes.
template <int kBytes>
QUARK_HD uint32_t WordElement(const uint32_t (&w)[4], int k) {
  if constexpr (kBytes == 4) {
    return w[k];
  } else {
    return (w[k * kBytes / 4] >> (8 * ((k * kBytes) % 4))) & ((1u << (8 * kBytes)) - 1u);
  }
}

/// kWidth elements of kBytes each, packed into the words one aligned store writes (4, 8 or 16 bytes).
template <int kBytes, int kWidth>
struct PackedWords {
  static constexpr int kWords = (kWidth * kBytes + 3) / 4;
  uint32_t w[kWords] = {};
  /// Element k's bits (only the low 8 * kBytes count). Each k is set once.
  QUARK_HD void Set(int k, uint32_t bits) {
    if constexpr (kBytes == 4) {
      w[k] = bits;
    } else {
      w[k * kBytes / 4] |= (bits & ((1u << (8 * kBytes)) - 1u)) << (8 * ((k * kBytes) % 4));
    }
  }
};

}  // namespace quark::kernels::element

// The CUDA kernels' work split (kernels/element/launch_plan.h), walked on the CPU the way the kernels walk it: a
// grid-stride loop over a VecPlan's items covers every element exactly once with aligned vectors (odd sizes,
// misaligned and differently aligned pointers, n = 1), a ChannelCursor steps through the same channels as the old
// (i / inner) % channels, the vectorized MX lanes cover every element once with each block's lanes together, and a
// 16-byte vector's words unpack to and pack from the elements the bytes in memory hold.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/element/launch_plan.h"

namespace quark::kernels::element {
namespace {

constexpr int64_t kSizes[] = {1, 2, 7, 8, 17, 1025, 4099};

// Every element a kernel with `threads` threads in all touches, in the order of MapKernel's grid-stride loop; fails
// on a vector start that is not aligned for the input or the output.
template <typename Index>
std::vector<int> Coverage(const VecPlan<Index>& p, Index threads, uintptr_t in, int64_t in_bytes, uintptr_t out,
                          int64_t out_bytes, const std::string& what) {
  std::vector<int> seen(static_cast<size_t>(p.n), 0);
  for (Index t = 0; t < threads; ++t) {
    for (Index item = t; item < p.Items(); item += threads) {
      if (item < p.vectors) {
        const Index i = p.VectorStart(item);
        EXPECT_EQ((in + static_cast<uint64_t>(i) * in_bytes) % static_cast<uint64_t>(p.width * in_bytes), 0u)
            << what << " vector " << item;
        EXPECT_EQ((out + static_cast<uint64_t>(i) * out_bytes) % static_cast<uint64_t>(p.width * out_bytes), 0u)
            << what << " vector " << item;
        for (Index k = 0; k < p.width; ++k) {
          if (i + k < p.n) ++seen[static_cast<size_t>(i + k)];
          else ADD_FAILURE() << what << ": vector " << item << " runs past n";
        }
      } else {
        const Index i = p.ScalarIndex(item - p.vectors);
        if (i < p.n) ++seen[static_cast<size_t>(i)];
        else ADD_FAILURE() << what << ": scalar item " << item << " is element " << i << " past n";
      }
    }
  }
  return seen;
}

void ExpectEachOnce(const std::vector<int>& seen, const std::string& what) {
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] != 1) {
      ADD_FAILURE() << what << ": element " << i << " covered " << seen[i] << " times";
      return;
    }
  }
}

struct ElemPair {
  int64_t in_bytes, out_bytes, width;  // as the kernels call MakeVecPlan
};
// float32 / bfloat16 fake quant, float32 / bfloat16 codes, int4 and fp4 packing.
constexpr ElemPair kPairs[] = {{4, 4, 4}, {2, 2, 8}, {4, 1, 4}, {2, 1, 8}, {8, 4, 2}, {2, 1, 8}};

TEST(LaunchPlanTest, EveryElementOnceWithAlignedVectorsForAnyPointers) {
  const uintptr_t base = 0x10000;  // 16-byte aligned, as cudaMalloc's pointers are (256-byte)
  for (const ElemPair& e : kPairs) {
    for (int64_t n : kSizes) {
      for (int64_t in_off = 0; in_off < 16; ++in_off) {
        for (int64_t out_off : {int64_t{0}, in_off, int64_t{1}, int64_t{4}, int64_t{8}}) {
          const uintptr_t in = base + in_off, out = base + 0x100000 + out_off;
          const std::string what = "in " + std::to_string(e.in_bytes) + "B+" + std::to_string(in_off) + " out " +
                                   std::to_string(e.out_bytes) + "B+" + std::to_string(out_off) + " n " +
                                   std::to_string(n);
          const VecPlan<int64_t> p = MakeVecPlan(in, e.in_bytes, out, e.out_bytes, n, e.width);
          ASSERT_LE(p.head + p.vectors * p.width, n) << what;
          for (int64_t threads : {1, 3, 32, 256, 5000}) {
            ExpectEachOnce(Coverage(p, threads, in, e.in_bytes, out, e.out_bytes, what), what);
            ExpectEachOnce(Coverage(p.As<uint32_t>(), static_cast<uint32_t>(threads), in, e.in_bytes, out,
                                    e.out_bytes, what + " (32-bit)"),
                           what + " (32-bit)");
          }
        }
      }
    }
  }
}

TEST(LaunchPlanTest, VectorsWhereverBothPointersAlignAlike) {
  const uintptr_t base = 0x10000;
  for (const ElemPair& e : kPairs) {
    for (int64_t k = 0; k < e.width; ++k) {  // both pointers k elements past a vector boundary
      const uintptr_t in = base + static_cast<uintptr_t>(k * e.in_bytes);
      const uintptr_t out = base + 0x100000 + static_cast<uintptr_t>(k * e.out_bytes);
      const VecPlan<int64_t> p = MakeVecPlan(in, e.in_bytes, out, e.out_bytes, 4099, e.width);
      EXPECT_EQ(p.head, k == 0 ? 0 : e.width - k) << "offset " << k;
      EXPECT_EQ(p.vectors, (4099 - p.head) / e.width) << "offset " << k;  // at most width - 1 scalar tail
      EXPECT_LT(p.Items() - p.vectors, 2 * e.width) << "offset " << k;
    }
  }
  // An input not aligned to its own element, or an output aligned differently: no vectors, all scalars.
  EXPECT_EQ(MakeVecPlan(base + 1, 2, base, 2, 1025, 8).vectors, 0);
  EXPECT_EQ(MakeVecPlan(base, 2, base + 2, 2, 1025, 8).vectors, 0);
  EXPECT_EQ(MakeVecPlan(base, 2, base + 4, 1, 1025, 8).vectors, 0);  // codes need 8-byte alignment
  EXPECT_EQ(MakeVecPlan(base, 2, base + 8, 1, 1025, 8).vectors, 1025 / 8);
  EXPECT_EQ(MakeVecPlan(base, 4, base, 4, 3, 4).vectors, 0);  // shorter than one vector
  EXPECT_EQ(MakeVecPlan(base, 4, base, 4, 3, 4).Items(), 3);
}

TEST(LaunchPlanTest, ThirtyTwoBitIndicesOnlyBelowTwoToThe31) {
  EXPECT_TRUE(Fits32(1));
  EXPECT_TRUE(Fits32((int64_t{1} << 31) - 1));
  EXPECT_FALSE(Fits32(int64_t{1} << 31));
  EXPECT_FALSE(Fits32(int64_t{3} << 31));
}

struct Layout {
  int64_t outer, channels, inner;
};
constexpr Layout kLayouts[] = {{1, 1, 1},  {1, 1, 17}, {1, 17, 1},  {1, 1, 1025}, {3, 17, 1},  {5, 7, 32},
                               {1, 33, 31}, {2, 4, 1025}, {1, 4099, 1}, {7, 3, 5},  {4, 1, 9},  {2, 1025, 3}};

template <typename Index>
void ExpectCursorIsTheOldFormula(const Layout& l) {
  const Index n = static_cast<Index>(l.outer * l.channels * l.inner);
  const Index inner = static_cast<Index>(l.inner), channels = static_cast<Index>(l.channels);
  for (Index start = 0; start < n; ++start) {
    ChannelCursor<Index> cursor(start, inner, channels);
    // SameChannelFor(k) exactly when the k elements from `start` share the old formula's channel.
    for (Index k = 1; k <= 9 && start + k <= n; ++k) {
      bool same = true;
      for (Index j = start; j < start + k; ++j) same = same && (j / inner) % channels == (start / inner) % channels;
      ASSERT_EQ(cursor.SameChannelFor(k), same) << "start " << start << " k " << k;
    }
    for (Index i = start; i < n && i < start + 9; ++i) {
      const Index old = (i / inner) % channels;
      ASSERT_EQ(cursor.channel, old) << "layout [" << l.outer << "," << l.channels << "," << l.inner << "] start "
                                     << start << " element " << i;
      ASSERT_EQ(ChannelOf(i, inner, channels), old) << "element " << i;
      cursor.Next();
    }
  }
}

TEST(LaunchPlanTest, ChannelCursorStepsThroughTheOldFormulasChannels) {
  for (const Layout& l : kLayouts) {
    ExpectCursorIsTheOldFormula<uint32_t>(l);
    ExpectCursorIsTheOldFormula<int64_t>(l);
  }
}

struct MxShape {
  int64_t rows, len;
};
// len a multiple of the lane width (the vectorized launch's condition), with and without a tail block.
constexpr MxShape kMxShapes[] = {{1, 8}, {1, 16}, {3, 32}, {2, 104}, {1, 1032}, {4, 4104}, {5, 24}, {9, 64}};

template <typename Index>
void ExpectMxLanesCoverOnce(const MxShape& s, Index width) {
  const Index rows = static_cast<Index>(s.rows), len = static_cast<Index>(s.len);
  const Index blocks_per_row = (len + 31) / 32;
  const Index lanes_per_block = 32 / width;
  std::vector<int> seen(static_cast<size_t>(rows * len), 0);
  std::vector<int> leaders(static_cast<size_t>(rows * blocks_per_row), 0);
  const std::string what = "mx [" + std::to_string(s.rows) + "," + std::to_string(s.len) + "] width " +
                            std::to_string(width);
  for (Index slot = 0; slot < MxVecSlots<Index>(rows, len, width); ++slot) {
    for (int lane = 0; lane < 32; ++lane) {
      const MxVecLane<Index> l = MxVecLaneOf<Index>(slot, lane, rows, len, width);
      // The lanes of one block are an aligned group of lanes_per_block: a shuffle with a smaller xor offset stays
      // inside the block.
      EXPECT_EQ(l.block, slot * width + static_cast<Index>(lane) / lanes_per_block) << what;
      // The first lane of each block writes its scale, and it lies inside the row whenever the block exists.
      EXPECT_EQ(l.leader, static_cast<Index>(lane) % lanes_per_block == 0) << what;
      if (l.leader && l.block < rows * blocks_per_row) {
        EXPECT_TRUE(l.valid) << what << " block " << l.block;
        ++leaders[static_cast<size_t>(l.block)];
      }
      if (!l.valid) continue;
      for (Index k = 0; k < width; ++k) {
        const Index e = l.index + k;
        ASSERT_LT(e, rows * len) << what;
        ++seen[static_cast<size_t>(e)];
        // The element's block, the scalar launch's way.
        EXPECT_EQ(l.block, (e / len) * blocks_per_row + (e % len) / 32) << what << " element " << e;
      }
    }
  }
  ExpectEachOnce(seen, what);
  ExpectEachOnce(leaders, what + " leaders");
}

TEST(LaunchPlanTest, MxVectorLanesCoverEveryElementOnceInsideItsBlock) {
  for (const MxShape& s : kMxShapes) {
    for (int64_t width : {4, 8}) {
      if (s.len % width != 0) continue;
      ExpectMxLanesCoverOnce<uint32_t>(s, static_cast<uint32_t>(width));
      ExpectMxLanesCoverOnce<int64_t>(s, width);
    }
  }
}

// The words a 16-byte load gives on a little-endian machine (x86 and CUDA devices alike) and the elements in memory.
template <int kBytes>
void ExpectWordsMatchMemory(std::mt19937_64& rng) {
  constexpr int kWidth = 16 / kBytes;
  uint8_t bytes[16];
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  uint32_t w[4];
  std::memcpy(w, bytes, 16);
  PackedWords<kBytes, kWidth> packed;
  for (int k = 0; k < kWidth; ++k) {
    uint32_t element = 0;
    std::memcpy(&element, bytes + k * kBytes, kBytes);
    ASSERT_EQ(WordElement<kBytes>(w, k), element) << kBytes << "-byte element " << k;
    packed.Set(k, element | (kBytes < 4 ? 0xFFFFFF00u << (8 * (kBytes - 1)) : 0u));  // high garbage is masked off
  }
  ASSERT_EQ(std::memcmp(packed.w, bytes, 16), 0) << kBytes << "-byte elements packed";
  // Narrower stores (codes of 8 or 4 elements): the first kWidth bytes.
  PackedWords<1, 8> eight;
  PackedWords<1, 4> four;
  for (int k = 0; k < 8; ++k) eight.Set(k, bytes[k] | 0x300u);
  for (int k = 0; k < 4; ++k) four.Set(k, bytes[k]);
  EXPECT_EQ(std::memcmp(eight.w, bytes, 8), 0);
  EXPECT_EQ(std::memcmp(four.w, bytes, 4), 0);
}

TEST(LaunchPlanTest, VectorWordsHoldTheElementsInMemoryOrder) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    ExpectWordsMatchMemory<1>(rng);
    ExpectWordsMatchMemory<2>(rng);
    ExpectWordsMatchMemory<4>(rng);
  }
}

}  // namespace
}  // namespace quark::kernels::element

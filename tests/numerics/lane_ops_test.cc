// The AVX2 and baseline builds of the lane loops agree bit for bit (ties, -0, NaN, saturation, subnormals).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <random>
#include <vector>

#include "kernels/cpu/lane_table.h"

namespace quark::kernels {
namespace {

std::vector<float> Inputs() {
  std::vector<float> v = {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, -2.5f, 127.5f, -128.5f, 1e30f, -1e30f, NAN, INFINITY,
                          -INFINITY, 1e-40f, -1e-42f, 0.49999997f, 2.5000002f};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  for (int i = 0; i < 2000; ++i) v.push_back(i % 3 ? u(rng) : std::nearbyint(u(rng) * 2) / 2);  // many ties
  return v;
}

// The AVX2 table where it was compiled and this CPU runs it (calling it elsewhere would be an illegal instruction).
const LaneTable* RunnableAvx2Table() {
  const LaneTable* t = Avx2LaneTable();
  return t != nullptr && &LaneOpsForThisCpu() == t ? t : nullptr;
}

bool Same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(LaneOpsTest, Avx2AndBaselineAgree) {
  const LaneTable* fast = RunnableAvx2Table();
  if (fast == nullptr) GTEST_SKIP() << "AVX2 lanes not compiled here, or not run by this CPU";
  const LaneTable& base = BaseLaneTable();
  const std::vector<float> in = Inputs();
  const auto n = static_cast<int64_t>(in.size());
  std::vector<float> s(n, 0.75f), inv(n, 1.0f / 0.75f), z(n, 3.0f);
  for (int mode = 0; mode < 3; ++mode) {
    for (int fz = 0; fz < 2; ++fz) {
      std::vector<float> a = in, b = in;
      fast->affine_run[mode][fz](a.data(), n, 0.75f, 1.0f / 0.75f, fz ? 2.5f : 3.0f, -128.0f, 127.0f);
      base.affine_run[mode][fz](b.data(), n, 0.75f, 1.0f / 0.75f, fz ? 2.5f : 3.0f, -128.0f, 127.0f);
      EXPECT_TRUE(Same(a, b)) << "affine_run mode " << mode << " fz " << fz;
      a = in;
      b = in;
      fast->affine_cols[mode][fz](a.data(), n, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
      base.affine_cols[mode][fz](b.data(), n, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
      EXPECT_TRUE(Same(a, b)) << "affine_cols mode " << mode;
      a = in;
      b = in;
      fast->affine_groups[mode][fz](a.data(), n, 7, s.data(), inv.data(), z.data(), -8.0f, 7.0f);
      base.affine_groups[mode][fz](b.data(), n, 7, s.data(), inv.data(), z.data(), -8.0f, 7.0f);
      EXPECT_TRUE(Same(a, b)) << "affine_groups mode " << mode;
    }
  }
  for (GridArgs g : {GridArgs{3, -6, 448.0f}, GridArgs{2, -14, 57344.0f}, GridArgs{1, 0, 6.0f}}) {
    std::vector<float> a = in, b = in;
    fast->float_run(a.data(), n, 0.37f, g);
    base.float_run(b.data(), n, 0.37f, g);
    EXPECT_TRUE(Same(a, b)) << "float_run max " << g.max;
    a = in;
    b = in;
    fast->float_groups(a.data(), n, 5, s.data(), g);
    base.float_groups(b.data(), n, 5, s.data(), g);
    EXPECT_TRUE(Same(a, b)) << "float_groups max " << g.max;
    std::vector<float> bi((n + 31) / 32, 0.25f), bs((n + 31) / 32, 4.0f);
    a = in;
    b = in;
    fast->mx_grid(a.data(), n, bi.data(), bs.data(), g);
    base.mx_grid(b.data(), n, bi.data(), bs.data(), g);
    EXPECT_TRUE(Same(a, b)) << "mx_grid max " << g.max;
    for (int mode = 0; mode < 3; ++mode) {
      a = in;
      b = in;
      fast->mx_int[mode](a.data(), n, bi.data(), bs.data());
      base.mx_int[mode](b.data(), n, bi.data(), bs.data());
      EXPECT_TRUE(Same(a, b)) << "mx_int mode " << mode;
    }
  }
  std::vector<uint16_t> ha(n), hb(n);
  fast->store_bf16(in.data(), ha.data(), n);
  base.store_bf16(in.data(), hb.data(), n);
  EXPECT_EQ(ha, hb);
  fast->store_f16(in.data(), ha.data(), n);
  base.store_f16(in.data(), hb.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(in[i])) EXPECT_EQ(ha[i], hb[i]) << "f16 of " << in[i];
  }
  std::vector<float> fa(n), fb(n);
  fast->load_f16(hb.data(), fa.data(), n);
  base.load_f16(hb.data(), fb.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isnan(fb[i])) EXPECT_EQ(fa[i], fb[i]);
  }
}

// Every head / body / tail split of the copies: destinations at each offset from a 32-byte boundary, lengths that
// end anywhere; bytes around the destination stay untouched.
TEST(LaneOpsTest, CopiesAreExactAtEveryAlignmentAndLength) {
  std::vector<const LaneTable*> tables = {&BaseLaneTable()};
  if (RunnableAvx2Table() != nullptr) tables.push_back(RunnableAvx2Table());
  std::vector<unsigned char> src(400);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 1);
  for (const LaneTable* t : tables) {
    for (int offset = 0; offset < 40; ++offset) {
      for (int bytes : {0, 1, 3, 31, 32, 33, 64, 95, 200, 333}) {
        const int src_offset = (offset * 7) % 33;  // sources at every alignment too
        alignas(64) unsigned char dst[448];
        std::memset(dst, 0xEE, sizeof(dst));
        t->stream_copy(src.data() + src_offset, dst + offset, bytes);
        EXPECT_EQ(std::memcmp(dst + offset, src.data() + src_offset, bytes), 0)
            << "offset " << offset << " source offset " << src_offset << " bytes " << bytes;
        for (int i = 0; i < offset; ++i) ASSERT_EQ(dst[i], 0xEE);
        for (size_t i = offset + bytes; i < sizeof(dst); ++i) ASSERT_EQ(dst[i], 0xEE);
      }
    }
    const std::vector<float> in = Inputs();
    for (int64_t n : {int64_t{0}, int64_t{7}, int64_t{8}, int64_t{513}, static_cast<int64_t>(in.size()) - 3}) {
      for (int64_t shift : {0, 1, 3}) {  // unaligned sources and destinations
        std::vector<float> out(in.size(), 1.0f);
        t->copy_f32(in.data() + shift, out.data() + (3 - shift), n);
        EXPECT_EQ(std::memcmp(out.data() + (3 - shift), in.data() + shift, n * sizeof(float)), 0)
            << "copy_f32 n " << n << " shift " << shift;
        if (n + 3 - shift < static_cast<int64_t>(out.size())) EXPECT_EQ(out[n + 3 - shift], 1.0f);
      }
    }
  }
}

// The 8 x 8 transpose moves bits (NaN payloads, -0, subnormals) between rows anywhere in memory; with only_changed
// a destination that already holds the transpose is left unwritten, and one that differs anywhere is rewritten.
TEST(LaneOpsTest, Transpose8x8MovesBitsAndSkipsUnchangedBlocks) {
  std::vector<const LaneTable*> tables = {&BaseLaneTable()};
  if (RunnableAvx2Table() != nullptr) tables.push_back(RunnableAvx2Table());
  const std::vector<float> in = Inputs();
  std::vector<uint32_t> bits(in.size());
  std::memcpy(bits.data(), in.data(), in.size() * sizeof(float));
  bits[5] = 0x7FC01234u;  // a NaN with a payload
  bits[9] = 0x80000000u;  // -0
  for (const LaneTable* t : tables) {
    // Source rows 13 floats apart from an unaligned start; destination rows 11 floats apart.
    std::vector<float> src(8 * 13 + 1), dst(8 * 11 + 3, 2.0f);
    std::memcpy(src.data(), bits.data(), src.size() * sizeof(float));
    const float* from[8];
    float* to[8];
    for (int k = 0; k < 8; ++k) {
      from[k] = src.data() + 1 + 13 * k;
      to[k] = dst.data() + 3 + 11 * k;
    }
    t->transpose8x8(from, to, /*only_changed=*/false);
    for (int k = 0; k < 8; ++k) {
      for (int j = 0; j < 8; ++j) EXPECT_EQ(std::memcmp(to[k] + j, from[j] + k, sizeof(float)), 0) << k << "," << j;
      for (int j = 8; j < 11 && k < 7; ++j) EXPECT_EQ(to[k][j], 2.0f);  // between the rows: untouched
    }
    EXPECT_EQ(dst[0], 2.0f);
    // Already the transpose: with only_changed nothing is written, which a read-only copy of the destination proves
    // (a store there would end the test with SIGSEGV).
    {
      const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
      void* mapping = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(mapping, MAP_FAILED);
      auto* frozen = static_cast<float*>(mapping);
      std::memcpy(frozen, dst.data(), dst.size() * sizeof(float));
      ASSERT_EQ(mprotect(mapping, page, PROT_READ), 0);
      float* frozen_rows[8];
      for (int k = 0; k < 8; ++k) frozen_rows[k] = frozen + (to[k] - dst.data());
      t->transpose8x8(from, frozen_rows, /*only_changed=*/true);
      EXPECT_EQ(std::memcmp(frozen, dst.data(), dst.size() * sizeof(float)), 0);
      munmap(mapping, page);
    }
    // One element differs (-0 against +0): the block is written.
    to[6][2] = 0.0f;
    const float* source = from[2] + 6;
    ASSERT_NE(std::memcmp(to[6] + 2, source, sizeof(float)), 0);
    t->transpose8x8(from, to, /*only_changed=*/true);
    EXPECT_EQ(std::memcmp(to[6] + 2, source, sizeof(float)), 0);
  }
}

// The fused bfloat16 loops equal load -> float32 loop -> store, bit for bit, in both tables and in place.
TEST(LaneOpsTest, FusedBf16LoopsEqualTheBufferedOnes) {
  std::vector<const LaneTable*> tables = {&BaseLaneTable()};
  if (RunnableAvx2Table() != nullptr) tables.push_back(RunnableAvx2Table());
  const std::vector<float> in = Inputs();
  const auto n = static_cast<int64_t>(in.size());
  for (const LaneTable* t : tables) {
    std::vector<uint16_t> x(n);
    t->store_bf16(in.data(), x.data(), n);
    const int64_t groups = (n + 31) / 32;
    std::vector<float> s(groups), inv(groups), z(groups);
    for (int64_t k = 0; k < groups; ++k) {
      s[k] = 0.25f * static_cast<float>(k % 7 + 1);
      inv[k] = 1.0f / s[k];
      z[k] = static_cast<float>(k % 5);
    }
    // `fused` runs on bfloat16 bits, `buffered` on float32 lanes; their outputs must be the same bits.
    auto expect_same = [&](const char* what, auto fused, auto buffered) {
      std::vector<uint16_t> a(n), b(n);
      std::vector<float> v(n);
      t->load_bf16(x.data(), v.data(), n);
      buffered(v.data());
      t->store_bf16(v.data(), b.data(), n);
      fused(x.data(), a.data());
      EXPECT_EQ(a, b) << what;
      std::vector<uint16_t> inplace = x;
      fused(inplace.data(), inplace.data());
      EXPECT_EQ(inplace, b) << what << " in place";
    };
    for (int mode = 0; mode < 3; ++mode) {
      for (int fz = 0; fz < 2; ++fz) {
        expect_same(
            "affine_run", [&](const uint16_t* i, uint16_t* o) { t->bf16.affine_run[mode][fz](i, o, n, 0.75f, 1.0f / 0.75f, 3.0f, -8.0f, 7.0f); },
            [&](float* v) { t->affine_run[mode][fz](v, n, 0.75f, 1.0f / 0.75f, 3.0f, -8.0f, 7.0f); });
        expect_same(
            "affine_groups",
            [&](const uint16_t* i, uint16_t* o) {
              t->bf16.affine_groups[mode][fz](i, o, n, 32, s.data(), inv.data(), z.data(), 0.0f, 15.0f);
            },
            [&](float* v) { t->affine_groups[mode][fz](v, n, 32, s.data(), inv.data(), z.data(), 0.0f, 15.0f); });
      }
      expect_same(
          "mx_int", [&](const uint16_t* i, uint16_t* o) { t->bf16.mx_int[mode](i, o, n, inv.data(), s.data()); },
          [&](float* v) { t->mx_int[mode](v, n, inv.data(), s.data()); });
    }
    for (const GridArgs g : {GridArgs{3, -6, 448.0f}, GridArgs{1, 0, 6.0f}}) {
      expect_same(
          "float_run", [&](const uint16_t* i, uint16_t* o) { t->bf16.float_run(i, o, n, 0.5f, g); },
          [&](float* v) { t->float_run(v, n, 0.5f, g); });
      expect_same(
          "float_groups", [&](const uint16_t* i, uint16_t* o) { t->bf16.float_groups(i, o, n, 32, s.data(), g); },
          [&](float* v) { t->float_groups(v, n, 32, s.data(), g); });
      expect_same(
          "mx_grid", [&](const uint16_t* i, uint16_t* o) { t->bf16.mx_grid(i, o, n, inv.data(), s.data(), g); },
          [&](float* v) { t->mx_grid(v, n, inv.data(), s.data(), g); });
    }
    std::vector<float> v(n), amax_a(groups), amax_b(groups);
    t->load_bf16(x.data(), v.data(), n);
    t->block_amax(v.data(), n, amax_b.data());
    t->bf16.block_amax(x.data(), n, amax_a.data());
    EXPECT_EQ(std::memcmp(amax_a.data(), amax_b.data(), groups * sizeof(float)), 0);
  }
}

// MXINT8 as AMD Quark's torch.round(x / scale) * scale: a negative element that rounds to zero gives -0, a positive
// one +0; floor takes small negatives to -1 and keeps an exact -0. Every table, float32 and bfloat16 loops, whole
// blocks and tails (block multipliers 64 and 1/64, so +-1e-3 are +-0.064 before rounding).
TEST(LaneOpsTest, MxIntKeepsTheSignOfZero) {
  std::vector<const LaneTable*> tables = {&BaseLaneTable()};
  if (RunnableAvx2Table() != nullptr) tables.push_back(RunnableAvx2Table());
  const float pattern[] = {-1e-3f, 1e-3f, -0.0f, 0.0f, -7e-3f, 7e-3f, -1e-30f, 1e-30f};
  for (const LaneTable* t : tables) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{32}, int64_t{45}, int64_t{96}, int64_t{1025}}) {
      std::vector<float> in(n);
      for (int64_t i = 0; i < n; ++i) in[i] = pattern[i % 8];
      std::vector<uint16_t> x16(n);
      t->store_bf16(in.data(), x16.data(), n);  // every pattern value rounds to a bfloat16 of the same sign
      const int64_t blocks = (n + 31) / 32;
      std::vector<float> inv(blocks, 64.0f), s(blocks, 1.0f / 64.0f);
      for (int mode = 0; mode < 3; ++mode) {
        std::vector<float> y = in;
        t->mx_int[mode](y.data(), n, inv.data(), s.data());
        std::vector<uint16_t> y16(n);
        t->bf16.mx_int[mode](x16.data(), y16.data(), n, inv.data(), s.data());
        for (int64_t i = 0; i < n; ++i) {
          const bool negative = std::signbit(in[i]);
          const float want = mode == 2 && negative && in[i] != 0.0f ? -1.0f / 64 : (negative ? -0.0f : 0.0f);
          uint32_t want_bits;
          std::memcpy(&want_bits, &want, sizeof(want));
          uint32_t got_bits;
          std::memcpy(&got_bits, &y[i], sizeof(float));
          EXPECT_EQ(got_bits, want_bits) << "float32 mode " << mode << " n " << n << " x " << in[i];
          EXPECT_EQ(y16[i], want_bits >> 16) << "bfloat16 mode " << mode << " n " << n << " x " << in[i];
        }
      }
    }
  }
}

TEST(LaneOpsTest, StreamingIsChosenOnlyForLargeOutputs) {
  EXPECT_FALSE(LaneIoFor(kStreamOutputBytes / 4 - 1, 4).stream);
  EXPECT_TRUE(LaneIoFor(kStreamOutputBytes / 4, 4).stream);
  EXPECT_FALSE(LaneIoFor(kStreamOutputBytes, 2).stream);  // 16-bit outputs are written directly
  EXPECT_EQ(LaneIoFor(0, 4).table, &LaneOpsForThisCpu());
}

}  // namespace
}  // namespace quark::kernels

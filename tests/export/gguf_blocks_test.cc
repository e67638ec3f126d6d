// Every GGUF block type of the traits table against the real llama.cpp (libggml-base of node-llama-cpp's prebuilt):
// the same floats in, the same bytes out, for random rows of 1, 17 and 1025 blocks and for edge cases (all-zero
// blocks, a constant block, the largest magnitude negative, ties between +a and -a, values at the rounding
// boundaries, subnormals, magnitudes near fp16's limit); fp16 / bf16 conversions over spread bit patterns.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/export/gguf_blocks.h"
#include "core/export/gguf_mxfp4.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/support/require_peer.h"

namespace quark::exporter::gguf {
namespace {

const testing::LlamaCpp* LlamaCppOrSkip() {
  std::string why;
  return testing::LoadLlamaCpp(&why);
}

#define SKIP_WITHOUT_LLAMA_CPP(l)                                \
  const testing::LlamaCpp* l = LlamaCppOrSkip();                 \
  if (l == nullptr) {                                            \
    std::string why;                                             \
    testing::LoadLlamaCpp(&why);                                 \
    QUARK_PEER_MISSING() << why;                                         \
  }

// Rows whose blocks exercise the kernels' branches.
std::vector<std::vector<float>> EdgeRows() {
  std::vector<std::vector<float>> rows;
  auto block = [](auto f) {
    std::vector<float> b(kBlockSize);
    for (int j = 0; j < kBlockSize; ++j) b[j] = f(j);
    return b;
  };
  rows.push_back(block([](int) { return 0.0f; }));                                  // all zero
  rows.push_back(block([](int) { return -0.0f; }));                                 // negative zeros
  rows.push_back(block([](int) { return 0.75f; }));                                 // constant (Q4_1: d = 0)
  rows.push_back(block([](int j) { return j == 5 ? -3.0f : 0.1f * j; }));           // largest magnitude negative
  rows.push_back(block([](int j) { return j % 2 ? 2.0f : -2.0f; }));                // ties between +a and -a
  rows.push_back(block([](int j) { return (j - 16) * 0.5f; }));                     // exact grid values
  rows.push_back(block([](int j) { return (j - 16) * 0.25f + 0.125f; }));           // halfway points
  rows.push_back(block([](int j) { return j == 0 ? 65504.0f * 7 : -j * 1e3f; }));  // large, d finite in fp16
  rows.push_back(block([](int j) { return -60000.0f + j; }));                        // negative extremes
  rows.push_back(block([](int j) { return j * 1e-40f; }));                           // subnormal floats
  rows.push_back(block([](int j) { return (j % 7) * 1e-7f - 2e-7f; }));              // d subnormal in fp16
  rows.push_back(block([](int j) { return j == 31 ? 1.0f : 0.0f; }));                // one nonzero, last
  return rows;
}

std::vector<float> RandomRow(int64_t blocks, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(blocks * kBlockSize);
  for (float& v : x) v = normal(gen);
  return x;
}

void (*Reference(const testing::LlamaCpp& l, GgmlType type))(const float*, void*, int64_t) {
  switch (type) {
    case GgmlType::kQ8_0: return l.quantize_row_q8_0_ref;
    case GgmlType::kQ4_0: return l.quantize_row_q4_0_ref;
    case GgmlType::kQ4_1: return l.quantize_row_q4_1_ref;
    case GgmlType::kQ5_0: return l.kquants.at(6).quantize_row_ref;
    case GgmlType::kQ5_1: return l.kquants.at(7).quantize_row_ref;
    default: return nullptr;
  }
}

// ggml_quantize_chunk's ggml type ids are the GgmlType values.
std::string LlamaCppBytes(const testing::LlamaCpp& l, GgmlType type, const std::vector<float>& x, bool chunk) {
  std::string out(RowBytes(type, x.size()), '\0');
  if (chunk || Reference(l, type) == nullptr) {
    l.quantize_chunk(static_cast<int>(type), x.data(), out.data(), 0, 1, static_cast<int64_t>(x.size()), nullptr);
  } else {
    Reference(l, type)(x.data(), out.data(), static_cast<int64_t>(x.size()));
  }
  return out;
}

std::string OurBytes(GgmlType type, const std::vector<float>& x) {
  std::string out(RowBytes(type, x.size()), '\0');
  FindType(type)->from_float(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

TEST(GgufBlocksTest, EveryTypeMatchesLlamaCppOnRandomRows) {
  SKIP_WITHOUT_LLAMA_CPP(l);
  int count = 0;
  const TypeTraits* types = AllTypes(&count);
  for (int t = 0; t < count; ++t) {
    if (types[t].block_size > kBlockSize) continue;  // the K-quants' 256-blocks: gguf_kquants_test.cc
    for (int64_t blocks : {1, 17, 1025}) {
      const auto x = RandomRow(blocks, static_cast<uint32_t>(blocks * 31 + t));
      // ggml_quantize_chunk is what llama-quantize calls; the _ref kernels are what it calls without an imatrix.
      EXPECT_EQ(OurBytes(types[t].type, x), LlamaCppBytes(*l, types[t].type, x, /*chunk=*/true))
          << types[t].name << " blocks " << blocks;
      if (types[t].quantized) {
        EXPECT_EQ(OurBytes(types[t].type, x), LlamaCppBytes(*l, types[t].type, x, /*chunk=*/false))
            << types[t].name << " blocks " << blocks;
      }
    }
  }
}

TEST(GgufBlocksTest, EveryTypeMatchesLlamaCppOnEdgeBlocks) {
  SKIP_WITHOUT_LLAMA_CPP(l);
  int count = 0;
  const TypeTraits* types = AllTypes(&count);
  for (int t = 0; t < count; ++t) {
    if (types[t].block_size > kBlockSize) continue;
    int i = 0;
    for (const auto& row : EdgeRows()) {
      const std::string ours = OurBytes(types[t].type, row);
      EXPECT_EQ(ours, LlamaCppBytes(*l, types[t].type, row, /*chunk=*/true)) << types[t].name << " edge row " << i;
      // No NaN ever comes out of these finite inputs.
      std::vector<float> back(row.size());
      types[t].to_float(ours.data(), back.data(), static_cast<int64_t>(row.size()));
      for (float v : back) EXPECT_FALSE(std::isnan(v)) << types[t].name << " edge row " << i;
      ++i;
    }
  }
}

TEST(GgufBlocksTest, DequantizationMatchesLlamaCpp) {
  SKIP_WITHOUT_LLAMA_CPP(l);
  const auto x = RandomRow(17, 5);
  const struct {
    GgmlType type;
    void (*theirs)(const void*, float*, int64_t);
  } cases[] = {{GgmlType::kQ8_0, l->dequantize_row_q8_0},
               {GgmlType::kQ4_0, l->dequantize_row_q4_0},
               {GgmlType::kQ4_1, l->dequantize_row_q4_1},
               {GgmlType::kQ5_0, l->kquants.at(6).dequantize_row},
               {GgmlType::kQ5_1, l->kquants.at(7).dequantize_row}};
  for (const auto& c : cases) {
    const std::string bytes = OurBytes(c.type, x);
    std::vector<float> ours(x.size()), theirs(x.size());
    FindType(c.type)->to_float(bytes.data(), ours.data(), static_cast<int64_t>(x.size()));
    c.theirs(bytes.data(), theirs.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), sizeof(float) * ours.size())) << FindType(c.type)->name;
  }
}

TEST(GgufBlocksTest, HalfAndBfloat16ConversionsMatchLlamaCpp) {
  SKIP_WITHOUT_LLAMA_CPP(l);
  // Bit patterns spread over the whole float range (every sign, exponent, NaN and infinity) plus the boundaries.
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 9973) {
    uint32_t u = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  for (float f : {65504.0f, 65519.996f, 65520.0f, 6.1035156e-05f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min()}) {
    x.push_back(f);
    x.push_back(-f);
  }
  std::vector<uint16_t> theirs(x.size());
  l->fp32_to_fp16_row(x.data(), theirs.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(Fp32ToFp16(x[i]), theirs[i]) << "fp16 of " << x[i];
  l->fp32_to_bf16_row_ref(x.data(), theirs.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(Fp32ToBf16(x[i]), theirs[i]) << "bf16 of " << x[i];
  // Every half back to float.
  std::vector<uint16_t> halves(65536);
  for (int i = 0; i < 65536; ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> back(65536);
  l->fp16_to_fp32_row(halves.data(), back.data(), 65536);
  for (int i = 0; i < 65536; ++i) {
    const float ours = Fp16ToFp32(halves[i]);
    ASSERT_EQ(0, std::memcmp(&ours, &back[i], 4)) << "half 0x" << std::hex << i;
  }
}

TEST(GgufBlocksTest, TraitsTable) {
  int count = 0;
  const TypeTraits* types = AllTypes(&count);
  ASSERT_EQ(count, 16);  // with MXFP4 (gguf_mxfp4.h)
  for (int t = 0; t < count; ++t) {
    EXPECT_EQ(FindType(types[t].type), &types[t]);
    EXPECT_EQ(*ParseGgmlType(types[t].name), types[t].type);
  }
  EXPECT_EQ(*ParseGgmlType("q4_1"), GgmlType::kQ4_1);
  EXPECT_EQ(*ParseGgmlType("iq4_xs"), GgmlType::kIQ4_XS);
  const auto bad = ParseGgmlType("Q5_2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("Q5_2"), std::string::npos);
  EXPECT_NE(std::string(bad.status().message()).find("Q4_K"), std::string::npos);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_1, 64), 40);
  EXPECT_EQ(RowBytes(GgmlType::kQ8_0, 32), 34);
  EXPECT_EQ(RowBytes(GgmlType::kBF16, 3), 6);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K, 512), 288);
  EXPECT_EQ(RowBytes(GgmlType::kIQ4_NL, 64), 36);
  EXPECT_EQ(RowBytes(kGgmlMxfp4, 64), 34);
  EXPECT_EQ(*ParseGgmlType("mxfp4"), kGgmlMxfp4);
}

}  // namespace
}  // namespace quark::exporter::gguf

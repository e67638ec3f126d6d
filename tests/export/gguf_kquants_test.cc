// The K-quants and IQ4 types against the real ggml (node-llama-cpp's libggml-base): every block of our quantizers
// equals ggml's on the same rows, without an imatrix (quantize_row_*_ref and quantize_<t>(…, NULL), which
// ggml_quantize_chunk and llama-quantize call) and with one (quantize_<t> with quant weights); random rows of odd row
// counts, zeros, outliers, constants, values under the search's 1e-15 threshold, and tinyllama-a's weights. Our
// dequantization equals ggml's bit for bit. Without ggml the tests skip, but fail under CI=true.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/export/gguf_blocks.h"
#include "core/export/gguf_kquants.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark::exporter::gguf {
namespace {

#define LLAMA_CPP_OR_SKIP(l)                                    \
  std::string why_##l;                                          \
  const testing::LlamaCpp* l = testing::LoadLlamaCpp(&why_##l); \
  if (l == nullptr) {                                           \
    QUARK_PEER_MISSING() << why_##l;                            \
  }

const GgmlType kKTypes[] = {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                            GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS};
// The legacy blocks' quantize_<t> (with an importance matrix since #37 item 4; their reference rows otherwise).
const GgmlType kLegacyTypes[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1};

// nrow × ncols row-major floats.
struct Rows {
  std::string label;
  int64_t nrow, ncols;
  std::vector<float> x;
};

Rows Random(int64_t nrow, int64_t ncols, uint32_t seed, float sd) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  Rows r{"random " + std::to_string(nrow) + "x" + std::to_string(ncols), nrow, ncols, {}};
  r.x.resize(nrow * ncols);
  for (float& v : r.x) v = normal(gen);
  return r;
}

// Rows whose blocks take the kernels' rare branches.
std::vector<Rows> KQuantEdgeRows() {
  std::vector<Rows> rows;
  auto row = [&](const std::string& label, int64_t ncols, auto f) {
    Rows r{label, 1, ncols, std::vector<float>(ncols)};
    for (int64_t j = 0; j < ncols; ++j) r.x[j] = f(j);
    rows.push_back(std::move(r));
  };
  row("zeros", 512, [](int64_t) { return 0.0f; });
  row("negative zeros", 256, [](int64_t) { return -0.0f; });
  row("constant", 256, [](int64_t) { return 0.75f; });
  row("constant negative", 256, [](int64_t) { return -0.3f; });
  row("all positive ramp", 256, [](int64_t j) { return 0.01f * (j + 1); });
  row("zero first super-block", 512, [](int64_t j) { return j < 256 ? 0.0f : std::sin(0.37f * j); });
  row("zero sub-blocks", 256, [](int64_t j) { return (j / 16) % 3 == 0 ? 0.0f : std::cos(0.11f * j); });
  row("outlier", 768, [](int64_t j) { return j == 300 ? 40.0f : 0.02f * std::sin(1.3f * j); });
  row("negative outlier", 256, [](int64_t j) { return j == 7 ? -25.0f : 0.01f * ((j % 9) - 4); });
  row("one nonzero", 256, [](int64_t j) { return j == 255 ? 1.0f : 0.0f; });
  row("below 1e-15", 256, [](int64_t j) { return (j % 5) * 1e-17f; });
  row("tiny", 256, [](int64_t j) { return ((j % 7) - 3) * 1e-6f; });
  row("large", 256, [](int64_t j) { return ((j % 11) - 5) * 2000.0f; });
  row("ties", 256, [](int64_t j) { return j % 2 ? 0.5f : -0.5f; });
  row("grid", 256, [](int64_t j) { return ((j % 16) - 8) * 0.125f; });
  return rows;
}

// Importance weights per column: log-normal, with some zero columns (imatrix of unused inputs).
std::vector<float> Imatrix(int64_t ncols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(ncols);
  for (int64_t j = 0; j < ncols; ++j) w[j] = j % 37 == 5 ? 0.0f : std::exp(normal(gen));
  return w;
}

std::string Ours(GgmlType type, const Rows& r, const float* qw) {
  std::string out(r.nrow * RowBytes(type, r.ncols), '\0');
  FindType(type)->quantize(r.x.data(), out.data(), r.nrow, r.ncols, qw);
  return out;
}

std::string Theirs(const testing::LlamaCpp& l, GgmlType type, const Rows& r, const float* qw) {
  std::string out(r.nrow * RowBytes(type, r.ncols), '\0');
  l.kquants.at(static_cast<int>(type)).quantize(r.x.data(), out.data(), r.nrow, r.ncols, qw);
  return out;
}

// The first differing block, for a readable failure.
std::string FirstDiff(GgmlType type, const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return "sizes differ";
  const int64_t bytes = FindType(type)->type_size;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return "block " + std::to_string(i / bytes) + " byte " + std::to_string(i % bytes);
  }
  return "equal";
}

void ExpectSameBlocks(const testing::LlamaCpp& l, const Rows& r, bool with_imatrix) {
  const std::vector<float> qw = Imatrix(r.ncols, static_cast<uint32_t>(r.ncols + r.nrow));
  std::vector<GgmlType> types(std::begin(kKTypes), std::end(kKTypes));
  types.insert(types.end(), std::begin(kLegacyTypes), std::end(kLegacyTypes));
  for (GgmlType type : types) {
    if (r.ncols % FindType(type)->block_size != 0) continue;
    const float* w = with_imatrix ? qw.data() : nullptr;
    const std::string ours = Ours(type, r, w), theirs = Theirs(l, type, r, w);
    EXPECT_TRUE(ours == theirs) << FindType(type)->name << " " << r.label << (with_imatrix ? " imatrix" : "") << ": "
                                << FirstDiff(type, ours, theirs);
  }
}

TEST(GgufKQuantsTest, RandomRowsMatchGgml) {
  LLAMA_CPP_OR_SKIP(l);
  for (const Rows& r : {Random(1, 256, 1, 0.02f), Random(3, 512, 2, 1.0f), Random(17, 768, 3, 0.05f),
                        Random(5, 96, 4, 0.3f), Random(1, 4096, 5, 0.01f)}) {
    ExpectSameBlocks(*l, r, /*with_imatrix=*/false);
    ExpectSameBlocks(*l, r, /*with_imatrix=*/true);
  }
}

TEST(GgufKQuantsTest, EdgeRowsMatchGgml) {
  LLAMA_CPP_OR_SKIP(l);
  for (const Rows& r : KQuantEdgeRows()) {
    ExpectSameBlocks(*l, r, /*with_imatrix=*/false);
    ExpectSameBlocks(*l, r, /*with_imatrix=*/true);
  }
}

// quantize_row_*_ref: what the K-quants' from_float runs without an imatrix; IQ4_NL's reference has no scale search
// (llama-quantize runs quantize_iq4_nl, which searches). Edge rows starting with a zero IQ4_NL block are left out:
// ggml leaves that block's codes uninitialized.
TEST(GgufKQuantsTest, ReferenceRowsMatchGgml) {
  LLAMA_CPP_OR_SKIP(l);
  std::vector<Rows> rows = KQuantEdgeRows();
  rows.push_back(Random(3, 512, 7, 0.02f));
  for (const Rows& r : rows) {
    const int64_t n = r.nrow * r.ncols;
    struct Case {
      GgmlType type;
      void (*ours)(const float*, void*, int64_t);
    };
    const Case cases[] = {
        {GgmlType::kQ2_K, [](const float* x, void* y, int64_t k) { QuantizeRowQ2_KRef(x, static_cast<BlockQ2_K*>(y), k); }},
        {GgmlType::kQ3_K, [](const float* x, void* y, int64_t k) { QuantizeRowQ3_KRef(x, static_cast<BlockQ3_K*>(y), k); }},
        {GgmlType::kQ4_K, [](const float* x, void* y, int64_t k) { QuantizeRowQ4_KRef(x, static_cast<BlockQ4_K*>(y), k); }},
        {GgmlType::kQ5_K, [](const float* x, void* y, int64_t k) { QuantizeRowQ5_KRef(x, static_cast<BlockQ5_K*>(y), k); }},
        {GgmlType::kQ6_K, [](const float* x, void* y, int64_t k) { QuantizeRowQ6_KRef(x, static_cast<BlockQ6_K*>(y), k); }},
        {GgmlType::kIQ4_NL, [](const float* x, void* y, int64_t k) { QuantizeRowIq4NlRef(x, static_cast<BlockIq4Nl*>(y), k); }},
        {GgmlType::kIQ4_XS, [](const float* x, void* y, int64_t k) { QuantizeRowIq4XsRef(x, static_cast<BlockIq4Xs*>(y), k); }},
    };
    for (const Case& c : cases) {
      if (c.type == GgmlType::kIQ4_NL && std::fabs(r.x[0]) < 1e-15f && r.label != "random 3x512") continue;
      std::string ours(RowBytes(c.type, n), '\0'), theirs(RowBytes(c.type, n), '\0');
      c.ours(r.x.data(), ours.data(), n);
      l->kquants.at(static_cast<int>(c.type)).quantize_row_ref(r.x.data(), theirs.data(), n);
      EXPECT_TRUE(ours == theirs) << FindType(c.type)->name << " ref " << r.label << ": " << FirstDiff(c.type, ours, theirs);
      // The traits' from_float is the reference for the K-quants (llama-quantize without an imatrix).
      if (c.type != GgmlType::kIQ4_NL) {
        std::string row(RowBytes(c.type, n), '\0');
        FindType(c.type)->from_float(r.x.data(), row.data(), n);
        EXPECT_TRUE(row == ours) << FindType(c.type)->name << " from_float " << r.label;
      }
    }
  }
}

TEST(GgufKQuantsTest, TinyLlamaWeightsMatchGgml) {
  LLAMA_CPP_OR_SKIP(l);
  auto reader = checkpoint::CheckpointReader::Open(quark::testing::FixturePath("tinyllama-a"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (const char* name : {"model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.v_proj.weight",
                           "model.layers.3.mlp.down_proj.weight", "model.embed_tokens.weight", "lm_head.weight"}) {
    auto t = (*reader)->Get(name);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_EQ(t->info->dtype, checkpoint::StDType::kF32) << name;
    Rows r{name, t->info->shape[0], t->info->shape[1], std::vector<float>(t->info->NumElements())};
    std::memcpy(r.x.data(), t->bytes().data(), t->bytes().size());
    ExpectSameBlocks(*l, r, /*with_imatrix=*/false);
    ExpectSameBlocks(*l, r, /*with_imatrix=*/true);
  }
}

TEST(GgufKQuantsTest, DequantizationMatchesGgml) {
  LLAMA_CPP_OR_SKIP(l);
  std::vector<Rows> rows = KQuantEdgeRows();
  rows.push_back(Random(2, 768, 9, 0.1f));
  for (const Rows& r : rows) {
    const int64_t n = r.nrow * r.ncols;
    for (GgmlType type : kKTypes) {
      const std::string bytes = Ours(type, r, nullptr);
      std::vector<float> ours(n), theirs(n);
      FindType(type)->to_float(bytes.data(), ours.data(), n);
      l->kquants.at(static_cast<int>(type)).dequantize_row(bytes.data(), theirs.data(), n);
      EXPECT_EQ(0, std::memcmp(ours.data(), theirs.data(), sizeof(float) * n)) << FindType(type)->name << " " << r.label;
      for (float v : ours) ASSERT_FALSE(std::isnan(v)) << FindType(type)->name << " " << r.label;
    }
  }
}

// The quantizers are worth their bits: a K-quant row dequantizes close to its input, closer with more bits.
TEST(GgufKQuantsTest, ErrorShrinksWithBits) {
  const Rows r = Random(4, 1024, 11, 1.0f);
  double previous = 1e30;
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const std::string bytes = Ours(type, r, nullptr);
    std::vector<float> back(r.x.size());
    FindType(type)->to_float(bytes.data(), back.data(), static_cast<int64_t>(back.size()));
    double err = 0;
    for (size_t i = 0; i < back.size(); ++i) err += (back[i] - r.x[i]) * (back[i] - r.x[i]);
    err = std::sqrt(err / back.size());
    EXPECT_LT(err, previous) << FindType(type)->name;
    EXPECT_LT(err, 0.5) << FindType(type)->name;
    previous = err;
  }
}

}  // namespace
}  // namespace quark::exporter::gguf

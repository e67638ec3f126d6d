// #37 item 4: the GGUF block types as AWQ's weight quantizer. GgufFakeQuantize must be exactly what the file holds:
// the writer's byte-exact kernels (checked against ggml in tests/export/gguf_kquants_test.cc) quantize each row and
// the dequantizers read it back, whatever the weight's layout or dtype.
#include "core/quantize/gguf_fake_quant.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/export/gguf_kquants.h"

namespace quark::quantize {
namespace {

namespace gguf = exporter::gguf;

// The file's values of `w` [rows, cols] in Q4_K / Q3_K / Q6_K through the kernels' own entry points.
at::Tensor ThroughTheKernels(const at::Tensor& w, gguf::GgmlType type) {
  const at::Tensor x = w.to(at::kFloat).contiguous();
  const int64_t rows = x.size(0), cols = x.size(1), blocks = cols / gguf::kQkK;
  at::Tensor y = at::empty_like(x);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = x.data_ptr<float>() + r * cols;
    float* dst = y.data_ptr<float>() + r * cols;
    if (type == gguf::GgmlType::kQ4_K) {
      std::vector<gguf::BlockQ4_K> b(blocks);
      gguf::QuantizeRowQ4_KRef(src, b.data(), cols);
      gguf::DequantizeRowQ4_K(b.data(), dst, cols);
    } else if (type == gguf::GgmlType::kQ3_K) {
      std::vector<gguf::BlockQ3_K> b(blocks);
      gguf::QuantizeRowQ3_KRef(src, b.data(), cols);
      gguf::DequantizeRowQ3_K(b.data(), dst, cols);
    } else {
      std::vector<gguf::BlockQ6_K> b(blocks);
      gguf::QuantizeRowQ6_KRef(src, b.data(), cols);
      gguf::DequantizeRowQ6_K(b.data(), dst, cols);
    }
  }
  return y;
}

TEST(GgufFakeQuantizeTest, IsTheBlockKernelsRoundTripOnOddRowCountsOutliersAndStridedInput) {
  at::manual_seed(7);
  for (const auto type : {gguf::GgmlType::kQ4_K, gguf::GgmlType::kQ3_K, gguf::GgmlType::kQ6_K}) {
    for (const int64_t rows : {1, 17, 1025}) {
      at::Tensor w = at::randn({rows, 512});
      w.index_put_({0, 3}, 40.0f);  // an outlier column entry
      if (rows > 1) w[1].zero_();   // an all-zero row
      auto q = GgufFakeQuantize(w, type);
      ASSERT_TRUE(q.ok()) << q.status();
      EXPECT_TRUE(at::equal(*q, ThroughTheKernels(w, type))) << static_cast<int>(type) << " rows " << rows;
      EXPECT_FALSE(at::equal(*q, w));  // it did quantize
      // A strided view of the same values (every other element of a wider tensor) gives the same bits.
      at::Tensor wide = at::zeros({rows, 512, 2});
      wide.select(2, 0).copy_(w);
      const at::Tensor strided = wide.select(2, 0);
      ASSERT_FALSE(strided.is_contiguous());
      auto qs = GgufFakeQuantize(strided, type);
      ASSERT_TRUE(qs.ok()) << qs.status();
      EXPECT_TRUE(at::equal(*qs, *q));
    }
  }
}

TEST(GgufFakeQuantizeTest, KeepsTheWeightsDtypeAndRefusesRowsTheBlocksDoNotCover) {
  const at::Tensor w = at::randn({4, 256}).to(at::kBFloat16);
  auto q = GgufFakeQuantize(w, gguf::GgmlType::kQ4_K);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(*q, ThroughTheKernels(w, gguf::GgmlType::kQ4_K).to(at::kBFloat16)));
  const auto short_rows = GgufFakeQuantize(at::randn({4, 100}), gguf::GgmlType::kQ4_K);
  EXPECT_EQ(short_rows.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_rows.status().message().find("Q4_K: rows of 100 are not a multiple of its block of 256"),
            std::string::npos)
      << short_rows.status();
  EXPECT_EQ(GgufFakeQuantize(at::randn({2, 2, 256}), gguf::GgmlType::kQ4_K).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A float type holds the values at its precision.
  auto f16 = GgufFakeQuantize(at::randn({3, 32}), gguf::GgmlType::kF16);
  ASSERT_TRUE(f16.ok()) << f16.status();
}

TEST(GgufFakeQuantizeTest, SearchSpecsGroupByTheTypesScalesAndCoverThePlannedLinearsOnly) {
  EXPECT_EQ(GgufScaleGroup(gguf::GgmlType::kQ4_K), 32);
  EXPECT_EQ(GgufScaleGroup(gguf::GgmlType::kQ3_K), 16);
  EXPECT_EQ(GgufScaleGroup(gguf::GgmlType::kQ6_K), 16);
  EXPECT_EQ(GgufScaleGroup(gguf::GgmlType::kF16), -1);
  const std::map<std::string, std::string> linears = {{"mlp.down_proj", "model.layers.0.mlp.down_proj"},
                                                      {"mlp.up_proj", "model.layers.0.mlp.up_proj"}};
  const algorithms::LayerQuantSpecs specs =
      GgufSearchSpecs(linears, {{"model.layers.0.mlp.down_proj.weight", gguf::GgmlType::kQ6_K}});
  ASSERT_EQ(specs.size(), 1u);
  const algorithms::LinearQuantSpecs& down = specs.at("mlp.down_proj");
  ASSERT_TRUE(down.weight.has_value());
  EXPECT_EQ(down.weight->group_size, 16);
  const at::Tensor w = at::randn({2, 256});
  auto q = down.weight_qdq(w);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(at::equal(*q, ThroughTheKernels(w, gguf::GgmlType::kQ6_K)));
}

}  // namespace
}  // namespace quark::quantize

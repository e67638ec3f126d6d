// #30 FP8 weights with E8M0 tile scales (mxfp8_2d: [32, 32] tiles, fp8_block_e8m0: [128, 128]): each tile's scale is
// the power of two Quark's e8m0 get_scale gives its amax (even_round, floor or ceil, emax 8 for fp8_e4m3), checked
// against a scalar reference written from that rule; fake quantization, real quantization (E8M0 bytes) read back bit
// for bit; the tensor-op kernels give the CPU kernels' bits; shapes the tiles do not divide are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/config/e8m0_tiles.h"
#include "core/config/presets.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/quant_kernels.h"
#include "core/numerics/quant_layout.h"
#include "core/numerics/real_quant.h"
#include "kernels/cpu/format_traits.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;

QuantSpec WeightOf(const char* preset) { return *PresetConfig(preset)->global_quant_config.weight; }

// Quark's ObserverBase.get_scale with scale_format e8m0 for fp8_e4m3 (emax 8), written independently of the engine:
// even: even_round adds half an e4m3 ulp (2^19 in the float32 bits) and drops the mantissa; floor / ceil: log2(amax)
// rounded down / up. A zero tile keeps the engine's (and its MX kernels') 2^-126, the smallest normal exponent.
float ReferenceTileScale(float amax, ScaleCalculationMode mode) {
  if (amax == 0.0f) return std::ldexp(1.0f, -126);
  int e = 0;
  const float m = std::frexp(amax, &e);  // amax = m * 2^e, m in [0.5, 1)
  int log2_floor = e - 1;
  if (mode == ScaleCalculationMode::kEven) {
    uint32_t bits;
    std::memcpy(&bits, &amax, 4);
    bits = (bits + (1u << 19)) & 0x7F800000u;
    float rounded;
    std::memcpy(&rounded, &bits, 4);
    log2_floor = std::ilogb(rounded);
  } else if (mode == ScaleCalculationMode::kCeil && m != 0.5f) {
    log2_floor += 1;
  }
  return std::ldexp(1.0f, std::clamp(log2_floor - 8, -127, 127));
}

struct TileRef {
  at::Tensor scale;  // [rows / br, cols / bc]
  at::Tensor y;      // fake-quantized x
};

TileRef Reference(const at::Tensor& x, int64_t br, int64_t bc, ScaleCalculationMode mode) {
  const auto& e4m3 = kernels::Traits(kernels::ElemFormat::kFp8E4M3);
  TileRef ref{at::empty({x.size(0) / br, x.size(1) / bc}), at::empty_like(x)};
  auto xa = x.accessor<float, 2>();
  auto ya = ref.y.accessor<float, 2>();
  for (int64_t r0 = 0; r0 < x.size(0); r0 += br) {
    for (int64_t c0 = 0; c0 < x.size(1); c0 += bc) {
      float amax = 0.0f;
      for (int64_t r = r0; r < r0 + br; ++r) {
        for (int64_t c = c0; c < c0 + bc; ++c) amax = std::max(amax, std::fabs(xa[r][c]));
      }
      const float s = ReferenceTileScale(amax, mode);
      ref.scale[r0 / br][c0 / bc] = s;
      for (int64_t r = r0; r < r0 + br; ++r) {
        for (int64_t c = c0; c < c0 + bc; ++c) ya[r][c] = e4m3.round_ref(std::clamp(xa[r][c] / s, -448.0f, 448.0f)) * s;
      }
    }
  }
  return ref;
}

// Values that sit on the rounding edges of the exponent: 479 stays in 2^8's binade under "even" (and saturates at
// 448), 496 moves up to 2^9; 2^7 exactly (floor == ceil); tiny (subnormal codes) and zero tiles. Needs 2 x 2 tiles.
at::Tensor EdgeWeights(int64_t rows, int64_t cols, int64_t br, int64_t bc, uint64_t seed) {
  at::Tensor w = RandomTensor({rows, cols}, seed);
  w[0][1] = 479.0f;
  w[br][2 * bc - 1] = -496.0f;
  w.narrow(0, 0, br).narrow(1, bc, bc).clamp_(-100.0f, 100.0f)[1][2] = 128.0f;
  w.narrow(0, br, br).narrow(1, 0, bc).mul_(1e-30f);
  w.narrow(0, rows - br, br).narrow(1, cols - bc, bc).zero_();
  return w;
}

TEST(E8m0TilesTest, PresetsAreE8m0TilesNotOcpMx) {
  for (const char* preset : {"mxfp8_2d", "fp8_block_e8m0"}) {
    const QuantSpec w = WeightOf(preset);
    EXPECT_TRUE(IsE8m0Tiles(w)) << preset;
    EXPECT_TRUE(w.IsMx()) << preset << ": scale_format e8m0 (why IsOcpMx exists)";
    EXPECT_FALSE(IsOcpMx(w)) << preset;
  }
  EXPECT_EQ(*E8m0TileFormOf(WeightOf("mxfp8_2d")), E8m0TileForm::kMxfp8);
  EXPECT_EQ(*E8m0TileFormOf(WeightOf("fp8_block_e8m0")), E8m0TileForm::kFp8Block);
  EXPECT_TRUE(IsOcpMx(WeightOf("mxfp8")));
  EXPECT_FALSE(IsE8m0Tiles(WeightOf("fp8_block")));
}

TEST(E8m0TilesTest, TileScalesAndValuesMatchTheScalarReference) {
  struct Case {
    const char* preset;
    int64_t rows, cols, br, bc;
  };
  for (const Case& c : {Case{"mxfp8_2d", 96, 160, 32, 32}, Case{"fp8_block_e8m0", 256, 384, 128, 128}}) {
    for (auto mode : {ScaleCalculationMode::kEven, ScaleCalculationMode::kFloor, ScaleCalculationMode::kCeil}) {
      QuantSpec spec = WeightOf(c.preset);
      spec.scale_calculation_mode = mode;
      const at::Tensor w = EdgeWeights(c.rows, c.cols, c.br, c.bc, c.rows + static_cast<int>(mode));
      const TileRef ref = Reference(w, c.br, c.bc, mode);
      auto params = ParamsOf(w, spec, TensorRole::kWeight);
      ASSERT_TRUE(params.ok()) << params.status();
      EXPECT_TRUE(BitEqual(params->scale, ref.scale)) << c.preset << " mode " << Name(mode);
      auto y = FakeQuantize(w, spec, *params);
      ASSERT_TRUE(y.ok()) << y.status();
      EXPECT_TRUE(BitEqual(*y, ref.y)) << c.preset << " mode " << Name(mode);
    }
  }
  // The even rule on the edges: 479 keeps scale 1 (479 saturates to 448), 496 takes scale 2.
  const at::Tensor w = EdgeWeights(96, 160, 32, 32, 7);
  auto p = ParamsOf(w, WeightOf("mxfp8_2d"), TensorRole::kWeight);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scale[0][0].item<float>(), 1.0f);
  EXPECT_EQ(p->scale[0][1].item<float>(), 0.5f);
  EXPECT_EQ(p->scale[1][1].item<float>(), 2.0f);
  auto y = FakeQuantize(w, WeightOf("mxfp8_2d"), *p);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ((*y)[0][1].item<float>(), 448.0f);
}

TEST(E8m0TilesTest, RealQuantizationKeepsE8m0BytesAndReadsBackTheFakeQuantizedWeight) {
  for (const char* preset : {"mxfp8_2d", "fp8_block_e8m0"}) {
    const QuantSpec spec = WeightOf(preset);
    const int64_t br = spec.block_size[0], bc = spec.block_size[1];
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const at::Tensor w = EdgeWeights(2 * br, 3 * bc, br, bc, 11).to(dtype);
      auto params = ParamsOf(w, spec, TensorRole::kWeight);
      ASSERT_TRUE(params.ok()) << params.status();
      auto q = QuantizeReal(w, spec, *params);
      ASSERT_TRUE(q.ok()) << q.status();
      EXPECT_EQ(q->codes.scalar_type(), at::kByte);
      EXPECT_EQ(q->scale.scalar_type(), at::kByte);
      EXPECT_EQ(q->scale.sizes().vec(), (std::vector<int64_t>{2, 3}));
      const at::Tensor log2 = at::log2(params->scale.to(at::kFloat)).round().to(at::kInt) + 127;
      EXPECT_TRUE(at::equal(q->scale.to(at::kInt), log2)) << preset;
      auto back = Dequantize(*q, spec, dtype);
      ASSERT_TRUE(back.ok()) << back.status();
      auto fake = FakeQuantize(w, spec, *params);
      ASSERT_TRUE(fake.ok());
      EXPECT_TRUE(BitEqual(*back, *fake)) << preset << " " << c10::toString(dtype);
    }
  }
}

TEST(E8m0TilesTest, TensorOpKernelsGiveTheCpuKernelsBits) {
  for (const char* preset : {"mxfp8_2d", "fp8_block_e8m0"}) {
    const QuantSpec spec = WeightOf(preset);
    const int64_t br = spec.block_size[0], bc = spec.block_size[1];
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      const at::Tensor w = (EdgeWeights(2 * br, 2 * bc, br, bc, 5) * (dtype == at::kHalf ? 0.01 : 1.0)).to(dtype);
      auto params = ParamsOf(w, spec, TensorRole::kWeight);
      ASSERT_TRUE(params.ok()) << params.status();
      auto cpu = FakeQuantize(w, spec, *params);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      auto layout = ResolveLayout(spec, TensorRole::kWeight, w.sizes());
      ASSERT_TRUE(layout.ok());
      const at::Tensor in = KernelInput(w, *layout);
      at::Tensor out = at::empty_like(in);
      TensorOpQuantKernels().FakeFloat(in, out, ChannelLayoutOf(in, *layout), params->scale.to(at::kFloat).contiguous(),
                                       kernels::ElemFormat::kFp8E4M3);
      EXPECT_TRUE(BitEqual(FromKernelLayout(out, *layout, 2), *cpu)) << preset << " " << c10::toString(dtype);
    }
  }
}

// vLLM's QuarkW8A8Mxfp8 quantizes the input of [R, 32] tiles as MXFP8 (kMxfp8Dynamic: an E8M0 scale per 32), so the
// preset's activations are the mxfp8 preset's, not fp8 token groups with float scales (amax / 448) as fp8_block's.
TEST(E8m0TilesTest, ActivationsAreMxfp8AsQuarkW8A8Mxfp8QuantizesThem) {
  const QuantSpec in = *PresetConfig("mxfp8_2d")->global_quant_config.input_tensors;
  EXPECT_EQ(*in.group_size, 32);
  const at::Tensor x = RandomTensor({5, 96}, 3);
  auto y = FakeQuantizeDynamic(x, in, TensorRole::kActivation);
  ASSERT_TRUE(y.ok()) << y.status();
  auto mx = FakeQuantizeDynamic(x, *PresetConfig("mxfp8")->global_quant_config.input_tensors, TensorRole::kActivation);
  ASSERT_TRUE(mx.ok()) << mx.status();
  EXPECT_TRUE(BitEqual(*y, *mx));
  const auto& e4m3 = kernels::Traits(kernels::ElemFormat::kFp8E4M3);
  at::Tensor float_scaled = at::empty_like(x);
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t g = 0; g < 96; g += 32) {
      const float s = x[r].narrow(0, g, 32).abs().max().item<float>() / 448.0f;
      for (int64_t c = g; c < g + 32; ++c) {
        float_scaled[r][c] = e4m3.round_ref(std::clamp(x[r][c].item<float>() / s, -448.0f, 448.0f)) * s;
      }
    }
  }
  EXPECT_FALSE(BitEqual(*y, float_scaled));
}

TEST(E8m0TilesTest, ShapesTheTilesDoNotDivideAreRefusedNamingShapeAndRule) {
  for (auto shape : {std::vector<int64_t>{48, 64}, std::vector<int64_t>{64, 40}}) {
    auto p = ParamsOf(at::ones(shape), WeightOf("mxfp8_2d"), TensorRole::kWeight);
    ASSERT_FALSE(p.ok());
    const std::string m(p.status().message());
    EXPECT_NE(m.find("block_size"), std::string::npos) << m;
    EXPECT_NE(m.find(ShapeString(shape)), std::string::npos) << m;
    EXPECT_NE(m.find("out_features % 32 == 0 and in_features % 32 == 0"), std::string::npos) << m;
  }
  QuantSpec fp8e5m2 = WeightOf("mxfp8_2d");
  fp8e5m2.dtype = DType::kFp8E5M2;
  auto p = ParamsOf(at::ones({64, 64}), fp8e5m2, TensorRole::kWeight);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("dtype"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace quark

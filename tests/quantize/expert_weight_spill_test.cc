// #32 item 5: ExpertWeightSpill, where GPTQ's weights of experts streamed in groups wait for their next load. A weight
// on its grid comes back bit for bit from its codes (uint4 and int4 codes two to a byte, fp8 one), anything else from
// float32; files are sized by what they hold; a file gone missing is named.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/config/presets.h"
#include "core/numerics/fake_quant.h"
#include "core/numerics/observer.h"
#include "core/quantize/expert_weight_spill.h"

namespace quark::quantize {
namespace {

bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         at::equal(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt));
}

// A [64, 256] float32 weight fake-quantized with `preset`'s weight spec and its min/max parameters.
struct GridWeight {
  at::Tensor weight;
  QuantSpec spec;
  QuantParams params;
};
GridWeight OnGrid(const std::string& preset) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({64, 256});
  GridWeight g;
  g.spec = *PresetConfig(preset)->global_quant_config.weight;
  auto observer = MakeObserver(g.spec, TensorRole::kWeight);
  EXPECT_TRUE(observer.ok()) << observer.status();
  EXPECT_TRUE((*observer)->Observe(w).ok());
  g.params = *(*observer)->ComputeParams();
  g.weight = *FakeQuantize(w, g.spec, g.params);
  return g;
}

TEST(ExpertWeightSpillTest, GridWeightsComeBackBitForBitFromTheirCodes) {
  auto spill = ExpertWeightSpill::Create();
  ASSERT_TRUE(spill.ok()) << spill.status();
  int64_t expected_bytes = 0;
  for (const auto& [preset, code_bytes] : {std::pair<std::string, int64_t>{"uint4_wo_128", 64 * 256 / 2},
                                           {"int4_wo_128", 64 * 256 / 2}, {"fp8", 64 * 256}}) {
    SCOPED_TRACE(preset);
    const GridWeight g = OnGrid(preset);
    const std::string name = "model.layers.0.mlp.experts.1." + preset + ".weight";
    ASSERT_TRUE((*spill)->Put(name, g.weight, &g.spec, &g.params).ok());
    auto back = (*spill)->GetStored(name);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(BitEqual(*back, g.weight));
    auto bf16 = (*spill)->Get(name, at::kBFloat16);
    ASSERT_TRUE(bf16.ok());
    EXPECT_TRUE(at::equal(*bf16, g.weight.to(at::kBFloat16)));
    const int64_t before = expected_bytes;
    expected_bytes = (*spill)->bytes();
    // The codes, plus the scales and zero points (a few hundred bytes): far below the 64 KB of float32.
    EXPECT_GE(expected_bytes - before, code_bytes);
    EXPECT_LT(expected_bytes - before, code_bytes + 64 * 256 / 8);
  }
  EXPECT_EQ((*spill)->grid_tensors(), 3);
}

TEST(ExpertWeightSpillTest, WeightsOffTheGridOrWithoutParametersStayFloat) {
  auto spill = ExpertWeightSpill::Create();
  ASSERT_TRUE(spill.ok());
  GridWeight g = OnGrid("uint4_wo_128");
  const at::Tensor off = g.weight + 1e-3;  // not on the grid: codes would not give it back
  ASSERT_TRUE((*spill)->Put("a.weight", off, &g.spec, &g.params).ok());
  ASSERT_TRUE((*spill)->Put("b.weight", g.weight, nullptr, nullptr).ok());
  EXPECT_EQ((*spill)->grid_tensors(), 0);
  EXPECT_EQ((*spill)->bytes(), 2 * 64 * 256 * 4);
  EXPECT_TRUE(BitEqual(*(*spill)->GetStored("a.weight"), off));
  EXPECT_TRUE(BitEqual(*(*spill)->GetStored("b.weight"), g.weight));
  // A second Put replaces the first (its file too).
  ASSERT_TRUE((*spill)->Put("a.weight", g.weight, &g.spec, &g.params).ok());
  EXPECT_TRUE(BitEqual(*(*spill)->GetStored("a.weight"), g.weight));
  EXPECT_EQ((*spill)->tensors(), 2);
  EXPECT_LT((*spill)->bytes(), 2 * 64 * 256 * 4);
  EXPECT_FALSE((*spill)->Has("c.weight"));
  EXPECT_EQ((*spill)->Get("c.weight", at::kFloat).status().code(), absl::StatusCode::kNotFound);
}

TEST(ExpertWeightSpillTest, AMissingFileIsNamedAndTheFolderGoesWithTheSpill) {
  std::string dir;
  {
    auto spill = ExpertWeightSpill::Create();
    ASSERT_TRUE(spill.ok());
    const GridWeight g = OnGrid("fp8");
    ASSERT_TRUE((*spill)->Put("x.weight", g.weight, &g.spec, &g.params).ok());
    dir = (*spill)->Location().substr(0, (*spill)->Location().find(' '));
    ASSERT_TRUE(std::filesystem::is_directory(dir));
    for (const auto& entry : std::filesystem::directory_iterator(dir)) std::filesystem::resize_file(entry.path(), 3);
    auto lost = (*spill)->GetStored("x.weight");
    ASSERT_FALSE(lost.ok());
    EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(lost.status().message()).find(dir), std::string::npos) << lost.status();
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

}  // namespace
}  // namespace quark::quantize

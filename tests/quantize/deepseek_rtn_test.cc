// DeepSeek-V3 (#32) through the engine's layer quantizer (RTN: LayerQuantizer::Apply on each streamed layer, the
// plan built from the model's modules as the pipeline builds it): every linear of MLA, the dense MLP, the shared and
// the routed experts becomes a QuantLinear under its HF name, the router stays float, and the fake-quantized logits
// move from the float ones by what 4-bit weights cost, not more. (Not yet through `quark quantize`: the family is
// not in TransformerModel; see docs/results.md.)
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/estimate/deepseek_shape.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/deepseek_model.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/synthetic_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;

TEST(DeepseekRtnTest, EveryLinearIsQuantizedUnderItsNameAndTheLogitsStayClose) {
  runtime::testing::InitTestEngine();
  const fs::path dir = fs::temp_directory_path() / ("quark_deepseek_rtn_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  runtime::SyntheticModelOptions options;
  options.arch = "deepseek_v3";
  options.shape = "tiny";
  options.dtype = "f32";
  options.seed = 9;
  options.out_dir = dir.string();
  ASSERT_TRUE(runtime::MakeSyntheticModel(options).ok());
  const checkpoint::DeepseekConfig config = *runtime::DeepseekSyntheticConfig("tiny", "float32");
  auto reader = checkpoint::CheckpointReader::Open(dir.string());
  ASSERT_TRUE(reader.ok());
  runtime::CheckpointWeightSource weights(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));

  auto preset = PresetConfig("uint4_wo_32");
  ASSERT_TRUE(preset.ok());
  preset->exclude = {"lm_head"};
  const auto modules = estimate::DeepseekModelShape(config, checkpoint::StDType::kF32).modules;
  const LayerQuantizer quantizer(*preset, BuildLayerPlan(*preset, modules));
  int64_t quantized = 0, linears = 0;
  const auto rtn = [&](runtime::DecoderLayer& layer) -> absl::Status {
    // Weight-only: nothing to calibrate, so Apply with no parameters installs and freezes (fake-quantized weights).
    auto installed = quantizer.Apply(layer, CalibratedParams{});
    if (!installed.ok()) return installed.status();
    quantized += static_cast<int64_t>(installed->size());
    linears += static_cast<int64_t>(layer.NamedLinears().size());
    for (const auto& named : layer.NamedLinears()) {
      EXPECT_NE(std::dynamic_pointer_cast<QuantLinear>(named.linear), nullptr) << named.name;
    }
    return absl::OkStatus();
  };
  const at::Tensor ids = at::arange(3, 3 + 2 * 24, at::kLong).remainder(512).view({2, 24});
  auto float_logits = runtime::DeepseekLogits(config, weights, ids, at::kFloat);
  ASSERT_TRUE(float_logits.ok()) << float_logits.status();
  auto rtn_logits = runtime::DeepseekLogits(config, weights, ids, at::kFloat, rtn);
  ASSERT_TRUE(rtn_logits.ok()) << rtn_logits.status();
  // 3 layers: (5 attention + 3 MLP) + 2 x (5 attention + 3 shared + 16 x 3 experts).
  EXPECT_EQ(linears, 8 + 2 * (8 + 48));
  EXPECT_EQ(quantized, linears);
  const double moved = (*rtn_logits - *float_logits).abs().max().item<double>();
  const double scale = float_logits->abs().max().item<double>();
  EXPECT_GT(moved, 1e-4 * scale);  // the weights were quantized
  EXPECT_LT(moved, 0.25 * scale);  // by 4-bit RTN's error, not a broken layer
  std::cout << "uint4_wo_32 RTN: max |logit change| " << moved << " of max |logit| " << scale << "\n";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace quark::quantize

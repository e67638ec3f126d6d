// The export against the fake-quantized model it was written from (export_agreement.h). numerics.md (as Quark)
// rounds x / s before adding the zero point when fake-quantizing and after it when exporting, so a tie lands on
// different codes. AWQ's clip makes such ties systematic (a row clipped to [-c, c] has c / s = 7.5 exactly), which is
// why an AWQ uint4 per-channel export reloads a little away from ppl_after: the engine counts those elements, and
// with a symmetric spec (no zero point, no such tie) the export reloads to ppl_after exactly.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/config/presets.h"
#include "core/quantize/export_agreement.h"
#include "core/quantize/linear_export_data.h"
#include "core/quantize/quant_linear.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/test_model.h"

namespace quark::quantize {
namespace {

QuantSpec PerChannel(DType dtype, bool symmetric) {
  QuantSpec s;
  s.dtype = dtype;
  s.qscheme = QScheme::kPerChannel;
  s.ch_axis = 0;
  s.symmetric = symmetric;
  return s;
}

// Row 0 as AWQ's clip leaves it: every value in [-c, c], +c three times, -c twice; row 1 unclipped.
// c is a clip value AWQ chose on tinyllama-a (model.layers.0.mlp.down_proj row 14).
constexpr float kClip = 0.041015983f;
constexpr int64_t kAtPlusClip = 3;

at::Tensor ClippedWeight() {
  at::Tensor w = at::empty({2, 16});
  auto a = w.accessor<float, 2>();
  const float inside[] = {0.013f, -0.0271f, 0.0052f, 0.0319f, -0.0088f, 0.0197f, -0.0344f, 0.0007f, 0.0241f, -0.0166f,
                          0.0288f};
  int64_t j = 0;
  for (int64_t k = 0; k < kAtPlusClip; ++k) a[0][j++] = kClip;
  a[0][j++] = -kClip;
  a[0][j++] = -kClip;
  for (float v : inside) a[0][j++] = v;
  for (int64_t k = 0; k < 16; ++k) a[1][k] = 0.003f * static_cast<float>(k) - 0.017f;
  return w;
}

exporter::LinearExportData Exported(const QuantSpec& spec, const at::Tensor& weight) {
  QuantLinearOptions o;
  o.name = "model.layers.0.mlp.down_proj";
  o.config.weight = spec;
  o.weight = weight;
  auto q = QuantLinear::Create(o);
  EXPECT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE((*q)->Freeze().ok());
  auto data = LinearExportDataOf(**q);
  EXPECT_TRUE(data.ok()) << data.status();
  return *data;
}

TEST(ExportAgreementTest, AClippedRowsMaximumIsATieTheExportRoundsTheOtherWay) {
  const exporter::LinearExportData data = Exported(PerChannel(DType::kUInt4, false), ClippedWeight());
  const float s = data.weight_codes.scale[0].item<float>();
  // The premise: c * (1 / s) is exactly 7.5, and z = 7 (-c / s, divided, is -7.4999995).
  ASSERT_EQ(kClip * (1.0f / s), 7.5f);
  ASSERT_EQ(data.weight_codes.zero_point[0].item<int>(), 7);
  // Fake: round(7.5) + 7 = 15 -> 8 s; export: round(14.5) = 14 (half even) -> 7 s.
  const at::Tensor codes = data.weight_codes.codes.to(at::kInt);
  for (int64_t j = 0; j < kAtPlusClip; ++j) {
    EXPECT_EQ(codes[0][j].item<int>(), 14) << "column " << j;
    EXPECT_EQ(data.weight[0][j].item<float>(), 8.0f * s) << "column " << j;
  }
  auto differing = ExportWeightDifferences(data);
  ASSERT_TRUE(differing.ok()) << differing.status();
  EXPECT_EQ(*differing, kAtPlusClip);  // nothing else: -c and the inside values round alike on both paths
}

TEST(ExportAgreementTest, ASymmetricSpecHasNoZeroPointAndNoDifference) {
  auto differing = ExportWeightDifferences(Exported(PerChannel(DType::kInt4, true), ClippedWeight()));
  ASSERT_TRUE(differing.ok()) << differing.status();
  EXPECT_EQ(*differing, 0);
}

// End to end on tinyllama-a with AWQ (clip included): the count is reported, and it is the whole story: without
// differing elements the reloaded export evaluates to ppl_after within 1e-6.
QuantizeModelOptions AwqRun(const std::string& preset, const std::string& text) {
  QuantizeModelOptions o;
  o.config = *PresetConfig(preset);
  o.config.algo_config.push_back(AwqAlgo{});
  o.calibration_file = text;
  o.num_calibration_samples = 4;
  o.seq_len = 64;
  o.eval_text_file = text;
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  o.output_dir = testing::TempPath("export_agreement_" + preset);
  return o;
}

TEST(ExportAgreementTest, AwqPerChannelExportsCountTheirTiesAndReloadExactlyWithoutThem) {
  const std::string text = testing::SmallEvalText();
  auto asym = QuantizeModel(testing::FixturePath("tinyllama-a"), AwqRun("uint4_wo_per_channel", text));
  ASSERT_TRUE(asym.ok()) << asym.status();
  ASSERT_TRUE(asym->metrics.count("export_weight_differences"));
  // AWQ clips rows of every non-q/k linear: their +c elements are ties.
  EXPECT_GT(asym->metrics.at("export_weight_differences"), 0);
  const double after = asym->metrics.at("ppl_after");
  EXPECT_NEAR(asym->metrics.at("ppl_reloaded"), after, 1e-2 * after);

  auto sym = QuantizeModel(testing::FixturePath("tinyllama-a"), AwqRun("int4_wo_per_channel", text));
  ASSERT_TRUE(sym.ok()) << sym.status();
  EXPECT_EQ(sym->metrics.at("export_weight_differences"), 0);
  const double sym_after = sym->metrics.at("ppl_after");
  EXPECT_NEAR(sym->metrics.at("ppl_reloaded"), sym_after, 1e-6 * sym_after);
}

}  // namespace
}  // namespace quark::quantize

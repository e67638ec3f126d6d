// gpt-oss's MXFP4 experts (#32 item 2): the dequantization against a scalar reading of transformers'
// convert_moe_packed_tensors (FP4_VALUES[nibble] * 2^(scale - 127), low nibble first, then [E, out, in] transposed to
// [E, in, out]), mis-shaped blocks refused by name, and a whole MXFP4 checkpoint read through Mxfp4ExpertSource: its
// logits equal those of the float checkpoint holding the same expert values.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/runtime/gpt_oss_model.h"
#include "core/runtime/mxfp4_expert_source.h"
#include "tests/runtime/gpt_oss_mxfp4_twin.h"
#include "tests/runtime/gpt_oss_test_models.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

using ::testing::HasSubstr;

// transformers' FP4_VALUES, read one code at a time.
double Fp4(int code) {
  static const double kValues[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  return kValues[code];
}

using testing::RandomMxfp4;

TEST(Mxfp4Test, DequantizesAsTransformersConvertMoePackedTensors) {
  const auto [blocks, scales] = RandomMxfp4(2, 3, 64, 1);
  auto values = DequantizeMxfp4(blocks, scales, "experts.gate_up_proj");
  ASSERT_TRUE(values.ok()) << values.status();
  ASSERT_EQ(values->sizes(), (std::vector<int64_t>{2, 64, 3}));  // [E, in, out]
  const auto b = blocks.accessor<uint8_t, 4>();
  const auto s = scales.accessor<uint8_t, 3>();
  const auto v = values->accessor<float, 3>();
  for (int64_t e = 0; e < 2; ++e) {
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t k = 0; k < 64; ++k) {
        const uint8_t byte = b[e][r][k / 32][(k % 32) / 2];
        const int code = k % 2 == 0 ? byte & 0x0F : byte >> 4;  // even columns: the low nibble
        const double expected = std::ldexp(Fp4(code), static_cast<int>(s[e][r][k / 32]) - 127);
        ASSERT_EQ(static_cast<double>(v[e][k][r]), expected) << e << " " << r << " " << k;
      }
    }
  }
  // Blocks and scales that disagree name the tensor and both shapes.
  auto refused = DequantizeMxfp4(blocks, scales.narrow(1, 0, 2), "model.layers.0.mlp.experts.down_proj");
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("\"model.layers.0.mlp.experts.down_proj\": blocks [2, 3, 2, 16] and scales [2, 2, 2]"));
}

TEST(Mxfp4Test, AnMxfp4CheckpointRunsAsItsDequantizedFloatTwin) {
  testing::InitTestEngine();
  const testing::TinyGptOss model("mxfp4", 7);
  const checkpoint::GptOssConfig& config = model.config;
  const std::filesystem::path dir = model.dir.string() + "_mxfp4";
  std::filesystem::remove_all(dir);
  TensorMapWeightSource twin;  // the same model with the dequantized experts in float
  testing::WriteMxfp4Twin(config, model.dir, *model.weights, dir, &twin);
  checkpoint::GptOssConfig mxfp4 = config;
  mxfp4.mxfp4_experts = true;
  auto reparsed = checkpoint::ParseGptOssConfig(checkpoint::GptOssConfigToJson(mxfp4));
  ASSERT_TRUE(reparsed.ok()) << reparsed.status();
  EXPECT_TRUE(reparsed->mxfp4_experts);
  auto reader = checkpoint::CheckpointReader::Open(dir.string());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const Mxfp4ExpertSource source(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  EXPECT_TRUE(source.Has("model.layers.1.mlp.experts.down_proj"));
  EXPECT_TRUE(source.Has("model.layers.1.self_attn.sinks"));
  const at::Tensor ids = at::arange(5, 5 + 24, at::kLong).view({2, 12});
  auto from_mxfp4 = GptOssLogits(*reparsed, source, ids, at::kFloat);
  ASSERT_TRUE(from_mxfp4.ok()) << from_mxfp4.status();
  auto from_twin = GptOssLogits(config, twin, ids, at::kFloat);
  ASSERT_TRUE(from_twin.ok()) << from_twin.status();
  EXPECT_TRUE(at::equal(*from_mxfp4, *from_twin));
  auto float_logits = GptOssLogits(config, *model.weights, ids, at::kFloat);
  EXPECT_FALSE(at::allclose(*from_mxfp4, *float_logits));  // the experts did change
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace quark::runtime

// AMD Quark's own import code as the peer of our HF-quark export (#30 item 3 (c)): run in the Debian trixie chroot
// by tests/peers/quark/run_peer.sh from a gathered copy of Quark's source, it parses our quantization_config with
// QConfig.from_dict, builds a QParamsLinear per quantized linear (its ImportBuilder allocates the packed weight, scale
// and zero-point shapes, and load_state_dict checks ours against them), and dequantizes every weight with the real
// quantizer (unpack, kernel.dequantize; SequentialRealQuantizer for two-stage weights). Its float32 weights must
// equal the engine's read-back of the same export (HfQuarkWeightSource, which equals the fake-quantized model) bit
// for bit. A format Quark's importer cannot dequantize is pinned with Quark's own error.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/export/hf_quark_source.h"
#include "tests/export/ct_test_export.h"
#include "tests/export/gguf_moe_models.h"
#include "tests/export/peer_run.h"

namespace quark {
namespace {

constexpr char kNotProvisioned[] =
    "Quark peer not provisioned on this machine (its source is on GitHub only; tests/peers/quark/run_peer.sh says "
    "what is missing)";

class QuarkPeerTest : public testing::CtModelsTest {
 protected:
  /// `preset` (may end in "+gptq" / "+awq") quantized and exported as HF-quark alone (written straight into the
  /// folder, as a single format is); the export folder.
  static absl::StatusOr<std::string> ExportHfQuark(const std::string& model, const std::string& preset) {
    auto config = testing::PresetWithAlgo(preset);
    if (!config.ok()) return config.status();
    std::string label = "quark_peer_" + preset;
    std::replace(label.begin(), label.end(), '+', '_');
    return testing::ExportFormats(model, *config, label, {"hf_quark"});
  }
};

// Units in the last place between two float32 tensors of one sign pattern (-1: other shapes).
int64_t MaxUlps(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return -1;
  return (a.contiguous().view(at::kInt).to(at::kLong) - b.contiguous().view(at::kInt).to(at::kLong))
      .abs()
      .max()
      .item<int64_t>();
}

// Quark's import of `export_dir` against our reader: bit for bit, or within `max_ulps` float32 ulps where the two
// multiply the same factors in another order; `imported` gets the linears Quark built.
void ExpectQuarkImportsOurWeights(const std::string& export_dir, std::vector<std::string>* imported = nullptr,
                                  int64_t max_ulps = 0) {
  const std::string out = testing::TempPath("quark_peer") + ".safetensors";
  const testing::PeerRun run = testing::RunPeer("quark", export_dir, out);
  // Quark's source is on GitHub only, which CI machines cannot reach: a visible skip on the allowed list
  // (tests/support/legitimate_skips.txt), never a pass.
  if (run.exit_code == 77) GTEST_SKIP() << kNotProvisioned;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto report =
      nlohmann::json::parse(run.output.substr(run.output.rfind('{', run.output.find("\"quark_commit\""))), nullptr,
                            false);
  ASSERT_FALSE(report.is_discarded()) << run.output;
  // Every tensor we wrote for an imported linear is one Quark's QParamsLinear holds, and every linear the config
  // quantizes was exported quantized.
  EXPECT_TRUE(report["unexpected_keys"].empty()) << report["unexpected_keys"].dump();
  EXPECT_TRUE(report["float_but_configured"].empty()) << report["float_but_configured"].dump();
  auto peer = checkpoint::CheckpointReader::OpenFile(out);
  auto ours = exporter::HfQuarkWeightSource::Open(export_dir);
  ASSERT_TRUE(peer.ok()) << peer.status();
  ASSERT_TRUE(ours.ok()) << ours.status();
  const auto names = (*peer)->Names();
  if (imported != nullptr) imported->assign(names.begin(), names.end());
  EXPECT_EQ(static_cast<int64_t>(names.size()), report["modules"].get<int64_t>());
  EXPECT_GT(names.size(), 0u);
  for (const std::string& name : names) {
    auto theirs = testing::PeerTensor(**peer, name);
    ASSERT_TRUE(theirs.ok()) << name << ": " << theirs.status();
    auto mine = (*ours)->Get(name, at::kFloat);
    ASSERT_TRUE(mine.ok()) << name << ": " << mine.status();
    if (max_ulps == 0) {
      EXPECT_EQ(testing::DifferingElements(*theirs, *mine), 0)
          << name << " (Quark's quantizers " << report["weight_quantizers"].dump() << "): max |diff| "
          << (*theirs - *mine).abs().max().item<float>();
    } else {
      const int64_t ulps = MaxUlps(*theirs, *mine);
      EXPECT_TRUE(ulps >= 0 && ulps <= max_ulps) << name << ": " << ulps << " ulps apart";
    }
  }
}

// Every HF-quark weight format Quark defines that its importer reads as we do, with the model each tiles; GPTQ and AWQ
// codes go in exactly as computed. Not here: NVFP4 (next test), the formats Quark refuses or reads otherwise (below),
// and fp8_block_e8m0, whose float8_e8m0fnu scales trixie's safetensors 0.4.5 / torch 2.6 cannot read.
TEST_F(QuarkPeerTest, QuarksImporterDequantizesTheEnginesWeightsBitForBit) {
  const std::vector<std::pair<const char*, const std::string*>> cases = {
      // Static int8 / uint8 per tensor: our input_scale / input_zero_point are [1] (checkpoint-format.md), Quark
      // allocates () (formats-2026.md "Scalar shapes"); torch's load_state_dict takes a [1] tensor into a () one.
      {"int8", model_},
      {"w_uint8_a_uint8_per_tensor_asym", model_},
      {"w_int8_per_channel_a_int8_per_token_dynamic", model_},  // int8 per channel, dynamic int8 activations
      {"uint4_wo_32", model_},                                  // W4A16 uint4 groups, zero points
      {"int4_wo_64", model_},                                   // W4A16 int4 groups
      {"fp8", model_},
      {"ptpc_fp8", model_},
      {"fp8_block", tiled_},
      {"mxfp4", model_},
      {"mxfp4_weight_only", model_},
      {"mxfp6_e3m2", model_},
      {"mxfp6_e2m3", model_},
      {"mxfp4_fp8", model_},
      // #30: MXFP8 weights as E8M0 tiles [1, 32] (Quark dequantizes fp8 per_block, not per_group), their scale
      // bytes decoded as 2^(b - 127) under scale_format e8m0 (also for mxfp8_2d's 32x32 tiles).
      {"mxfp8", model_},
      {"mxfp8_2d", model_},
      // #30: per-channel int4 / uint4 zero points packed 8 a word, as Quark packs them.
      {"int4_wo_per_channel", model_},
      {"uint4_wo_per_channel", model_},
      {"int4_fp8", model_},  // W4A8: fp8 per tensor, then int4 per channel (SequentialRealQuantizer)
      {"uint4_wo_32+gptq", model_},
      {"fp8_block+gptq", tiled_},
      {"int4_fp8+gptq", model_},
      {"uint4_wo_32+awq", model_},
  };
  for (const auto& [preset, model] : cases) {
    SCOPED_TRACE(preset);
    auto dir = ExportHfQuark(*model, preset);
    ASSERT_TRUE(dir.ok()) << dir.status();
    std::vector<std::string> imported;
    ExpectQuarkImportsOurWeights(*dir, &imported);
    if (IsSkipped()) return;
    EXPECT_EQ(imported.size(), 14u);  // 2 layers x 7 linears; lm_head stays in float
  }
}

// NVFP4 (weights and weight-only, GPTQ codes too): Quark's SequentialRealQuantizer multiplies the fp4 value by
// (block scale * global scale), we by block scale then global scale, as vLLM's `e2m1 * weight_scale * weight_scale_2`
// does (element_ops.h Nvfp4Dequant). value * block is exact in float32 (2 + 4 significant bits), so ours rounds once;
// Quark's rounds the product of the scales first, then again when the value is 1.5, 3 or 6: at most 1 ulp apart.
TEST_F(QuarkPeerTest, QuarksImporterDequantizesNvfp4WithinOneUlp) {
  for (const char* preset : {"nvfp4", "nvfp4_weight_only", "nvfp4+gptq"}) {
    SCOPED_TRACE(preset);
    auto dir = ExportHfQuark(*model_, preset);
    ASSERT_TRUE(dir.ok()) << dir.status();
    std::vector<std::string> imported;
    ExpectQuarkImportsOurWeights(*dir, &imported, /*max_ulps=*/1);
    if (IsSkipped()) return;
    EXPECT_EQ(imported.size(), 14u);
  }
}

// MoE experts under their per-expert names (mixtral's w1/w2/w3): Quark imports every expert linear of both layers
// as our weights, in a WNA16 and an NVFP4 export.
TEST_F(QuarkPeerTest, MoeExpertsImportAsTheEnginesWeights) {
  const std::string model = testing::TempPath("quark_peer_moe");
  ASSERT_TRUE(testing::WriteSmallMoeModel("mixtral", model, testing::FixturePath("stories260K/tokenizer.model")).ok());
  for (const char* preset : {"uint4_wo_32", "nvfp4"}) {
    SCOPED_TRACE(preset);
    auto dir = ExportHfQuark(model, preset);
    ASSERT_TRUE(dir.ok()) << dir.status();
    std::vector<std::string> imported;
    ExpectQuarkImportsOurWeights(*dir, &imported, std::string(preset) == "nvfp4" ? 1 : 0);  // NVFP4: as above
    if (IsSkipped()) return;
    EXPECT_EQ(imported.size(), 32u);  // 2 layers x (4 attention linears + 4 experts x 3)
    EXPECT_EQ(std::count(imported.begin(), imported.end(), "model.layers.1.block_sparse_moe.experts.3.w2.weight"), 1);
  }
}

// Exports Quark's importer at this commit refuses, each pinned with the message of Quark's own code (or of torch's
// load_state_dict, which Quark's importer calls), so a change on either side turns this test red:
TEST_F(QuarkPeerTest, QuarkRefusesTheseExportsWithItsOwnMessages) {
  struct Refusal {
    const char* preset;
    const std::string* model;
    const char* message;
  };
  const std::string stories = testing::FixturePath("stories260K");  // a 172-wide down_proj
  const std::vector<Refusal> refusals = {
      // MXINT8 is written in Quark's own spelling (OCP_MXINT8Spec: dtype mx, mx_element_dtype int8), which Quark at
      // this commit neither exports nor imports real-quantized (Dtype.to_torch_packed_dtype refuses dtype mx, and its
      // MX pack methods are fp4 and fp6 only). vLLM has no MXINT8 loader either.
      {"mxint8", model_,
       "Quark's QParamsLinear refuses the config: NotImplementedError: Serialization of mx models is not yet supported "
       "in Quark."},
      // MX with in_features % 32 != 0: written as Quark's exporter writes it (PerBlockMXObserver pads the last block:
      // ceil(172 / 32) = 6 scale columns); Quark's importer allocates floor(172 / 32) = 5 (vLLM's QuarkOCP_MX too).
      {"mxfp4_weight_only", &stories,
       "weight_quantizer.scale: copying a param with shape torch.Size([64, 6]) from checkpoint, the shape in current "
       "model is torch.Size([64, 5])"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.preset);
    auto dir = ExportHfQuark(*r.model, r.preset);
    ASSERT_TRUE(dir.ok()) << dir.status();
    const testing::PeerRun run =
        testing::RunPeer("quark", *dir, testing::TempPath("quark_peer") + ".safetensors", /*merge_stderr=*/true);
    if (run.exit_code == 77) GTEST_SKIP() << kNotProvisioned;
    EXPECT_NE(run.exit_code, 0);
    EXPECT_NE(run.output.find(r.message), std::string::npos) << run.output;
  }
}

}  // namespace
}  // namespace quark

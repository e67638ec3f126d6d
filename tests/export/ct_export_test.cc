// The compressed-tensors export: compressed-tensors' int32 packing, every written format through its consumer-rule
// checker, its tensors holding exactly the engine's codes and parameters (against the HF-quark export of the same
// pass), and the schemes it cannot carry refused before any work naming the field.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <tuple>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/ct_checker.h"
#include "core/export/ct_config.h"
#include "core/export/ct_families.h"
#include "core/export/ct_layout.h"
#include "core/export/ct_moe_rules.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_source.h"
#include "tests/export/ct_test_export.h"
#include "tests/export/gguf_moe_models.h"

namespace quark {
namespace {

using checkpoint::CheckpointReader;

TEST(CtPackTest, Int4IsOffsetBinarySequentialAlongTheRow) {
  std::vector<int8_t> row(16);
  for (int i = 0; i < 16; ++i) row[i] = static_cast<int8_t>(i - 8);
  auto packed = exporter::CtPackToInt32(at::tensor(row).reshape({1, 16}), 4, /*is_signed=*/true);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_EQ(packed->sizes().vec(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(static_cast<uint32_t>(packed->index({0, 0}).item<int32_t>()), 0x76543210u);  // q + 8, first in the LSBs
  EXPECT_EQ(static_cast<uint32_t>(packed->index({0, 1}).item<int32_t>()), 0xFEDCBA98u);
}

TEST(CtPackTest, EveryWidthRoundTripsOnOddSizesWithSpills) {
  std::mt19937 rng(3);
  for (int bits = 1; bits <= 8; ++bits) {
    for (int64_t n : {1, 17, 1025}) {
      const int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
      std::uniform_int_distribution<int> dist(lo, hi);
      std::vector<int32_t> v(3 * n);
      for (auto& x : v) x = dist(rng);
      const at::Tensor codes = at::tensor(v).reshape({3, n});
      auto packed = exporter::CtPackToInt32(codes, bits, true);
      ASSERT_TRUE(packed.ok()) << packed.status();
      EXPECT_EQ(packed->size(1), (n * bits + 31) / 32) << bits << " bits, n " << n;
      auto back = exporter::CtUnpackFromInt32(*packed, bits, n);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(at::equal(*back - (1 << (bits - 1)), codes)) << bits << " bits, n " << n;
    }
  }
}

TEST(CtPackTest, ACodeOutsideTheWidthIsNamed) {
  auto packed = exporter::CtPackToInt32(at::tensor(std::vector<int32_t>{0, 8}).reshape({1, 2}), 4, true);
  ASSERT_FALSE(packed.ok());
  EXPECT_NE(packed.status().message().find("code 8 at [0, 1]"), std::string::npos) << packed.status();
}

class CtExportTest : public testing::CtModelsTest {};

std::string Bytes(const CheckpointReader& r, const std::string& name) {
  auto ref = r.Get(name);
  EXPECT_TRUE(ref.ok()) << name;
  return ref.ok() ? std::string(ref->bytes()) : std::string();
}

// The stored tensor in its own dtype (integer and float types; float8 as its uint8 bytes).
at::Tensor Read(const CheckpointReader& r, const std::string& name) {
  auto ref = r.Get(name);
  EXPECT_TRUE(ref.ok()) << name;
  if (!ref.ok()) return at::Tensor();
  at::ScalarType dtype = at::kByte;
  switch (ref->info->dtype) {
    case checkpoint::StDType::kF32: dtype = at::kFloat; break;
    case checkpoint::StDType::kF16: dtype = at::kHalf; break;
    case checkpoint::StDType::kBF16: dtype = at::kBFloat16; break;
    case checkpoint::StDType::kI32: dtype = at::kInt; break;
    case checkpoint::StDType::kI64: dtype = at::kLong; break;
    case checkpoint::StDType::kI8: dtype = at::kChar; break;
    default: break;
  }
  const std::string_view bytes = ref->bytes();
  return at::from_blob(const_cast<char*>(bytes.data()), ref->info->shape, dtype).clone();
}

at::Tensor Float(const CheckpointReader& r, const std::string& name) {
  const at::Tensor t = Read(r, name);
  return t.defined() ? t.to(at::kFloat) : t;
}

// pack-quantized decoded as compressed-tensors defines it: (stored - 2^(b-1) - (zp_stored - 2^(b-1))) * scale.
at::Tensor DecodePacked(const CheckpointReader& r, const std::string& m, int bits, int64_t out, int64_t in) {
  at::Tensor scale = Float(r, m + ".weight_scale");
  auto codes = exporter::CtUnpackFromInt32(Read(r, m + ".weight_packed"), bits, in);
  EXPECT_TRUE(codes.ok());
  at::Tensor q = codes->to(at::kFloat);
  if (r.Has(m + ".weight_zero_point")) {
    auto zp = exporter::CtUnpackFromInt32(Read(r, m + ".weight_zero_point").t().contiguous(), bits, out);
    q = q - zp->t().to(at::kFloat).repeat_interleave(in / scale.size(1), 1);
  } else {
    q = q - (1 << (bits - 1));
  }
  return q * scale.repeat_interleave(in / scale.size(1), 1);
}

TEST_F(CtExportTest, EveryFormatPassesItsCheckerAndHoldsTheEnginesCodes) {
  struct Case {
    const char* preset;
    const std::string* model;
    const char* format;
  };
  const std::vector<Case> cases = {{"uint4_wo_32", model_, "pack-quantized"},
                                   {"int4_wo_64", model_, "pack-quantized"},
                                   {"uint4_wo_per_channel", model_, "pack-quantized"},
                                   {"int4_wo_per_channel", model_, "pack-quantized"},
                                   {"int8", model_, "int-quantized"},
                                   {"w_int8_per_channel_a_int8_per_token_dynamic", model_, "int-quantized"},
                                   {"fp8", model_, "float-quantized"},
                                   {"ptpc_fp8", model_, "float-quantized"},
                                   {"fp8_block", tiled_, "float-quantized"},
                                   {"nvfp4", model_, "nvfp4-pack-quantized"},
                                   {"nvfp4_weight_only", model_, "nvfp4-pack-quantized"},
                                   {"mxfp4", model_, "mxfp4-pack-quantized"},
                                   {"mxfp8", model_, "mxfp8-quantized"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset);
    auto e = testing::ExportBoth(*c.model, c.preset);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_TRUE(exporter::CheckCompressedTensorsExport(e->compressed_tensors).ok());
    auto ct = CheckpointReader::Open(e->compressed_tensors);
    auto hf = CheckpointReader::Open(e->hf_quark);
    auto source = exporter::HfQuarkWeightSource::Open(e->hf_quark);
    ASSERT_TRUE(ct.ok() && hf.ok() && source.ok());
    auto model = checkpoint::LoadModelConfig(*c.model);
    ASSERT_TRUE(model.ok());
    for (int64_t layer = 0; layer < model->num_hidden_layers; ++layer) {
      for (const auto& linear : checkpoint::LayerLinears(*model)) {
        const std::string m = checkpoint::LayerPrefix(*model, layer) + linear.relative_name;
        SCOPED_TRACE(m);
        const std::string format = c.format;
        if (format == "pack-quantized") {
          const int bits = std::string(c.preset).find("int8") != std::string::npos ? 8 : 4;
          const at::Tensor ours = (*source)->Get(m + ".weight", at::kFloat).value();
          EXPECT_TRUE(at::equal(DecodePacked(**ct, m, bits, linear.out_features, linear.in_features), ours));
        } else if (format == "mxfp4-pack-quantized" || format == "mxfp8-quantized") {
          // Quark's MX bytes (element 2j in the low nibble, E8M0 scales) are compressed-tensors' as they are.
          EXPECT_EQ(Bytes(**ct, m + (format == "mxfp8-quantized" ? ".weight" : ".weight_packed")), Bytes(**hf, m + ".weight"));
          EXPECT_EQ(Bytes(**ct, m + ".weight_scale"), Bytes(**hf, m + ".weight_scale"));
        } else if (format == "nvfp4-pack-quantized") {
          EXPECT_EQ(Bytes(**ct, m + ".weight_packed"), Bytes(**hf, m + ".weight"));
          EXPECT_EQ(Bytes(**ct, m + ".weight_scale"), Bytes(**hf, m + ".weight_scale"));
          const at::Tensor quark_scale_2 = Float(**hf, m + ".weight_scale_2");
          EXPECT_TRUE(at::equal(Float(**ct, m + ".weight_global_scale").reshape({}), at::reciprocal(quark_scale_2)));
        } else {
          EXPECT_EQ(Bytes(**ct, m + ".weight"), Bytes(**hf, m + ".weight"));
          EXPECT_TRUE(
              at::equal(Float(**ct, m + ".weight_scale").flatten(), Float(**hf, m + ".weight_scale").flatten()));
        }
      }
    }
    // compressed-tensors' config: one group for the uniform scheme, lm_head left out.
    auto qc = exporter::CtQuantizationConfigProblems(
        nlohmann::json::parse(std::ifstream(e->compressed_tensors + "/config.json"))["quantization_config"]);
    EXPECT_TRUE(qc.empty()) << StrJoin(qc, "; ");
  }
}

TEST_F(CtExportTest, SchemesItCannotCarryAreRefusedBeforeAnyWorkNamingTheField) {
  struct Case {
    const char* preset;
    const char* message;
  };
  for (const Case& c : {Case{"int4_fp8", "q_proj.weight.fp8_first_stage: W4A8's fp8-then-int4 weight"},
                        Case{"int4_wa_64", "int-quantized stores int8 codes"}, Case{"bfloat16", "a cast"},
                        Case{"w_int8_per_tensor_sym", "No compressed-tensors compatible scheme was found."}}) {
    QuantizeModelOptions o;
    o.config = *PresetConfig(c.preset);
    o.output_dir = testing::TempPath("quark_ct_refused");
    o.export_formats = {"compressed_tensors"};
    auto report = QuantizeModel(*model_, o);
    ASSERT_FALSE(report.ok()) << c.preset;
    EXPECT_NE(report.status().message().find("export_formats[0] (compressed_tensors)"), std::string::npos)
        << report.status();
    EXPECT_NE(report.status().message().find(c.message), std::string::npos) << report.status();
    EXPECT_FALSE(std::filesystem::exists(o.output_dir + ".partial"));
  }
}

// quarkd refuses unwritten formats at submit by CtFormatIsWritten (LibTorch-free); the writer by its family table.
TEST(CtFormatsTest, TheSubmitCheckKnowsTheFormatsTheWriterWrites) {
  for (const char* format : {"pack-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized",
                             "mxfp4-pack-quantized", "mxfp8-quantized", "naive-quantized", "dense"}) {
    EXPECT_EQ(exporter::CtFormatIsWritten(format), exporter::FindCtFamily(format) != nullptr) << format;
  }
}

TEST_F(CtExportTest, AnFp8KvCacheIsTheKvCacheSchemeWithItsLegacyScaleNames) {
  auto dir = testing::ExportFp8WithKvCache(*model_, {"compressed_tensors"});
  ASSERT_TRUE(dir.ok()) << dir.status();
  const auto qc = nlohmann::json::parse(std::ifstream(*dir + "/config.json"))["quantization_config"];
  EXPECT_EQ(qc["kv_cache_scheme"]["num_bits"], 8);
  EXPECT_EQ(qc["kv_cache_scheme"]["type"], "float");
  EXPECT_EQ(qc["kv_cache_scheme"]["strategy"], "tensor");
  auto reader = CheckpointReader::Open(*dir);
  ASSERT_TRUE(reader.ok());
  // vLLM maps `k_proj.output_scale` / `v_proj.output_scale` to the attention's k_scale / v_scale.
  for (const char* p : {"k_proj", "v_proj"}) {
    const std::string name = StrCat("model.layers.1.self_attn.", p, ".output_scale");
    auto ref = (*reader)->Get(name);
    ASSERT_TRUE(ref.ok()) << name;
    EXPECT_EQ(ref->info->dtype, checkpoint::StDType::kF32);
    EXPECT_EQ(ref->info->shape, std::vector<int64_t>{1});
  }
  EXPECT_EQ(Bytes(**reader, "model.layers.1.self_attn.k_proj.output_scale"),
            Bytes(**reader, "model.layers.1.self_attn.v_proj.output_scale"));  // one scale per layer: max(k, v)
  EXPECT_FALSE((*reader)->Has("model.layers.1.self_attn.q_proj.output_scale"));
}

// `config` on `model_dir` with a compressed-tensors export: refused at submit (INVALID_ARGUMENT) with every one of
// `fragments` in the message, and no output folder.
void ExpectCtExportRefusedBeforeAnyWork(const std::string& model_dir, const Config& config,
                                        const std::vector<std::string>& fragments) {
  QuantizeModelOptions o;
  o.config = config;
  o.output_dir = testing::TempPath("quark_ct_refused_out");
  o.export_formats = {"compressed_tensors"};
  auto report = QuantizeModel(model_dir, o);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << report.status();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(report.status().message().find(fragment), std::string::npos) << fragment << " not in " << report.status();
  }
  EXPECT_FALSE(std::filesystem::exists(o.output_dir));
  EXPECT_FALSE(std::filesystem::exists(o.output_dir + ".partial"));
}

// #30 item 2, MoE experts (vLLM's CompressedTensorsMoEMethod.get_moe_method): a scheme its fused-MoE path has no
// kernel for (W8A8 int8 static per tensor) and a recipe that puts one expert in another config group than the rest of
// its block are refused before any work (no output folder), naming vLLM's message or the module.
TEST_F(CtExportTest, MoeRecipesVllmsFusedMoePathCannotLoadAreRefusedBeforeAnyWork) {
  const std::string dir = testing::TempPath("quark_ct_moe");
  ASSERT_TRUE(testing::WriteSmallMoeModel("mixtral", dir, testing::FixturePath("stories260K/tokenizer.model")).ok());
  Config one_expert_apart = *PresetConfig("uint4_wo_32");
  one_expert_apart.layer_quant_config.push_back({"*.experts.1.w2", PresetConfig("uint4_wo_per_channel")->global_quant_config});
  const std::vector<std::pair<Config, std::string>> cases = {
      {*PresetConfig("int8"), "Unsupported FusedMoe scheme"},
      {one_expert_apart, "experts.1.w2: in a config group other than model.layers.0.block_sparse_moe.experts.0.w1's"}};
  for (const auto& [config, message] : cases) {
    SCOPED_TRACE(message);
    ExpectCtExportRefusedBeforeAnyWork(dir, config, {message});
  }
}

// gpt-oss is refused naming the model_type and vLLM's gpt_oss loader (its compressed-tensors path loads only float
// experts); the families the engine holds per expert (DeepSeek-V3 and Llama 4 included) are written.
TEST(CtMoeRulesTest, GptOssIsRefusedNamingTheModelTypeAndTheLoader) {
  checkpoint::ModelConfig m;
  for (const auto& [type, family, written] : std::vector<std::tuple<std::string, checkpoint::ArchFamily, bool>>{
           {"gpt_oss", checkpoint::ArchFamily::kGptOss, false},
           {"llama4_text", checkpoint::ArchFamily::kLlama4, true},
           {"mixtral", checkpoint::ArchFamily::kMoe, true},
           {"deepseek_v3", checkpoint::ArchFamily::kDeepseek, true},
           {"llama", checkpoint::ArchFamily::kLlama, true}}) {
    m.model_type = type;
    m.family = family;
    const absl::Status s = exporter::CtSupportsExperts(m);
    EXPECT_EQ(s.ok(), written) << type << ": " << s;
    if (written) continue;
    EXPECT_NE(s.message().find("compressed_tensors of a " + type + " model"), std::string::npos) << s;
    EXPECT_NE(s.message().find("_load_weights_other"), std::string::npos) << s;
  }
}

// #30 / #32: vLLM's deepseek_v2.py loads MLA's q_a_proj and kv_a_proj_with_mqa as one linear (fused_qkv_a_proj) and a
// shared expert's gate and up as one (gate_up_proj); compressed-tensors' lookup for a fused linear (should_ignore_layer,
// find_matched_target with the packed_modules_mapping) needs its shards in one scheme, all ignored or none. A recipe
// that splits them is refused by the writer before any work (no output folder) naming both modules and the fused linear.
TEST_F(CtExportTest, DeepseekRecipesThatSplitAFusedLinearAreRefusedBeforeAnyWork) {
  const std::string dir = testing::TempPath("quark_ct_deepseek_refused");
  ASSERT_TRUE(testing::WriteTinyDeepseek(dir).ok());
  const LayerQuantConfig per_channel = PresetConfig("uint4_wo_per_channel")->global_quant_config;
  Config q_a_apart = *PresetConfig("uint4_wo_32");
  q_a_apart.layer_quant_config.push_back({"*.q_a_proj", per_channel});
  Config kv_a_float = *PresetConfig("uint4_wo_32");
  kv_a_float.exclude.push_back("model.layers.1.self_attn.kv_a_proj_with_mqa");
  Config shared_up_apart = *PresetConfig("uint4_wo_32");
  shared_up_apart.layer_quant_config.push_back({"model.layers.2.mlp.shared_experts.up_proj", per_channel});
  const std::vector<std::tuple<Config, std::string, std::string>> cases = {
      {q_a_apart, "model.layers.0.self_attn.kv_a_proj_with_mqa (",
       "different schemes; vLLM loads them as one linear, model.layers.0.self_attn.fused_qkv_a_proj"},
      {kv_a_float, "model.layers.1.self_attn.kv_a_proj_with_mqa (",
       "one is left in float and the other is not; vLLM loads them as one linear, "
       "model.layers.1.self_attn.fused_qkv_a_proj"},
      {shared_up_apart, "model.layers.2.mlp.shared_experts.up_proj (",
       "and model.layers.2.mlp.shared_experts.gate_proj (global_quant_config): different schemes; vLLM loads them as "
       "one linear, model.layers.2.mlp.shared_experts.gate_up_proj"}};
  for (const auto& [config, module, rule] : cases) {
    SCOPED_TRACE(module);
    ExpectCtExportRefusedBeforeAnyWork(dir, config, {"export_formats[0] (compressed_tensors)", module, rule});
  }
}

// The checker reads the same rules from the folder alone: a DeepSeek-V3 export whose `ignore` is edited to leave one
// shard of fused_qkv_a_proj (or of the shared experts' gate_up_proj) apart or to drop an MTP linear, or whose router
// carries a scale, fails naming the module and the fused linear, the MTP linear or the router.
TEST_F(CtExportTest, TheCheckerRefusesADeepseekExportThatSplitsAFusedLinearOrQuantizesARouterOrAnMtpLinear) {
  const std::string dir = testing::TempPath("quark_ct_deepseek_checked");
  ASSERT_TRUE(testing::WriteTinyDeepseek(dir).ok());
  QuantizeModelOptions o;
  o.config = *PresetConfig("fp8");
  o.num_calibration_samples = 2;
  o.seq_len = 32;
  o.calibration_file = testing::SmallEvalText();
  o.output_dir = testing::TempPath("quark_ct_deepseek_checked_out");
  o.export_formats = {"compressed_tensors"};
  ASSERT_TRUE(QuantizeModel(dir, o).ok());
  ASSERT_TRUE(exporter::CheckCompressedTensorsExport(o.output_dir).ok());
  const std::string path = o.output_dir + "/config.json";
  const nlohmann::json original = nlohmann::json::parse(std::ifstream(path));
  using Edit = std::function<void(nlohmann::json& ignore)>;
  const std::vector<std::pair<Edit, std::string>> edits = {
      {[](nlohmann::json& ignore) { ignore.push_back("model.layers.0.self_attn.kv_a_proj_with_mqa"); },
       "model.layers.0.self_attn.kv_a_proj_with_mqa: in a config group other than model.layers.0.self_attn.q_a_proj's "
       "(vLLM fuses them into model.layers.0.self_attn.fused_qkv_a_proj)"},
      {[](nlohmann::json& ignore) { ignore.push_back("model.layers.1.mlp.shared_experts.gate_proj"); },
       "model.layers.1.mlp.shared_experts.up_proj: in a config group other than "
       "model.layers.1.mlp.shared_experts.gate_proj's (vLLM fuses them into "
       "model.layers.1.mlp.shared_experts.gate_up_proj)"},
      {[](nlohmann::json& ignore) {
         ignore.erase(std::find(ignore.begin(), ignore.end(), "model.layers.3.mlp.experts.0.down_proj"));
       },
       "model.layers.3.mlp.experts.0.down_proj: an MTP layer's linear, copied float, is not in ignore"}};
  for (const auto& [edit, expected] : edits) {
    SCOPED_TRACE(expected);
    nlohmann::json edited = original;
    edit(edited["quantization_config"]["ignore"]);
    std::ofstream(path) << edited.dump(2);
    const absl::Status s = exporter::CheckCompressedTensorsExport(o.output_dir);
    std::ofstream(path) << original.dump(2);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s;
  }
  ASSERT_TRUE(exporter::CheckCompressedTensorsExport(o.output_dir).ok());
  // The same export rewritten with a weight scale beside a router: vLLM builds the router unquantized.
  const std::string quantized_router = o.output_dir + "_router";
  std::filesystem::create_directories(quantized_router);
  std::filesystem::copy_file(path, quantized_router + "/config.json");
  auto reader = CheckpointReader::Open(o.output_dir);
  ASSERT_TRUE(reader.ok());
  const std::string router_scale = "model.layers.2.mlp.gate.weight_scale";
  std::vector<checkpoint::PlannedTensor> plan = {{router_scale, checkpoint::StDType::kF32, {1}}};
  for (const std::string& name : (*reader)->Names()) {
    plan.push_back({name, (*reader)->Get(name)->info->dtype, (*reader)->Get(name)->info->shape});
  }
  auto writer = checkpoint::CheckpointWriter::Create(quantized_router, plan);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const float one = 1.0f;
  ASSERT_TRUE((*writer)->Write(router_scale, std::string_view(reinterpret_cast<const char*>(&one), sizeof(one))).ok());
  for (const std::string& name : (*reader)->Names()) ASSERT_TRUE((*writer)->Write(name, (*reader)->Get(name)->bytes()).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  const absl::Status router = exporter::CheckCompressedTensorsExport(quantized_router);
  EXPECT_NE(router.message().find(router_scale + ": a router carries quantization scales"), std::string::npos)
      << router;
}

// The fused-MoE dispatch, group by group, as vLLM's get_moe_method: each preset's compressed-tensors group (ct_config)
// goes to the method vLLM picks, or to its error.
TEST(CtMoeRulesTest, EachSchemeGoesToVllmsFusedMoeMethodOrItsError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"uint4_wo_32", "CompressedTensorsWNA16MarlinMoEMethod"},
      {"int4_wo_per_channel", "CompressedTensorsWNA16MarlinMoEMethod"},
      {"fp8", "CompressedTensorsW8A8Fp8MoEMethod"},
      {"ptpc_fp8", "CompressedTensorsW8A8Fp8MoEMethod"},
      {"fp8_block", "CompressedTensorsW8A8Fp8MoEMethod"},
      {"nvfp4", "CompressedTensorsW4A4Nvfp4MoEMethod"},
      {"nvfp4_weight_only", "CompressedTensorsW4A4Nvfp4MoEMethod"},
      {"mxfp4", "CompressedTensorsW4A4Mxfp4MoEMethod"},
      {"w_int8_per_channel_a_int8_per_token_dynamic", "CompressedTensorsW8A8Int8MoEMethod"},
      {"int8", "Unsupported FusedMoe scheme"},
      {"w_int8_a_int8_per_tensor_sym_dynamic", "Unsupported FusedMoe scheme"}};
  for (const auto& [preset, expected] : cases) {
    SCOPED_TRACE(preset);
    const Config config = *PresetConfig(preset);
    const LayerPlan plan = BuildLayerPlan(config, {{"model.layers.0.mlp.experts.0.down_proj", "Linear", {256, 256}}});
    auto qc = exporter::CompressedTensorsConfig(config, plan);
    ASSERT_TRUE(qc.ok()) << qc.status();
    const nlohmann::json& group = (*qc)["config_groups"]["group_0"];
    const std::string format = group.value("format", (*qc)["format"].get<std::string>());
    auto method = exporter::VllmCtMoeMethod(group, format);
    const std::string got = method.ok() ? *method : std::string(method.status().message());
    EXPECT_NE(got.find(expected), std::string::npos) << got;
  }
}

TEST_F(CtExportTest, Nvfp4WeightOnlyGoesToHfQuarkWithAWarningNotARefusal) {
  QuantizeModelOptions o;
  o.config = *PresetConfig("nvfp4_weight_only");
  o.output_dir = testing::TempPath("quark_nvfp4_wo");
  std::vector<std::string> notices;
  o.on_notice = [&](const std::string& message) { notices.push_back(message); };
  auto report = QuantizeModel(*model_, o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(exporter::CheckHfQuarkExport(o.output_dir).ok());
  const std::string all = StrJoin(notices, "\n");
  EXPECT_NE(all.find("hf_quark export: global_quant_config: NVFP4 weight-only loads in vLLM's quark path only for MoE "
                     "experts"),
            std::string::npos)
      << all;
}

TEST(CtCheckerTest, ForbiddenKeysAndUnloadableSchemesAreNamed) {
  nlohmann::json w = {{"num_bits", 4},    {"type", "int"},    {"symmetric", true},   {"strategy", "group"},
                      {"group_size", 32}, {"dynamic", false}, {"observer", "minmax"}};
  nlohmann::json qc = {{"quant_method", "compressed-tensors"},
                       {"format", "pack-quantized"},
                       {"ignore", {"lm_head"}},
                       {"quantization_status", "compressed"},
                       {"version", "0.18.0"},
                       {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}}}}}};
  EXPECT_TRUE(exporter::CtQuantizationConfigProblems(qc).empty());
  EXPECT_EQ(exporter::VllmCtScheme(qc["config_groups"]["group_0"], "pack-quantized").value(), "CompressedTensorsWNA16");
  EXPECT_TRUE(exporter::CtGroupFor(qc, "lm_head").is_null());
  EXPECT_FALSE(exporter::CtGroupFor(qc, "model.layers.0.mlp.up_proj").is_null());

  nlohmann::json bad = qc;
  bad["config_groups"]["group_0"]["weights"]["round_method"] = "half_even";
  bad["config_groups"]["group_0"]["weights"]["strategy"] = "channel";
  const auto problems = exporter::CtQuantizationConfigProblems(bad);
  const std::string all = StrJoin(problems, "; ");
  EXPECT_NE(all.find("config_groups.group_0.weights.round_method: not a QuantizationArgs field"), std::string::npos)
      << all;
  EXPECT_NE(all.find("config_groups.group_0.weights.group_size: 32 with strategy channel"), std::string::npos) << all;

  nlohmann::json asym3 = qc["config_groups"]["group_0"];
  asym3["weights"]["num_bits"] = 3;
  asym3["weights"]["symmetric"] = false;
  auto scheme = exporter::VllmCtScheme(asym3, "pack-quantized");
  EXPECT_FALSE(scheme.ok());  // vLLM's WNA16 takes asymmetric 4 and 8 bits only
  nlohmann::json fp8 = {
      {"weights",
       {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "channel"}, {"dynamic", false}}},
      {"input_activations",
       {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}}}};
  EXPECT_EQ(exporter::VllmCtScheme(fp8, "float-quantized").value(), "CompressedTensorsW8A8Fp8");
}

}  // namespace
}  // namespace quark

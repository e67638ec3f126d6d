// #30 item 2: a compressed-tensors export read back by the engine (CtWeightSource): every format's weights equal the
// HF-quark export of the same pass read back (which equals the fake-quantized model, ExportRoundTripTest) bit for bit
// but NVFP4 (its global scale is stored as a float32 divisor: within an ulp of the product), the static activation
// and KV-cache parameters equal, the config read back is the engine's spec; bad configs refused naming the key.
#include "core/export/ct_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/ct_read_config.h"
#include "core/export/hf_quark_layout.h"
#include "tests/export/ct_test_export.h"
#include "tests/export/gguf_moe_models.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

class CtReadBackTest : public testing::CtModelsTest {};

Config PresetOf(const std::string& preset) { return *PresetConfig(preset.substr(0, preset.find('+'))); }

// The preset's spec as the reader must give it: compressed-tensors stores unsigned grids as signed ones (codes and
// zero points shifted by 2^(b-1)), which dequantize to the same values.
std::optional<QuantSpec> AsStored(std::optional<QuantSpec> s) {
  if (s && s->dtype == DType::kUInt4) s->dtype = DType::kInt4;
  if (s && s->dtype == DType::kUInt8) s->dtype = DType::kInt8;
  return s;
}

void ExpectParamsEqual(const std::optional<QuantParams>& ct, const std::optional<QuantParams>& hf, const char* what) {
  ASSERT_EQ(ct.has_value(), hf.has_value()) << what;
  if (!ct) return;
  for (const auto& [a, b] : {std::pair{ct->scale, hf->scale}, std::pair{ct->zero_point, hf->zero_point}}) {
    ASSERT_EQ(a.defined(), b.defined()) << what;
    if (a.defined()) EXPECT_TRUE(at::equal(a.to(at::kFloat).flatten(), b.to(at::kFloat).flatten())) << what;
  }
  ASSERT_EQ(ct->global_scale.defined(), hf->global_scale.defined()) << what;
  if (!ct->global_scale.defined()) return;
  // NVFP4: the divisor's preimage nearest 1 / divisor, the engine's scale or its float32 neighbour.
  const float x = ct->global_scale.item<float>(), y = hf->global_scale.item<float>();
  EXPECT_TRUE(x == y || std::nextafter(x, y) == y) << what << ": global scale " << x << " vs " << y;
}

// Every linear of every layer: the config read back is the one `config` gives the module (none for an excluded one),
// and the weights (float32 and bfloat16) and activation parameters of the two read-backs are equal.
void ExpectSameReadBack(const testing::CtTestExport& e, const std::string& model_dir, const Config& config,
                        const std::string& label, bool nvfp4) {
  auto ct = exporter::CtWeightSource::Open(e.compressed_tensors);
  auto hf = exporter::HfQuarkWeightSource::Open(e.hf_quark);
  ASSERT_TRUE(ct.ok()) << ct.status();
  ASSERT_TRUE(hf.ok()) << hf.status();
  auto model = checkpoint::LoadModelConfig(model_dir);
  ASSERT_TRUE(model.ok());
  const LayerPlan plan = BuildLayerPlan(config, exporter::ModulesFromConfig(*model));
  int64_t exact = 0, total = 0;
  for (int64_t layer = 0; layer < model->num_hidden_layers; ++layer) {
    for (const auto& linear : checkpoint::LayerLinears(*model, layer)) {
      const std::string m = checkpoint::LayerPrefix(*model, layer) + linear.relative_name;
      SCOPED_TRACE(m);
      const LayerAssignment* a = (*ct)->Assignment(m);
      const LayerAssignment* expected = plan.Find(m);
      ASSERT_NE(a, nullptr);
      ASSERT_NE(expected, nullptr);
      EXPECT_EQ(a->source == ConfigSource::kExcluded, expected->source == ConfigSource::kExcluded);
      EXPECT_EQ(a->config.weight, AsStored(expected->config.weight));
      EXPECT_EQ(a->config.input_tensors, AsStored(expected->config.input_tensors));
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        auto mine = (*ct)->Get(m + ".weight", dtype);
        auto ref = (*hf)->Get(m + ".weight", dtype);
        ASSERT_TRUE(mine.ok()) << mine.status();
        ASSERT_TRUE(ref.ok()) << ref.status();
        ++total;
        if (at::equal(*mine, *ref)) {
          ++exact;
          continue;
        }
        EXPECT_TRUE(nvfp4) << c10::toString(dtype) << ": max |diff| " << (*mine - *ref).abs().max().item<float>();
        const at::Tensor diff = (mine->to(at::kFloat) - ref->to(at::kFloat)).abs();
        const double ulps = dtype == at::kFloat ? std::ldexp(1.0, -22) : std::ldexp(1.0, -7);
        EXPECT_TRUE((diff <= ref->to(at::kFloat).abs() * ulps).all().item<bool>()) << c10::toString(dtype);
      }
      auto act_ct = (*ct)->Activations(m);
      auto act_hf = (*hf)->Activations(m);
      ASSERT_TRUE(act_ct.ok()) << act_ct.status();
      ASSERT_TRUE(act_hf.ok()) << act_hf.status();
      ExpectParamsEqual(act_ct->input, act_hf->input, "input");
      ExpectParamsEqual(act_ct->output, act_hf->output, "output");
    }
  }
  EXPECT_GT(total, 0);
  if (!nvfp4) EXPECT_EQ(exact, total);
  std::cout << label << ": " << exact << " of " << total << " weights read back bit for bit\n";
}

TEST_F(CtReadBackTest, EveryFormatReadsBackAsTheHfQuarkExportOfTheSamePass) {
  for (const auto& [preset, model] : AllFormatCases()) {
    SCOPED_TRACE(preset);
    auto e = testing::ExportBoth(*model, preset);
    ASSERT_TRUE(e.ok()) << e.status();
    ExpectSameReadBack(*e, *model, PresetOf(preset), preset, std::string(preset).rfind("nvfp4", 0) == 0);
  }
}

// #36 item 5: a mixed recipe (three config groups with "re:" targets, one linear ignored) reads back module by module
// as the HF-quark export of the same pass, and its config.json carries the groups as llm-compressor writes them.
TEST_F(CtReadBackTest, AMixedRecipeReadsBackGroupByGroupAsTheHfQuarkExport) {
  const Config mixed = testing::MixedRecipe();
  auto e = testing::ExportBothWith(*model_, mixed, "mixed");
  ASSERT_TRUE(e.ok()) << e.status();
  ExpectSameReadBack(*e, *model_, mixed, "mixed", false);
  std::ifstream in(e->compressed_tensors + "/config.json");
  const Json qc = Json::parse(in)["quantization_config"];
  EXPECT_EQ(qc["format"], "mixed-precision");
  ASSERT_EQ(qc["config_groups"].size(), 3u) << qc.dump(1);
  EXPECT_EQ(qc["config_groups"]["group_0"]["format"], "pack-quantized");
  EXPECT_EQ(qc["config_groups"]["group_1"]["format"], "int-quantized");
  EXPECT_EQ(qc["config_groups"]["group_2"]["format"], "float-quantized");
  EXPECT_EQ(qc["config_groups"]["group_1"]["targets"], Json({"re:.*\\.self_attn\\.o_proj$"}));
  EXPECT_EQ(qc["config_groups"]["group_2"]["targets"],
            Json({"re:model\\.layers\\.1\\.(?:mlp\\.gate_proj|mlp\\.up_proj|mlp\\.down_proj)$"}));
  EXPECT_EQ(qc["ignore"], Json({"model.layers.0.mlp.down_proj", "lm_head"}));
}

TEST_F(CtReadBackTest, TinyllamaAsRealWeightsReadBackAsTheHfQuarkExport) {
  const std::string model = testing::FixturePath("tinyllama-a");
  for (const char* preset : {"nvfp4", "uint4_wo_128"}) {
    SCOPED_TRACE(preset);
    auto e = testing::ExportBoth(model, preset);
    ASSERT_TRUE(e.ok()) << e.status();
    ExpectSameReadBack(*e, model, PresetOf(preset), preset, std::string(preset) == "nvfp4");
  }
}

// #30 item 2: the MoE families whose checkpoints name every expert (mixtral's w1/w2/w3; qwen2_moe with its shared
// expert; qwen3_moe): each scheme with a vLLM fused-MoE kernel exports (its checker run by the exporter: one group per
// block, vLLM's lookup names, the kernel), reads back expert by expert as the HF-quark export of the same pass, and
// NVFP4 experts' gate and up carry one global scale (vLLM's w13 keeps the gate's).
TEST_F(CtReadBackTest, MoeExpertsReadBackAsTheHfQuarkExportAndNvfp4GateAndUpShareAGlobalScale) {
  for (const char* type : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    const std::string dir = testing::TempPath(std::string("quark_ct_moe_") + type);
    ASSERT_TRUE(testing::WriteSmallMoeModel(type, dir, testing::FixturePath("stories260K/tokenizer.model")).ok());
    // nvfp4+gptq: GPTQ rounds every routed expert under the global scale its gate and up share.
    for (const char* preset :
         {"uint4_wo_32", "fp8", "nvfp4", "w_int8_per_channel_a_int8_per_token_dynamic", "nvfp4+gptq"}) {
      SCOPED_TRACE(std::string(type) + " " + preset);
      auto e = testing::ExportBoth(dir, preset);
      ASSERT_TRUE(e.ok()) << e.status();
      const bool nvfp4 = std::string(preset).rfind("nvfp4", 0) == 0;
      ExpectSameReadBack(*e, dir, PresetOf(preset), preset, nvfp4);
      if (!nvfp4) continue;
      auto reader = checkpoint::CheckpointReader::Open(e->compressed_tensors);
      ASSERT_TRUE(reader.ok());
      const bool mixtral = std::string(type) == "mixtral";
      const std::string block = mixtral ? ".block_sparse_moe.experts." : ".mlp.experts.";
      int64_t pairs = 0;
      for (int64_t layer = 0; layer < 2; ++layer) {
        for (int64_t expert = 0; expert < 4; ++expert, ++pairs) {
          const std::string prefix = StrCat("model.layers.", layer, block, expert, ".");
          const std::string gate = prefix + (mixtral ? "w1" : "gate_proj"), up = prefix + (mixtral ? "w3" : "up_proj");
          auto g = (*reader)->Get(gate + ".weight_global_scale");
          auto u = (*reader)->Get(up + ".weight_global_scale");
          ASSERT_TRUE(g.ok() && u.ok()) << gate;
          EXPECT_TRUE(std::equal(g->bytes().begin(), g->bytes().end(), u->bytes().begin())) << gate;
        }
      }
      EXPECT_EQ(pairs, 8);
    }
  }
}

// The presets with a vLLM fused-MoE kernel the MoE families are exported with.
constexpr const char* kMoePresets[] = {"uint4_wo_32", "fp8", "nvfp4", "w_int8_per_channel_a_int8_per_token_dynamic"};

// `preset` on the model in `dir` exported as both formats into `*e`, read back as the HF-quark export (NVFP4 within an
// ulp), every linear in one compressed-tensors config group.
void ExportAndReadBackInOneGroup(const std::string& dir, const std::string& preset, testing::CtTestExport* e) {
  auto exported = testing::ExportBoth(dir, preset);
  ASSERT_TRUE(exported.ok()) << exported.status();
  *e = *exported;
  ExpectSameReadBack(*e, dir, PresetOf(preset), preset, preset == "nvfp4");
  const Json qc = Json::parse(std::ifstream(e->compressed_tensors + "/config.json"))["quantization_config"];
  EXPECT_EQ(qc["config_groups"].size(), 1u) << qc.dump(1);
}

// The stored bytes of `module`'s NVFP4 global scale in a compressed-tensors export (empty, and a failure, when missing).
std::string GlobalScaleBytes(const checkpoint::CheckpointReader& reader, const std::string& module) {
  auto ref = reader.Get(module + ".weight_global_scale");
  EXPECT_TRUE(ref.ok()) << module;
  return ref.ok() ? std::string(ref->bytes()) : std::string();
}

// The shards vLLM fuses in one decoder layer's MLP block `prefix` ("model.layers.2.mlp."): the shared expert's (or a
// dense MLP's) gate/up under `shared` (empty for none), then each routed expert's gate/up; each pair must carry one
// NVFP4 global scale. Returns the number of pairs checked.
int64_t ExpectGateUpShardsShareAGlobalScale(const checkpoint::CheckpointReader& reader, const std::string& prefix,
                                           const std::string& shared, int64_t experts) {
  std::vector<std::pair<std::string, std::string>> shards;
  if (!shared.empty() || experts == 0) shards.push_back({shared + "gate_proj", shared + "up_proj"});
  for (int64_t expert = 0; expert < experts; ++expert) {
    shards.push_back({StrCat("experts.", expert, ".gate_proj"), StrCat("experts.", expert, ".up_proj")});
  }
  for (const auto& [first, second] : shards) {
    EXPECT_EQ(GlobalScaleBytes(reader, prefix + first), GlobalScaleBytes(reader, prefix + second))
        << prefix << first << " / " << second;
  }
  return static_cast<int64_t>(shards.size());
}

// #30 / #32: DeepSeek-V3 (MLA, a dense first layer, shared and routed experts, an MTP layer) in compressed-tensors, as
// vLLM's deepseek_v2.py loads it: each scheme with a fused-MoE kernel exports (its checker run by the exporter: MLA's
// q_a_proj and kv_a_proj_with_mqa in one group as fused_qkv_a_proj needs, gate/up of the dense MLP and the shared
// experts likewise, one group per expert block, the routers float), reads back linear by linear as the HF-quark export
// of the same pass, the routers and the MTP layer's linears are ignored, and NVFP4's fused shards (fused_qkv_a_proj,
// gate_up_proj, each expert's w13) carry one global scale.
TEST_F(CtReadBackTest, DeepseekV3ReadsBackAsTheHfQuarkExportAndItsFusedShardsShareAGlobalScale) {
  const std::string dir = testing::TempPath("quark_ct_deepseek");
  ASSERT_TRUE(testing::WriteTinyDeepseek(dir).ok());
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->family, checkpoint::ArchFamily::kDeepseek);
  const checkpoint::DeepseekConfig& ds = *model->deepseek;
  ASSERT_GT(ds.q_lora_rank, 0);
  ASSERT_EQ(ds.first_k_dense_replace, 1);
  ASSERT_EQ(ds.num_nextn_predict_layers, 1);
  for (const std::string preset : kMoePresets) {
    SCOPED_TRACE(preset);
    testing::CtTestExport e;
    ExportAndReadBackInOneGroup(dir, preset, &e);
    if (HasFatalFailure()) return;
    const bool nvfp4 = preset == "nvfp4";
    const Json ignore = Json::parse(std::ifstream(e.compressed_tensors + "/config.json"))["quantization_config"]["ignore"];
    const std::string mtp = StrCat("model.layers.", model->num_hidden_layers, ".");
    for (const std::string& module : {std::string("model.layers.1.mlp.gate"), std::string("model.layers.2.mlp.gate"),
                                      mtp + "self_attn.q_a_proj", mtp + "self_attn.kv_a_proj_with_mqa", mtp + "eh_proj",
                                      mtp + "mlp.experts.0.down_proj"}) {
      EXPECT_NE(std::find(ignore.begin(), ignore.end(), module), ignore.end()) << module << " not in " << ignore.dump();
    }
    if (!nvfp4) continue;
    auto reader = checkpoint::CheckpointReader::Open(e.compressed_tensors);
    ASSERT_TRUE(reader.ok());
    int64_t pairs = 0;
    for (int64_t layer = 0; layer < model->num_hidden_layers; ++layer) {
      const std::string prefix = StrCat("model.layers.", layer, ".");
      const std::string q_a = prefix + "self_attn.q_a_proj";
      EXPECT_EQ(GlobalScaleBytes(**reader, q_a), GlobalScaleBytes(**reader, prefix + "self_attn.kv_a_proj_with_mqa"));
      ++pairs;
      const bool dense = layer < ds.first_k_dense_replace;
      pairs += ExpectGateUpShardsShareAGlobalScale(**reader, prefix + "mlp.", dense ? "" : "shared_experts.",
                                                   dense ? 0 : ds.n_routed_experts);
      // Not fused: q_b_proj reads q_a_layernorm's output and keeps its own global scale.
      EXPECT_NE(GlobalScaleBytes(**reader, prefix + "self_attn.q_b_proj"), GlobalScaleBytes(**reader, q_a)) << prefix;
    }
    EXPECT_EQ(pairs, 2 + 2 * (2 + ds.n_routed_experts));
  }
}

// #32 item 4: Llama 4 text in compressed-tensors, as vLLM's llama4.py loads it (per-expert
// feed_forward.experts.E.{gate,up,down}_proj mapped onto its FusedMoE, q/k/v and gate/up fused, the routers float):
// MoE layers interleaved with dense ones, the shared expert; each scheme with a fused-MoE kernel exports (its checker
// run by the exporter), reads back linear by linear as the HF-quark export of the same pass, and NVFP4's fused shards
// (each expert's w13, the shared expert's and the dense MLP's gate_up_proj) carry one global scale.
TEST_F(CtReadBackTest, Llama4ReadsBackAsTheHfQuarkExportAndItsFusedShardsShareAGlobalScale) {
  const std::string dir = testing::TempPath("quark_ct_llama4");
  ASSERT_TRUE(testing::WriteTinyModel("llama4", dir).ok());
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->family, checkpoint::ArchFamily::kLlama4);
  const checkpoint::Llama4Config& l4 = *model->llama4;
  ASSERT_TRUE(std::count(l4.moe_layers.begin(), l4.moe_layers.end(), true) > 0 &&
              std::count(l4.moe_layers.begin(), l4.moe_layers.end(), false) > 0)
      << "the tiny shape interleaves MoE and dense layers";
  for (const std::string preset : kMoePresets) {
    SCOPED_TRACE(preset);
    testing::CtTestExport e;
    ExportAndReadBackInOneGroup(dir, preset, &e);
    if (HasFatalFailure()) return;
    const bool nvfp4 = preset == "nvfp4";
    auto reader = checkpoint::CheckpointReader::Open(e.compressed_tensors);
    ASSERT_TRUE(reader.ok());
    for (int64_t layer = 0; layer < model->num_hidden_layers; ++layer) {
      if (!l4.moe_layers[layer]) continue;
      auto router = (*reader)->Get(StrCat("model.layers.", layer, ".feed_forward.router.weight"));
      ASSERT_TRUE(router.ok()) << layer;
      EXPECT_EQ(router->info->dtype, checkpoint::StDType::kF32) << "the router is copied in float";
    }
    if (!nvfp4) continue;
    int64_t pairs = 0;
    for (int64_t layer = 0; layer < model->num_hidden_layers; ++layer) {
      const bool moe = l4.moe_layers[layer];
      pairs += ExpectGateUpShardsShareAGlobalScale(**reader, StrCat("model.layers.", layer, ".feed_forward."),
                                                   moe ? "shared_expert." : "", moe ? l4.num_local_experts : 0);
      const std::string attn = StrCat("model.layers.", layer, ".self_attn.");
      EXPECT_EQ(GlobalScaleBytes(**reader, attn + "q_proj"), GlobalScaleBytes(**reader, attn + "k_proj")) << attn;
      EXPECT_EQ(GlobalScaleBytes(**reader, attn + "q_proj"), GlobalScaleBytes(**reader, attn + "v_proj")) << attn;
    }
    EXPECT_GT(pairs, model->num_hidden_layers);
  }
}

TEST_F(CtReadBackTest, ABfloat16ModelsSixteenBitGroupScalesReadBackExactly) {
  testing::SyntheticLlamaOptions o;
  o.torch_dtype = "bfloat16";
  const std::string model = testing::WriteSyntheticLlama(o);
  auto e = testing::ExportBoth(model, "uint4_wo_32");
  ASSERT_TRUE(e.ok()) << e.status();
  ExpectSameReadBack(*e, model, PresetOf("uint4_wo_32"), "uint4_wo_32", false);
}

TEST_F(CtReadBackTest, TheFp8KvCacheSchemeIsTheKOutputAndVOutputSpecWithTheirScales) {
  auto dir = testing::ExportFp8WithKvCache(*model_, {"hf_quark", "compressed_tensors"});
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto ct = exporter::CtWeightSource::Open(*dir + "/compressed_tensors");
  auto hf = exporter::HfQuarkWeightSource::Open(*dir + "/hf_quark");
  ASSERT_TRUE(ct.ok() && hf.ok()) << ct.status();
  for (const char* p : {"k_proj", "v_proj", "q_proj"}) {
    const std::string m = StrCat("model.layers.1.self_attn.", p);
    EXPECT_EQ(KvCacheSpecFor((*ct)->config(), m), KvCacheSpecFor((*hf)->config(), m)) << m;
    auto a = (*ct)->Activations(m);
    auto b = (*hf)->Activations(m);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status();
    ExpectParamsEqual(a->output, b->output, p);
    EXPECT_EQ(a->output.has_value(), std::string(p) != "q_proj") << m;
  }
}

// Newer llm-compressor writes the KV-cache scales on the attention (`self_attn.k_scale` / `v_scale`) instead of the
// legacy `k_proj.output_scale` / `v_proj.output_scale` our writer uses (vLLM reads both): the reader takes either.
TEST_F(CtReadBackTest, AttentionLevelKvScalesReadAsTheLegacyOnes) {
  auto dir = testing::ExportFp8WithKvCache(*model_, {"compressed_tensors"});
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto reader = checkpoint::CheckpointReader::Open(*dir);
  ASSERT_TRUE(reader.ok());
  const auto renamed = [](std::string name) {
    for (const char* p : {"k", "v"}) {
      const std::string legacy = StrCat(".", p, "_proj.output_scale");
      if (name.size() > legacy.size() && name.compare(name.size() - legacy.size(), legacy.size(), legacy) == 0) {
        return StrCat(name.substr(0, name.size() - legacy.size()), ".", p, "_scale");
      }
    }
    return name;
  };
  std::vector<checkpoint::PlannedTensor> plan;
  for (const std::string& name : (*reader)->Names()) {
    auto ref = (*reader)->Get(name);
    plan.push_back({renamed(name), ref->info->dtype, ref->info->shape});
  }
  const std::string moved = testing::TempPath("quark_ct_kv_attention");
  auto writer = checkpoint::CheckpointWriter::Create(moved, plan);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const std::string& name : (*reader)->Names()) {
    ASSERT_TRUE((*writer)->Write(renamed(name), (*reader)->Get(name)->bytes()).ok()) << name;
  }
  ASSERT_TRUE((*writer)->Finish().ok());
  fs::copy_file(*dir + "/config.json", moved + "/config.json");
  auto legacy = exporter::CtWeightSource::Open(*dir);
  auto attention = exporter::CtWeightSource::Open(moved);
  ASSERT_TRUE(legacy.ok() && attention.ok()) << attention.status();
  EXPECT_FALSE((*attention)->Has("model.layers.1.self_attn.k_proj.output_scale"));
  for (const char* p : {"k_proj", "v_proj"}) {
    const std::string m = StrCat("model.layers.1.self_attn.", p);
    auto a = (*attention)->Activations(m);
    auto b = (*legacy)->Activations(m);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status();
    ASSERT_TRUE(a->output.has_value()) << m;
    ExpectParamsEqual(a->output, b->output, p);
  }
}

TEST(CtGlobalScaleTest, TheDivisorsPreimageIsTheEnginesScaleOrItsNeighbour) {
  int exact = 0, nearest = 0;
  const int n = 1 << 14;
  for (int i = 0; i < n; ++i) {
    const float amax = std::ldexp(1.0f + i / static_cast<float>(n), i % 7 - 3);
    const float g = amax / 2688.0f;  // the engine's global scale (Nvfp4GlobalScale)
    const float r = 1.0f / g;        // what the writer stores
    const float back = exporter::CtGlobalScaleFromDivisor(r);
    EXPECT_EQ(1.0f / back, r) << g;  // always a preimage of the stored divisor
    EXPECT_TRUE(back == g || std::nextafter(back, g) == g) << g;
    exact += back == g;
    nearest += 1.0f / r == g;
  }
  // Preferring the preimage the engine's formula can produce beats taking fl(1 / r) (measured: 94% vs 88%).
  EXPECT_GT(exact, nearest);
  EXPECT_GT(exact, n * 9 / 10);
  std::cout << "global scales read back exactly: " << exact << " of " << n << " (fl(1 / r): " << nearest << ")\n";
}

// --- bad configs: every unknown key or value named ---

std::vector<ModuleInfo> TwoLinears() {
  return {{"model.layers.0.mlp.up_proj", "Linear", {64, 32}},
          {"model.layers.0.self_attn.k_proj", "Linear", {32, 32}},
          {"lm_head", "Linear", {100, 32}},
          {"model.embed_tokens", "Embedding", {100, 32}}};
}

Json GoodConfig() {
  const Json w = {{"num_bits", 4},
                  {"type", "int"},
                  {"symmetric", true},
                  {"strategy", "group"},
                  {"group_size", 32},
                  {"dynamic", false},
                  {"actorder", nullptr},
                  {"observer", "minmax"},
                  {"observer_kwargs", Json::object()},
                  {"block_structure", nullptr}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "pack-quantized"},
          {"ignore", {"lm_head"}},
          {"quantization_status", "compressed"},
          {"version", "0.18.0"},
          {"kv_cache_scheme", nullptr},
          {"sparsity_config", Json::object()},
          {"transform_config", Json::object()},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"format", "pack-quantized"}}}}}};
}

TEST(CtReadConfigTest, AGoodConfigIsOneExactEntryPerLinearAndIgnoreIsExclude) {
  auto c = exporter::ConfigFromCompressedTensors(GoodConfig(), TwoLinears());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->layer_quant_config.size(), 2u);
  EXPECT_EQ(c->layer_quant_config[0].pattern, "model.layers.0.mlp.up_proj");
  EXPECT_EQ(c->layer_quant_config[0].config.weight, PresetConfig("int4_wo_32")->global_quant_config.weight);
  EXPECT_EQ(c->exclude, std::vector<std::string>{"lm_head"});
  Json regex = GoodConfig();
  regex["config_groups"]["group_0"]["targets"] = {"re:.*mlp\\..*"};
  regex["ignore"] = {"re:lm_"};  // re.match: anchored at the start only
  c = exporter::ConfigFromCompressedTensors(regex, TwoLinears());
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->layer_quant_config.size(), 1u);
  EXPECT_EQ(c->exclude, std::vector<std::string>{"lm_head"});
}

TEST(CtReadConfigTest, UnknownKeysAndValuesAreRefusedNamingThem) {
  struct Case {
    std::function<void(Json&)> edit;
    const char* message;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const auto g = [](Json& qc) -> Json& { return qc["config_groups"]["group_0"]; };
  const std::vector<Case> cases = {
      {[](Json& qc) { qc["provider"] = "x"; }, "provider: not a compressed-tensors QuantizationConfig field"},
      {[&](Json& qc) { g(qc)["round"] = 1; }, "config_groups.group_0.round: not a QuantizationScheme field"},
      {[&](Json& qc) { g(qc)["weights"]["rounding"] = "even"; }, "config_groups.group_0.weights.rounding"},
      {[&](Json& qc) { g(qc)["weights"]["type"] = "posit"; }, "config_groups.group_0.weights.type: \"posit\""},
      {[&](Json& qc) { g(qc)["weights"]["num_bits"] = 5; }, "config_groups.group_0.weights.num_bits: 5-bit int"},
      {[&](Json& qc) { g(qc)["weights"]["actorder"] = "group"; }, "config_groups.group_0.weights.actorder: \"group\"",
       absl::StatusCode::kUnimplemented},
      {[&](Json& qc) { g(qc)["weights"]["actorder"] = "sideways"; }, "config_groups.group_0.weights.actorder"},
      {[&](Json& qc) { g(qc)["weights"]["scale_dtype"] = "torch.float64"; },
       "config_groups.group_0.weights.scale_dtype"},
      {[&](Json& qc) { g(qc)["weights"]["dynamic"] = true; }, "config_groups.group_0.weights.dynamic"},
      {[&](Json& qc) { g(qc)["targets"] = {"model.layers.9.mlp.up_proj"}; }, "config_groups.group_0.targets[0]"},
      {[&](Json& qc) { g(qc)["targets"] = {"Embedding"}; }, "config_groups.group_0.targets[0]: \"Embedding\""},
      {[&](Json& qc) { g(qc)["format"] = "dense"; }, "config_groups.group_0.format: \"dense\" is not read",
       absl::StatusCode::kUnimplemented},
      {[&](Json& qc) { g(qc)["output_activations"] = g(qc)["weights"]; }, "config_groups.group_0.output_activations",
       absl::StatusCode::kUnimplemented},
      {[&](Json& qc) { g(qc)["weights"] = nullptr; }, "config_groups.group_0.weights: missing"},
      {[](Json& qc) {
         qc["config_groups"] = {{"W4A16", {"Linear"}}};
       },
       "config_groups.W4A16"},
      {[](Json& qc) { qc["ignore"] = {"re:("}; }, "ignore[0]: \"re:(\" is not a regex"},
      {[](Json& qc) { qc["quantization_status"] = "frozen"; }, "quantization_status: \"frozen\""},
      {[](Json& qc) { qc["quantization_status"] = "done"; }, "quantization_status: \"done\" is not a Quantization"},
      {[](Json& qc) {
         qc["sparsity_config"] = {{"format", "sparse-bitmask"}};
       },
       "sparsity_config:", absl::StatusCode::kUnimplemented},
      {[](Json& qc) {
         qc["kv_cache_scheme"] = {{"num_bits", 4}, {"type", "int"}, {"strategy", "tensor"}};
       },
       "kv_cache_scheme"},
      {[](Json& qc) {
         qc["kv_cache_scheme"] = {
             {"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}, {"colour", "red"}};
       },
       "kv_cache_scheme.colour"},
  };
  for (const Case& c : cases) {
    Json qc = GoodConfig();
    c.edit(qc);
    auto config = exporter::ConfigFromCompressedTensors(qc, TwoLinears());
    ASSERT_FALSE(config.ok()) << c.message;
    EXPECT_EQ(config.status().code(), c.code) << config.status();
    EXPECT_NE(config.status().message().find(c.message), std::string::npos) << config.status();
  }
}

TEST_F(CtReadBackTest, ABrokenExportIsRefusedNamingTheFileTheKeyOrTheTensor) {
  auto e = testing::ExportBoth(*model_, "int4_wo_64");
  ASSERT_TRUE(e.ok()) << e.status();
  const std::string dir = e->compressed_tensors;
  Json config = Json::parse(std::ifstream(dir + "/config.json"));
  const Json good = config;
  config["quantization_config"]["config_groups"]["group_0"]["weights"]["strategy"] = "channel";
  std::ofstream(dir + "/config.json") << config.dump();
  auto source = exporter::CtWeightSource::Open(dir);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find(
                "config.json: quantization_config.config_groups.group_0.weights.group_size: 64 with strategy channel"),
            std::string::npos)
      << source.status();
  // A config that promises groups of 32 over tensors written for 64: the scale's shape is named.
  config = good;
  config["quantization_config"]["config_groups"]["group_0"]["weights"]["group_size"] = 32;
  std::ofstream(dir + "/config.json") << config.dump();
  source = exporter::CtWeightSource::Open(dir);
  ASSERT_TRUE(source.ok()) << source.status();
  auto w = (*source)->Get("model.layers.0.mlp.up_proj.weight", at::kFloat);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("model.layers.0.mlp.up_proj.weight_scale: shape"), std::string::npos)
      << w.status();
}

}  // namespace
}  // namespace quark

// Each export scheme's tensor names, dtypes and shapes (checkpoint-format.md), and the consumer-rule checker on
// broken quantization_config dicts.
#include "core/export/hf_quark_layout.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "core/config/config_choice.h"
#include "core/config/e8m0_tiles.h"
#include "core/config/presets.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"
#include "core/export/hf_quark_block_rules.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_config.h"
#include "core/numerics/packing.h"
#include "tests/quantize/test_model.h"

namespace quark::exporter {
namespace {

using checkpoint::StDType;

struct Expected {
  std::string suffix;
  StDType dtype;
  std::vector<int64_t> shape;
};

void ExpectTensors(const std::string& preset, const std::vector<Expected>& expected, int64_t out = 64, int64_t in = 128) {
  auto config = PresetConfig(preset);
  ASSERT_TRUE(config.ok());
  auto specs = QuantizedLinearTensors("m", config->global_quant_config, out, in, false, StDType::kBF16, StDType::kBF16);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), expected.size()) << preset;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ((*specs)[i].name, "m." + expected[i].suffix) << preset;
    EXPECT_EQ((*specs)[i].dtypes[0], expected[i].dtype) << preset << " " << expected[i].suffix;
    EXPECT_EQ((*specs)[i].shape, expected[i].shape) << preset << " " << expected[i].suffix;
  }
}

TEST(HfQuarkLayoutTest, TensorsPerScheme) {
  ExpectTensors("fp8", {{"weight", StDType::kF8E4M3, {64, 128}}, {"weight_scale", StDType::kF32, {}},
                        {"input_scale", StDType::kF32, {}}});
  ExpectTensors("ptpc_fp8", {{"weight", StDType::kF8E4M3, {64, 128}}, {"weight_scale", StDType::kF32, {64}}});
  ExpectTensors("int8", {{"weight", StDType::kI8, {64, 128}}, {"weight_scale", StDType::kF32, {}},
                         {"weight_zero_point", StDType::kI8, {}}, {"input_scale", StDType::kF32, {1}},
                         {"input_zero_point", StDType::kI8, {1}}});
  ExpectTensors("w_int8_per_channel_a_int8_per_token_dynamic",
                {{"weight", StDType::kI8, {64, 128}}, {"weight_scale", StDType::kF32, {64}},
                 {"weight_zero_point", StDType::kI8, {64}}});
  ExpectTensors("uint4_wo_32", {{"weight", StDType::kI32, {128, 8}}, {"weight_scale", StDType::kBF16, {4, 64}},
                                {"weight_zero_point", StDType::kI32, {4, 8}}});
  ExpectTensors("int4_wo_64", {{"weight", StDType::kI32, {128, 8}}, {"weight_scale", StDType::kBF16, {2, 64}},
                               {"weight_zero_point", StDType::kI32, {2, 8}}});
  ExpectTensors("mxfp4", {{"weight", StDType::kU8, {64, 64}}, {"weight_scale", StDType::kU8, {64, 4}}});
  ExpectTensors("mxfp6_e2m3", {{"weight", StDType::kU8, {64, 96}}, {"weight_scale", StDType::kU8, {64, 4}}});
  ExpectTensors("bfloat16", {{"weight", StDType::kBF16, {64, 128}}});
  // FP8 128x128 blocks: the scale is [out / 128, in / 128] (vLLM's BlockQuantScaleParameter); dynamic input.
  ExpectTensors("fp8_block", {{"weight", StDType::kF8E4M3, {256, 384}}, {"weight_scale", StDType::kF32, {2, 3}}}, 256,
                384);
  // NVFP4: fp4 pairs per byte, F8_E4M3 block scales of 16, F32 scalar global scales (weight and calibrated input).
  ExpectTensors("nvfp4", {{"weight", StDType::kU8, {64, 64}}, {"weight_scale", StDType::kF8E4M3, {64, 8}},
                          {"weight_scale_2", StDType::kF32, {}}, {"input_scale_2", StDType::kF32, {}}});
  // #30 per-channel int4 / uint4: the zero points packed 8 a word as Quark's Pack_4_bits packs them ([64] -> [8]).
  ExpectTensors("int4_wo_per_channel", {{"weight", StDType::kI32, {64, 16}}, {"weight_scale", StDType::kF32, {64}},
                                        {"weight_zero_point", StDType::kI32, {8}}});
  ExpectTensors("uint4_wo_per_channel", {{"weight", StDType::kI32, {64, 16}}, {"weight_scale", StDType::kF32, {64}},
                                         {"weight_zero_point", StDType::kI32, {8}}});
  // A 172-wide input: MX pads its last block as Quark's exporter does (ceil(172 / 32) = 6 columns), fp4 packs two
  // per byte.
  ExpectTensors("mxfp4_weight_only", {{"weight", StDType::kU8, {64, 86}}, {"weight_scale", StDType::kU8, {64, 6}}}, 64, 172);
}

TEST(HfQuarkLayoutTest, UnpackableShapesNameTheModuleAndDimension) {
  auto config = PresetConfig("int4_wo_per_channel");
  auto specs = QuantizedLinearTensors("model.layers.0.mlp.down_proj", config->global_quant_config, 64, 172, false,
                                      StDType::kF32, StDType::kF32);
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(std::string(specs.status().message()).find("model.layers.0.mlp.down_proj.weight"), std::string::npos);
  EXPECT_NE(std::string(specs.status().message()).find("172"), std::string::npos);
}

nlohmann::ordered_json ExportConfig(const char* preset, bool kv) {
  Config config = *PresetConfig(preset);
  if (kv) EXPECT_TRUE(ApplyKvCacheDtype("fp8", config).ok());
  return ConfigToQuarkJson(config);
}

bool Mentions(const std::vector<std::string>& problems, const std::string& text) {
  for (const auto& p : problems) {
    if (p.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(HfQuarkCheckerTest, GoodConfigsPass) {
  for (bool kv : {false, true}) {
    for (const char* preset : {"fp8", "int8", "uint4_wo_128", "mxfp4"}) {
      EXPECT_TRUE(QuantizationConfigProblems(ExportConfig(preset, kv)).empty()) << preset;
    }
  }
}

TEST(HfQuarkCheckerTest, RejectsMissingKeys) {
  for (const char* key : {"exclude", "layer_type_quant_config", "export", "version"}) {
    auto qc = ExportConfig("fp8", false);
    qc.erase(key);
    EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), key)) << key;
  }
  auto qc = ExportConfig("fp8", false);
  qc["global_quant_config"].erase("bias");
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.bias: missing"));
  qc = ExportConfig("fp8", false);
  qc["global_quant_config"]["weight"].erase("qscheme");
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.weight.qscheme"));
  qc = ExportConfig("fp8", false);
  qc["export"].erase("min_kv_scale");
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "export.min_kv_scale"));
}

TEST(HfQuarkCheckerTest, RejectsGlobInExclude) {
  auto qc = ExportConfig("fp8", false);
  qc["exclude"] = {"lm_head", "*.mlp.down_proj"};
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "exclude[1]"));
  qc["exclude"] = {"lm_head", "re:.*down_proj"};
  EXPECT_TRUE(QuantizationConfigProblems(qc).empty());
}

TEST(HfQuarkCheckerTest, RejectsOutputAndBiasOutsideTheKvCache) {
  auto qc = ExportConfig("fp8", false);
  qc["global_quant_config"]["output_tensors"] = qc["global_quant_config"]["input_tensors"];
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.output_tensors"));
  qc = ExportConfig("fp8", false);
  qc["global_quant_config"]["bias"] = qc["global_quant_config"]["weight"];
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "global_quant_config.bias"));
  qc = ExportConfig("fp8", true);
  qc["export"]["kv_cache_group"] = {"*k_proj", "*v_proj", "*o_proj"};
  EXPECT_TRUE(Mentions(QuantizationConfigProblems(qc), "*o_proj"));
}

TEST(HfQuarkCheckerTest, RejectsUnequalFusedConfigs) {
  checkpoint::ModelConfig model;
  model.family = checkpoint::ArchFamily::kLlama;
  model.num_hidden_layers = 2;
  auto qc = ExportConfig("fp8", true);
  EXPECT_TRUE(FusedLayerProblems(qc, model).empty());  // KV outputs are stripped as vLLM strips them
  auto int8 = ExportConfig("int8", false);
  qc["layer_quant_config"]["*up_proj"] = int8["global_quant_config"];
  const auto problems = FusedLayerProblems(qc, model);
  EXPECT_TRUE(Mentions(problems, "model.layers.0.mlp.up_proj")) << problems.size();
  qc = ExportConfig("fp8", false);
  qc["exclude"] = {"lm_head", "model.layers.1.self_attn.k_proj"};
  EXPECT_TRUE(Mentions(FusedLayerProblems(qc, model), "model.layers.1.self_attn.k_proj: excluded differently"));
}

// #30: the tensors the writer plans from the engine's config are the ones a reader plans from the written config.
void ExpectSamePlan(const LayerQuantConfig& engine, const LayerQuantConfig& written, int64_t out, int64_t in) {
  auto a = QuantizedLinearTensors("m", engine, out, in, false, StDType::kBF16, StDType::kBF16);
  auto b = QuantizedLinearTensors("m", written, out, in, false, StDType::kBF16, StDType::kBF16);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].name, (*b)[i].name);
    EXPECT_EQ((*a)[i].dtypes[0], (*b)[i].dtypes[0]) << (*a)[i].name;
    EXPECT_EQ((*a)[i].shape, (*b)[i].shape) << (*a)[i].name;
  }
}

// #30 item 3: 1-D MXFP8 weights are written as E8M0 tiles [1, 32] (vLLM's QuarkW8A8Mxfp8, dispatch step 0; Quark's
// importer dequantizes fp8 per_block but not per_group); the MX fp8 input stays per_group 32.
TEST(HfQuarkExportConfigTest, Mxfp8WeightsAreWrittenAsE8m0TilesOfOneRow) {
  const Config mx = *PresetConfig("mxfp8");
  const nlohmann::ordered_json qc = ConfigToQuarkJson(HfQuarkExportConfig(mx));
  const auto& w = qc["global_quant_config"]["weight"];
  const auto& in = qc["global_quant_config"]["input_tensors"];
  EXPECT_EQ(w["dtype"], "fp8_e4m3");
  EXPECT_EQ(w["qscheme"], "per_block");
  EXPECT_EQ(w["block_size"], nlohmann::ordered_json::array({1, 32}));
  EXPECT_TRUE(w["group_size"].is_null());
  EXPECT_EQ(w["scale_type"], "float8_e8m0fnu");
  EXPECT_EQ(w["scale_format"], "e8m0");
  EXPECT_EQ(w["symmetric"], true);
  EXPECT_EQ(in["dtype"], "fp8_e4m3");
  EXPECT_EQ(in["qscheme"], "per_group");
  EXPECT_EQ(in["group_size"], 32);
  EXPECT_EQ(in["is_dynamic"], true);
  EXPECT_FALSE(VllmPerBlockProblem(w, in));
  EXPECT_TRUE(QuantizationConfigProblems(qc).empty());
  auto back = ConfigFromQuarkJson(qc);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->global_quant_config.weight);
  EXPECT_TRUE(IsE8m0Tiles(*back->global_quant_config.weight));
  ExpectSamePlan(mx.global_quant_config, back->global_quant_config, 64, 128);
}

// The errors ValidateConfig finds in `c`, joined.
std::string ConfigErrors(const Config& c) {
  std::string out;
  for (const ValidationIssue& issue : ValidateConfig(c)) {
    if (issue.severity == ValidationIssue::Severity::kError) out += issue.ToString() + "\n";
  }
  return out;
}

// The exported mxfp8 quantization_config, read back, edited by `edit`, resolved as a job's config.
Config FedBackMxfp8(const std::function<void(Config&)>& edit) {
  auto read = ConfigFromQuarkJson(ConfigToQuarkJson(HfQuarkExportConfig(*PresetConfig("mxfp8"))));
  EXPECT_TRUE(read.ok()) << read.status();
  if (!read.ok()) return Config{};
  edit(*read);
  ConfigChoice choice;
  choice.config = *read;
  auto fed = ResolveConfigChoice(choice);
  EXPECT_TRUE(fed.ok()) << fed.status();
  return fed.ok() ? *fed : Config{};
}

// #30 follow-up: that config fed back as a job's config (ResolveConfigChoice: `quark quantize --config`, the worker;
// quarkd's ResolveRequestConfig does the same) is the mxfp8 preset, as vLLM (QuarkW8A8Mxfp8: kMxfp8Static weights,
// kMxfp8Dynamic activations) and Quark (PerBlockMXObserver on the input) compute it; read as tiles, ValidateConfig
// refused it. A pair that is not exactly the export's stays as written and is refused naming the field.
TEST(HfQuarkExportConfigTest, TheExportedMxfp8ConfigFedBackAsAJobConfigIsTheMxfp8Preset) {
  const Config mx = *PresetConfig("mxfp8");
  auto read = ConfigFromQuarkJson(ConfigToQuarkJson(HfQuarkExportConfig(mx)));
  ASSERT_TRUE(read.ok()) << read.status();
  // Read as tiles it is valid too (vLLM's QuarkW8A8Mxfp8 pair); resolved, it is the preset (same key, same bytes).
  EXPECT_EQ(ConfigErrors(*read), "");
  const Config fed = FedBackMxfp8([](Config&) {});
  EXPECT_EQ(fed.global_quant_config, mx.global_quant_config);
  EXPECT_EQ(ConfigErrors(fed), "");
  // The same pair as a layer_quant_config entry.
  const Config entry = FedBackMxfp8([](Config& c) {
    c.layer_quant_config.push_back({"*down_proj", c.global_quant_config});
    c.global_quant_config = PresetConfig("fp8")->global_quant_config;
  });
  ASSERT_EQ(entry.layer_quant_config.size(), 1u);
  EXPECT_EQ(entry.layer_quant_config[0].config, mx.global_quant_config);

  struct Refused {
    std::string what;
    std::function<void(Config&)> edit;
    std::string field;
  };
  const std::vector<Refused> refused = {
      {"MXFP4 input",
       [](Config& c) {
         c.global_quant_config.input_tensors = PresetConfig("mxfp4")->global_quant_config.input_tensors;
       },
       "global_quant_config.input_tensors.dtype"},
      {"static MX input", [](Config& c) { c.global_quant_config.input_tensors->is_dynamic = false; },
       "global_quant_config.input_tensors.is_dynamic"},
      {"MX input in groups of 64", [](Config& c) { c.global_quant_config.input_tensors->group_size = 64; },
       "global_quant_config.input_tensors.group_size"},
      {"tiles of another observer",
       [](Config& c) { c.global_quant_config.weight->observer = ObserverKind::kPercentile; },
       "global_quant_config.weight.observer"},
      {"no input", [](Config& c) { c.global_quant_config.input_tensors.reset(); },
       "global_quant_config.input_tensors: none"},
  };
  // 32 x 32 tiles with the MX input are the mxfp8_2d preset: valid, and left as tiles (another quantization).
  const Config tiles_2d = FedBackMxfp8([](Config& c) { c.global_quant_config.weight->block_size = {32, 32}; });
  EXPECT_EQ(ConfigErrors(tiles_2d), "");
  EXPECT_EQ(tiles_2d.global_quant_config, PresetConfig("mxfp8_2d")->global_quant_config);
  for (const Refused& r : refused) {
    const Config c = FedBackMxfp8(r.edit);
    EXPECT_NE(ConfigErrors(c).find(r.field), std::string::npos) << r.what << ": " << ConfigErrors(c);
    ASSERT_TRUE(c.global_quant_config.weight) << r.what;
    EXPECT_TRUE(IsE8m0Tiles(*c.global_quant_config.weight)) << r.what << ": left as written";
  }
}

// #30 item 2: MXINT8 in Quark's spelling (OCP_MXINT8Spec: dtype mx, mx_element_dtype int8), read back as MXINT8 with
// the same tensors.
TEST(HfQuarkExportConfigTest, Mxint8IsWrittenAsQuarksMxDtype) {
  const Config mx = *PresetConfig("mxint8");
  const nlohmann::ordered_json qc = ConfigToQuarkJson(HfQuarkExportConfig(mx));
  for (const char* key : {"weight", "input_tensors"}) {
    const auto& spec = qc["global_quant_config"][key];
    EXPECT_EQ(spec["dtype"], "mx") << key;
    EXPECT_EQ(spec["mx_element_dtype"], "int8") << key;
    EXPECT_EQ(spec["group_size"], 32) << key;
  }
  auto back = ConfigFromQuarkJson(qc);
  ASSERT_TRUE(back.ok()) << back.status();
  const QuantSpec& w = *back->global_quant_config.weight;
  EXPECT_TRUE(IsOcpMx(w));
  EXPECT_EQ(w.ElementType(), DType::kInt8);
  ExpectSamePlan(mx.global_quant_config, back->global_quant_config, 64, 128);
}

// #30 item 4: E8M0 tiles say scale_format e8m0 beside scale_type float8_e8m0fnu (Quark's importer decodes the bytes
// as 2^(b - 127) only under scale_format e8m0); the exports before that (scale_format null) read as the same spec.
TEST(HfQuarkExportConfigTest, E8m0TilesNameScaleFormatE8m0AndOlderExportsStillRead) {
  for (const char* preset : {"mxfp8_2d", "fp8_block_e8m0"}) {
    const Config c = *PresetConfig(preset);
    nlohmann::ordered_json w = QuantSpecToQuarkJson(*c.global_quant_config.weight);
    EXPECT_EQ(w["scale_type"], "float8_e8m0fnu") << preset;
    EXPECT_EQ(w["scale_format"], "e8m0") << preset;
    w["scale_format"] = nullptr;
    auto older = QuantSpecFromQuarkJson(w, "weight");
    ASSERT_TRUE(older.ok()) << older.status();
    EXPECT_EQ(*older, *c.global_quant_config.weight) << preset;
  }
}

// Every other scheme is written as the engine spells it.
TEST(HfQuarkExportConfigTest, OtherSchemesAreUnchanged) {
  for (const char* preset : {"fp8", "int8", "uint4_wo_32", "int4_wo_per_channel", "mxfp4", "mxfp6_e2m3", "mxfp4_fp8",
                             "nvfp4", "int4_fp8", "fp8_block", "mxfp8_2d", "fp8_block_e8m0"}) {
    const Config c = *PresetConfig(preset);
    EXPECT_EQ(HfQuarkExportConfig(c), c) << preset;
  }
}

// #30 item 1: the per-channel int4 / uint4 zero points are packed as Quark's Pack_4_bits packs the 1-D [C] (reorder:
// nibble i of word w holds channel 8w + [0, 2, 4, 6, 1, 3, 5, 7][i]); an export written before, with the zero points
// unpacked, reads the same.
TEST(HfQuarkExportConfigTest, PerChannelInt4ZeroPointsArePackedAsQuarkPacksThem) {
  for (DType dtype : {DType::kUInt4, DType::kInt4}) {
    const QuantSpec spec = *PresetConfig(dtype == DType::kUInt4 ? "uint4_wo_per_channel" : "int4_wo_per_channel")
                                ->global_quant_config.weight;
    const int64_t out = 16, in = 32;
    RealQuantized q;
    q.codes = (at::arange(out * in, at::kInt).remainder(16) - (dtype == DType::kInt4 ? 8 : 0))
                  .to(dtype == DType::kInt4 ? at::kChar : at::kByte)
                  .reshape({out, in});
    q.scale = at::full({out}, 0.5f);
    q.zero_point = dtype == DType::kUInt4 ? at::arange(out, at::kInt).remainder(16) : at::zeros({out}, at::kInt);
    auto packed = PackForExport(q, spec, PackMethod::kReorder);
    ASSERT_TRUE(packed.ok()) << packed.status();
    ASSERT_EQ(packed->zero_point.sizes(), (std::vector<int64_t>{out / 8}));
    EXPECT_EQ(packed->zero_point.scalar_type(), at::kInt);
    const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int64_t word = 0; word < out / 8; ++word) {
      const uint32_t bits = static_cast<uint32_t>(packed->zero_point[word].item<int32_t>());
      for (int i = 0; i < 8; ++i) {
        const int64_t zp = q.zero_point[word * 8 + order[i]].item<int32_t>();
        EXPECT_EQ((bits >> (4 * i)) & 0xF, static_cast<uint32_t>(zp & 0xF)) << Name(dtype) << " word " << word;
      }
    }
    for (const at::Tensor& stored : {packed->zero_point, q.zero_point}) {  // packed, and the older unpacked form
      RealQuantized file{packed->codes, packed->scale, stored};
      auto back = UnpackFromExport(file, spec, PackMethod::kReorder);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(at::equal(back->codes, q.codes)) << Name(dtype);
      EXPECT_TRUE(at::equal(back->zero_point.to(at::kInt), q.zero_point)) << Name(dtype);
    }
    RealQuantized wrong{packed->codes, packed->scale, at::zeros({3}, at::kInt)};
    auto refused = UnpackFromExport(wrong, spec, PackMethod::kReorder);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(std::string(refused.status().message()).find("zero_point: [3] is neither the scale's [16]"),
              std::string::npos)
        << refused.status();
  }
}

// #30 item 5: an MX weight whose in_features is not a multiple of 32 is written with its last block padded, as Quark's
// exporter writes it, and named in a warning: neither vLLM nor Quark's importer loads it.
TEST(HfQuarkExportConfigTest, MxWidthsThatAreNotMultiplesOf32AreNamedInAWarning) {
  std::ifstream file(testing::FixturePath("stories260K/config.json"));  // a 172-wide down_proj
  ASSERT_TRUE(file) << testing::FixturePath("stories260K/config.json");
  std::stringstream text;
  text << file.rdbuf();
  auto model = checkpoint::ParseModelConfig(text.str());
  ASSERT_TRUE(model.ok()) << model.status();
  const auto warnings = VllmQuarkLoadWarnings(ConfigToQuarkJson(*PresetConfig("mxfp4_weight_only")), *model);
  EXPECT_TRUE(Mentions(warnings, "model.layers.0.mlp.down_proj: in_features 172 is not a multiple of 32; its MX "
                                 "scales are written as Quark's exporter writes them (6 columns, the last block "
                                 "padded)"))
      << warnings.size();
  EXPECT_FALSE(Mentions(warnings, "q_proj"));
  EXPECT_TRUE(VllmQuarkLoadWarnings(ConfigToQuarkJson(*PresetConfig("fp8")), *model).empty());
  // MXFP8 as exported ([1, 32] E8M0 tiles): the same padded layout, the same warning, naming vLLM's MXFP8 class.
  const Config exported_mxfp8 = HfQuarkExportConfig(*PresetConfig("mxfp8"));
  const auto mxfp8_warnings = VllmQuarkLoadWarnings(ConfigToQuarkJson(exported_mxfp8), *model);
  EXPECT_TRUE(Mentions(mxfp8_warnings, "model.layers.0.mlp.down_proj: in_features 172 is not a multiple of 32; its MX "
                                       "scales are written as Quark's exporter writes them (6 columns, the last block "
                                       "padded), which vLLM (QuarkW8A8Mxfp8 allocates 5)"))
      << mxfp8_warnings.size();
  auto tiles = QuantizedLinearTensors("m", exported_mxfp8.global_quant_config, 64, 172, false, StDType::kBF16,
                                      StDType::kBF16);
  ASSERT_TRUE(tiles.ok()) << tiles.status();
  ASSERT_EQ(tiles->size(), 2u);
  EXPECT_EQ((*tiles)[1].name, "m.weight_scale");
  EXPECT_EQ((*tiles)[1].shape, (std::vector<int64_t>{64, 6}));
  // Two-row tiles are not MX: they must still tile the weight.
  Config two_rows = exported_mxfp8;
  two_rows.global_quant_config.weight->block_size = {2, 32};
  EXPECT_FALSE(QuantizedLinearTensors("m", two_rows.global_quant_config, 64, 172, false, StDType::kBF16,
                                      StDType::kBF16).ok());
}

}  // namespace
}  // namespace quark::exporter

// Every preset survives each of the Config's forms: proto, proto JSON, and Quark's quantization_config dict.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/config/config_json.h"
#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "core/config/quark_json.h"

namespace quark {
namespace {

using ::testing::HasSubstr;
namespace pb = quark::v1;

// A config that sets every field away from its default.
Config EverythingConfig() {
  Config c = *PresetConfig("w_int8_per_channel_a_int8_per_token_dynamic");
  QuantSpec percentile;
  percentile.dtype = DType::kUInt8;
  percentile.symmetric = false;
  percentile.observer = ObserverKind::kPercentile;
  percentile.percentile = 99.9;
  percentile.round_method = RoundMethod::kFloor;
  percentile.scale_type = ScaleType::kPof2;
  percentile.zero_point_type = ZeroPointType::kFloat32;
  LayerQuantConfig down;
  down.input_tensors = percentile;
  QuantSpec legacy_mx;
  legacy_mx.dtype = DType::kMx;
  legacy_mx.mx_element_dtype = DType::kFp6E2M3;
  legacy_mx.qscheme = QScheme::kPerGroup;
  legacy_mx.group_size = 32;
  legacy_mx.observer = ObserverKind::kMxBlock;
  legacy_mx.scale_calculation_mode = ScaleCalculationMode::kCeil;
  down.weight = legacy_mx;
  c.layer_quant_config.push_back({"*.mlp.down_proj", down});
  c.layer_quant_config.push_back({"*.mlp.a_proj", down});  // order matters (first match): "a" after "d"
  LayerQuantConfig embedding;
  embedding.weight = c.global_quant_config.weight;
  c.layer_type_quant_config["Embedding"] = embedding;
  GptqAlgo gptq;
  gptq.damp_percent = 0.05f;
  gptq.desc_act = false;
  gptq.inside_layer_modules = {"self_attn.q_proj", "mlp.up_proj"};
  gptq.model_decoder_layers = "model.layers";
  SmoothQuantAlgo smooth;
  smooth.alpha = 0.5f;
  smooth.scaling_layers = {{"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj"}, "self_attn.q_proj", ""}};
  c.algo_config = {smooth, gptq, AwqAlgo{}, AutoSmoothQuantAlgo{}, RotationAlgo{true, {}}};
  c.pack_method = PackMethod::kOrder;
  c.min_kv_scale = 0.25f;
  EXPECT_TRUE(ApplyKvCacheDtype("fp8", c).ok());
  return c;
}

// #35: GPTAQ / Qronos with every field of Quark 0.13's GPTAQConfig / QronosConfig away from its default.
Config AsymmetricConfig(HessianMethod method) {
  Config c = *PresetConfig("uint4_wo_128");
  GptqAlgo a;
  a.method = method;
  a.alpha = method == HessianMethod::kQronos ? 2e-3 : 0.5;
  if (method == HessianMethod::kQronos) a.beta = 5e3;
  if (method == HessianMethod::kGptaq) a.damp_percent = 0.02f;
  a.desc_act = false;
  a.static_groups = false;
  a.block_size = 64;
  a.inside_layer_modules = {"self_attn.q_proj", "mlp.down_proj"};
  a.model_decoder_layers = "model.layers";
  c.algo_config = {a};
  return c;
}

std::vector<std::pair<std::string, Config>> AllConfigs() {
  std::vector<std::pair<std::string, Config>> out;
  for (const auto& p : AllPresets()) out.emplace_back(p.name, p.config);
  for (const auto& p : AllPresets()) {
    Config with_kv = p.config;
    EXPECT_TRUE(ApplyKvCacheDtype("fp8", with_kv).ok());
    out.emplace_back(p.name + "+kv_fp8", with_kv);
  }
  out.emplace_back("everything", EverythingConfig());
  out.emplace_back("gptaq", AsymmetricConfig(HessianMethod::kGptaq));
  out.emplace_back("qronos", AsymmetricConfig(HessianMethod::kQronos));
  return out;
}

// #35: the API's GptaqConfig / QronosConfig leave unset fields to Quark's defaults (Qronos's alpha is 1e-3).
TEST(RoundTripTest, UnsetAsymmetricFieldsTakeQuarksDefaults) {
  pb::AlgoConfig qronos;
  qronos.mutable_qronos();
  const auto algo = FromProto(qronos, "algo_config[0]");
  ASSERT_TRUE(algo.ok()) << algo.status();
  const auto& a = std::get<GptqAlgo>(*algo);
  EXPECT_EQ(a.method, HessianMethod::kQronos);
  EXPECT_EQ(a.alpha, 1e-3);
  EXPECT_EQ(a.beta, 1e4);
  EXPECT_EQ(a.block_size, 128);
  EXPECT_TRUE(a.desc_act && a.static_groups);
  pb::AlgoConfig gptaq;
  gptaq.mutable_gptaq();
  const auto& g = std::get<GptqAlgo>(*FromProto(gptaq, "algo_config[0]"));
  EXPECT_EQ(g.method, HessianMethod::kGptaq);
  EXPECT_EQ(g.alpha, 0.25);
  EXPECT_EQ(g.damp_percent, 0.01f);
}

// #35: the imatrix_mse weight observer travels in the proto; Quark's dict names the MinMax class (Quark has none).
TEST(RoundTripTest, ImatrixMseObserverInTheProto) {
  Config c = *PresetConfig("uint4_wo_128");
  c.global_quant_config.weight->observer = ObserverKind::kImatrixMse;
  EXPECT_EQ(ToProto(c).global_quant_config().weight().observer(), pb::OBSERVER_TYPE_IMATRIX_MSE);
  EXPECT_EQ(*FromProto(ToProto(c)), c);
  EXPECT_EQ(*ConfigFromAnyJson(*ConfigToProtoJson(c)), c);
  EXPECT_EQ(ConfigToQuarkJson(c)["global_quant_config"]["weight"]["observer_cls"], "PerGroupMinMaxObserver");
  auto from_short_name = ConfigFromAnyJson(
      R"({"global_quant_config": {"weight": {"dtype": "uint4", "qscheme": "per_group", "group_size": 128, )"
      R"("ch_axis": 1, "symmetric": false, "observer": "imatrix_mse"}}})");
  ASSERT_TRUE(from_short_name.ok()) << from_short_name.status();
  EXPECT_EQ(from_short_name->global_quant_config.weight->observer, ObserverKind::kImatrixMse);
}

TEST(RoundTripTest, ProtoMessage) {
  for (const auto& [name, config] : AllConfigs()) {
    auto back = FromProto(ToProto(config));
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_EQ(*back, config) << name;
  }
}

TEST(RoundTripTest, ProtoJson) {
  for (const auto& [name, config] : AllConfigs()) {
    auto json = ConfigToProtoJson(config);
    ASSERT_TRUE(json.ok()) << name;
    auto back = ConfigFromAnyJson(*json);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status() << "\n" << *json;
    EXPECT_EQ(*back, config) << name;
  }
}

TEST(RoundTripTest, QuarkDictExportThenImportGivesTheSameConfig) {
  for (const auto& [name, config] : AllConfigs()) {
    const auto dict = ConfigToQuarkJson(config);
    auto back = ConfigFromQuarkJson(dict);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status();
    EXPECT_EQ(*back, config) << name << "\n" << dict.dump(2);
    // Through text too, and through a whole HF config.json that holds it.
    EXPECT_EQ(*ConfigFromAnyJson(dict.dump()), config) << name;
    nlohmann::ordered_json hf = {{"model_type", "llama"}, {"quantization_config", dict}};
    EXPECT_EQ(*ConfigFromAnyJson(hf.dump()), config) << name;
  }
}

TEST(RoundTripTest, QuarkDictHasEveryKeyVllmIndexes) {
  Config config = *PresetConfig("fp8");
  ASSERT_TRUE(ApplyKvCacheDtype("fp8", config).ok());
  const auto j = ConfigToQuarkJson(config);
  for (const char* key : {"quant_method", "global_quant_config", "layer_quant_config", "layer_type_quant_config",
                          "exclude", "export", "algo_config", "quant_mode", "kv_cache_quant_config", "version"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["quant_method"], "quark");
  EXPECT_EQ(j["export"]["kv_cache_group"], nlohmann::ordered_json::array({"*k_proj", "*v_proj"}));
  EXPECT_EQ(j["export"]["pack_method"], "reorder");
  EXPECT_EQ(j["export"]["weight_format"], "real_quantized");
  for (const char* field : {"dtype", "qscheme", "is_dynamic", "symmetric", "ch_axis", "group_size", "round_method",
                            "scale_type", "scale_format", "scale_calculation_mode", "mx_element_dtype", "observer_cls"}) {
    EXPECT_TRUE(j["global_quant_config"]["weight"].contains(field)) << field;
  }
  EXPECT_TRUE(j["global_quant_config"]["output_tensors"].is_null());
  EXPECT_EQ(j["global_quant_config"]["weight"]["observer_cls"], "PerTensorMinMaxObserver");
}

TEST(RoundTripTest, ProtoErrorsNameTheField) {
  quark::v1::Config message = ToProto(*PresetConfig("fp8"));
  message.mutable_global_quant_config()->mutable_weight()->set_dtype(quark::v1::DATA_TYPE_UNSPECIFIED);
  auto back = FromProto(message);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("global_quant_config.weight.dtype: required"));

  message = ToProto(*PresetConfig("fp8"));
  message.mutable_global_quant_config()->mutable_input_tensors()->set_round_method(
      static_cast<quark::v1::RoundMethod>(42));
  back = FromProto(message);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("global_quant_config.input_tensors.round_method"));

  message = ToProto(*PresetConfig("fp8"));
  message.add_layer_quant_config()->set_pattern("");
  back = FromProto(message);
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("layer_quant_config[0].pattern: required"));

  message = ToProto(*PresetConfig("fp8"));
  message.add_algo_config();
  back = FromProto(message);
  EXPECT_THAT(std::string(back.status().message()), HasSubstr("algo_config[0]: no algorithm set"));
}

TEST(RoundTripTest, JsonSyntaxErrorNamesTheByteOffset) {
  auto config = ConfigFromAnyJson("{\"global_quant_config\": {\"weight\": }");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("invalid JSON at byte 36"));
}

// Found with the fuzz targets (tests/fuzz/corpus/config_json_fuzz/crash_number_overflow): nlohmann reports a number
// no double holds as out_of_range, not parse_error; it escaped ConfigFromAnyJson and aborted the process.
TEST(RoundTripTest, NumberTooLargeForADoubleIsAnError) {
  auto config = ConfigFromAnyJson(R"({"global_quant_config": {"weight": {"dtype": "int8", "group_size": 1e400}}})");
  ASSERT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("number overflow"));
}

TEST(RoundTripTest, ProtoJsonBadEnumNamesTheField) {
  auto config = ConfigFromAnyJson(R"({"globalQuantConfig": {"weight": {"dtype": "DATA_TYPE_INT5"}}})");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("dtype"));
}

}  // namespace
}  // namespace quark

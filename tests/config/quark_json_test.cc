// Quark's own quantization_config dict, as Quark 0.x writes it into an exported config.json.
#include "core/config/quark_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace quark {
namespace {

using ::testing::HasSubstr;
using OrderedJson = nlohmann::ordered_json;

// Written the way a Quark export of Llama with fp8 weights/activations and an fp8 KV cache looks.
constexpr const char* kQuarkExport = R"({
  "quant_method": "quark",
  "global_quant_config": {
    "input_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "ch_axis": null, "group_size": null,
                      "symmetric": true, "round_method": "half_even", "scale_type": "float",
                      "is_dynamic": false, "observer_cls": "PerTensorMinMaxObserver", "mx_element_dtype": null},
    "output_tensors": null,
    "weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "ch_axis": null, "group_size": null,
               "symmetric": true, "round_method": "half_even", "scale_type": "float",
               "is_dynamic": false, "observer_cls": "PerTensorMinMaxObserver", "mx_element_dtype": null},
    "bias": null, "target_device": null},
  "layer_quant_config": {
    "*v_proj": {"input_tensors": null, "weight": null, "bias": null,
                "output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": false,
                                   "symmetric": true, "observer_cls": "PerTensorMinMaxObserver"}},
    "*k_proj": {"input_tensors": null, "weight": null, "bias": null,
                "output_tensors": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": false,
                                   "symmetric": true, "observer_cls": "PerTensorMinMaxObserver"}}},
  "layer_type_quant_config": {},
  "exclude": ["lm_head"],
  "algo_config": null,
  "quant_mode": "eager_mode",
  "export": {"kv_cache_group": ["*v_proj", "*k_proj"], "min_kv_scale": 0.0, "pack_method": "reorder",
             "weight_format": "real_quantized", "weight_merge_groups": null},
  "version": "0.8"
})";

TEST(QuarkJsonTest, ImportsAQuarkExport) {
  auto config = ConfigFromQuarkJson(OrderedJson::parse(kQuarkExport));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->global_quant_config.weight);
  EXPECT_EQ(config->global_quant_config.weight->dtype, DType::kFp8E4M3);
  EXPECT_EQ(config->global_quant_config.weight->observer, ObserverKind::kMinMax);
  EXPECT_FALSE(config->global_quant_config.output_tensors);
  // Order is kept: layer_quant_config is first-match.
  ASSERT_EQ(config->layer_quant_config.size(), 2u);
  EXPECT_EQ(config->layer_quant_config[0].pattern, "*v_proj");
  // No kv_cache_quant_config key: rebuilt from export.kv_cache_group.
  ASSERT_EQ(config->kv_cache_quant_config.size(), 2u);
  EXPECT_EQ(config->kv_cache_quant_config[1].pattern, "*k_proj");
  EXPECT_EQ(config->exclude, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(config->pack_method, PackMethod::kReorder);
}

TEST(QuarkJsonTest, ObserverClassNamesMapToObservers) {
  auto spec = [](const char* observer) {
    return QuantSpecFromQuarkJson(OrderedJson{{"dtype", "int8"}, {"observer_cls", observer}}, "w");
  };
  EXPECT_EQ(spec("PerTensorPercentileObserver")->observer, ObserverKind::kPercentile);
  EXPECT_EQ(spec("PerTensorMSEObserver")->observer, ObserverKind::kMse);
  EXPECT_EQ(spec("PerChannelMinMaxObserver")->observer, ObserverKind::kMinMax);
  auto mx = QuantSpecFromQuarkJson(OrderedJson{{"dtype", "fp4"}, {"observer_cls", "PerBlockMXObserver"},
                                               {"qscheme", "per_group"}, {"group_size", 32}}, "w");
  EXPECT_TRUE(mx->IsMx());
  EXPECT_THAT(std::string(spec("MagicObserver").status().message()),
              HasSubstr("w.observer_cls: unknown value \"MagicObserver\""));
}

TEST(QuarkJsonTest, ShortSpecTakesDefaults) {
  auto spec = QuantSpecFromQuarkJson(OrderedJson{{"dtype", "uint4"}, {"qscheme", "per_group"}, {"group_size", 128},
                                                 {"symmetric", false}}, "weight");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->round_method, RoundMethod::kHalfEven);
  EXPECT_EQ(spec->scale_type, ScaleType::kFloat);
  EXPECT_FALSE(spec->ch_axis);
}

TEST(QuarkJsonTest, BadValuesNameTheKeyPath) {
  auto bad = [](OrderedJson j) { return std::string(ConfigFromQuarkJson(j).status().message()); };
  EXPECT_THAT(bad(OrderedJson{{"global_quant_config", {{"weight", {{"dtype", "int8"}, {"group_size", "big"}}}}}}),
              HasSubstr("global_quant_config.weight.group_size: expected an integer or null, got \"big\""));
  EXPECT_THAT(bad(OrderedJson{{"global_quant_config", {{"weight", {{"qscheme", "per_tensor"}}}}}}),
              HasSubstr("global_quant_config.weight.dtype: required"));
  EXPECT_THAT(bad(OrderedJson{{"layer_quant_config", {{"*down", {{"weight", {{"dtype", "int8"}, {"round_method", "up"}}}}}}}}),
              HasSubstr("layer_quant_config[*down].weight.round_method: unknown value \"up\""));
  EXPECT_THAT(bad(OrderedJson{{"algo_config", {{{"name", "gptq"}, {"desc_act", "yes"}}}}}),
              HasSubstr("algo_config[0].desc_act: expected true or false"));
  EXPECT_THAT(bad(OrderedJson{{"algo_config", {{{"name", "magic"}}}}}),
              HasSubstr("algo_config[0].name: unknown algorithm \"magic\""));
  EXPECT_THAT(bad(OrderedJson{{"exclude", {"lm_head", 3}}}), HasSubstr("quantization_config.exclude[1]: expected a string"));
  EXPECT_THAT(bad(OrderedJson{{"quant_method", "awq"}}), HasSubstr("quant_method: expected \"quark\""));
}

// Found by config_json_fuzz (tests/fuzz/corpus/config_json_fuzz/crash_block_size_1e93): numbers that do not fit
// their field were converted anyway (undefined behaviour for 1e93, a silent 128 for 2^32 + 128, inf for 1e300).
TEST(QuarkJsonTest, NumbersOutsideTheirFieldsRangeAreRefused) {
  auto bad = [](OrderedJson j) { return std::string(ConfigFromQuarkJson(j).status().message()); };
  EXPECT_THAT(bad(OrderedJson{{"algo_config", {{{"name", "gptq"}, {"block_size", 2.5e93}}}}}),
              HasSubstr("algo_config[0].block_size: expected an integer from -2147483648 to 2147483647"));
  EXPECT_THAT(bad(OrderedJson{{"algo_config", {{{"name", "awq"}, {"grid_size", 20.5}}}}}),
              HasSubstr("algo_config[0].grid_size: expected an integer"));
  EXPECT_THAT(bad(OrderedJson{{"global_quant_config", {{"weight", {{"dtype", "int4"}, {"group_size", 4294967424LL}}}}}}),
              HasSubstr("global_quant_config.weight.group_size: expected an integer from"));
  EXPECT_THAT(bad(OrderedJson{{"global_quant_config", {{"weight", {{"dtype", "int4"}, {"ch_axis", 18446744073709551615ULL}}}}}}),
              HasSubstr("global_quant_config.weight.ch_axis: expected an integer from"));
  EXPECT_THAT(bad(OrderedJson{{"algo_config", {{{"name", "smooth"}, {"alpha", 1e300}}}}}),
              HasSubstr("algo_config[0].alpha: 1e+300 is out of range"));
  // What fits still reads, an integral float included.
  auto fits = ConfigFromQuarkJson(OrderedJson{{"algo_config", {{{"name", "gptq"}, {"block_size", 64.0}}}}});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(std::get<GptqAlgo>(fits->algo_config[0]).block_size, 64);
}

TEST(QuarkJsonTest, OlderSingleAlgorithmObjectIsAccepted) {
  auto config = ConfigFromQuarkJson(
      OrderedJson{{"algo_config", {{"name", "awq"}, {"model_decoder_layers", "model.layers"}}}});
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->algo_config.size(), 1u);
  EXPECT_EQ(std::get<AwqAlgo>(config->algo_config[0]).model_decoder_layers, "model.layers");
}

}  // namespace
}  // namespace quark

// libFuzzer target for the quantization Config readers (core/config): Quark's quantization_config dict, the proto
// JSON of quark.v1.Config and an HF config.json holding one, all behind ConfigFromAnyJson. A Config that reads must
// validate without a crash, plan a small model, and come back unchanged through Quark's dict (and, when valid,
// through proto JSON).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config_json.h"
#include "core/config/layer_plan.h"
#include "core/config/quark_json.h"
#include "core/config/validation.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

const std::vector<quark::ModuleInfo>& Modules() {
  static const std::vector<quark::ModuleInfo> modules = {
      {"model.embed_tokens", "Embedding", {64, 16}},
      {"model.layers.0.self_attn.q_proj", "Linear", {16, 16}},
      {"model.layers.0.self_attn.k_proj", "Linear", {8, 16}},
      {"model.layers.0.self_attn.v_proj", "Linear", {8, 16}},
      {"model.layers.0.self_attn.o_proj", "Linear", {16, 16}},
      {"model.layers.0.mlp.gate_proj", "Linear", {48, 16}},
      {"model.layers.0.mlp.down_proj", "Linear", {16, 48}},
      {"lm_head", "Linear", {64, 16}},
  };
  return modules;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = quark::ConfigFromAnyJson(text);
  if (!config.ok()) return 0;

  const auto issues = quark::ValidateConfig(*config, &Modules());
  const bool valid = quark::ValidationStatus(issues).ok();
  (void)quark::BuildLayerPlan(*config, Modules());

  // Quark's dict form round-trips, valid or not (it writes every field).
  auto from_quark = quark::ConfigFromQuarkJson(quark::ConfigToQuarkJson(*config));
  Check(from_quark.ok() && *from_quark == *config);
  // So does the proto JSON form for a valid Config: proto3 spells "default" as 0, which only invalid values
  // (damp_percent 0, block_size 0) would need.
  if (!valid) return 0;
  auto proto_json = quark::ConfigToProtoJson(*config);
  Check(proto_json.ok());
  auto from_proto = quark::ConfigFromProtoJson(*proto_json);
  Check(from_proto.ok() && *from_proto == *config);
  return 0;
}

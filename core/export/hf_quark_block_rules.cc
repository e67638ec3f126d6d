#include "core/export/hf_quark_block_rules.h"

#include "core/base/strings.h"

namespace quark::exporter {
namespace {

using Json = nlohmann::ordered_json;

bool IsStr(const Json& j, const char* key, const char* value) {
  return j.is_object() && j.contains(key) && j[key].is_string() && j[key].get<std::string>() == value;
}

bool IsTrue(const Json& j, const char* key) { return j.is_object() && j.value(key, Json()) == true; }

// Dispatch step 0 (in get_quant_method, before everything else).
bool IsVllmMxfp8(const Json& w, const Json& in, const Json& block) {
  return IsStr(w, "dtype", "fp8_e4m3") && IsTrue(w, "symmetric") && !IsTrue(w, "is_dynamic") &&
         IsStr(w, "scale_type", "float8_e8m0fnu") && block.is_array() && block.size() == 2 && block[1] == 32 &&
         IsStr(in, "dtype", "fp8_e4m3") && IsTrue(in, "is_dynamic") && IsStr(in, "qscheme", "per_group") &&
         in.value("group_size", Json()) == block[1];
}

// Dispatch step 3a: _is_fp8_w8a8 with a [128, 128] symmetric weight and dynamic symmetric groups of 128.
bool IsVllmFp8PerBlock(const Json& w, const Json& in, const Json& block) {
  return IsStr(w, "dtype", "fp8_e4m3") && !IsTrue(w, "is_dynamic") && block == Json::array({128, 128}) &&
         IsTrue(w, "symmetric") && IsStr(in, "dtype", "fp8_e4m3") && IsStr(in, "qscheme", "per_group") &&
         IsTrue(in, "is_dynamic") && in.value("group_size", Json()) == 128 && IsTrue(in, "symmetric");
}

}  // namespace

std::optional<std::string> VllmPerBlockProblem(const Json& weight, const Json& input) {
  const Json w = weight.is_array() && weight.size() == 1 ? weight[0] : weight;  // vLLM unwraps one-element lists
  const Json in = input.is_array() && input.size() == 1 ? input[0] : input;
  const Json block = w.is_object() ? w.value("block_size", Json()) : Json();
  if (IsVllmMxfp8(w, in, block) || IsVllmFp8PerBlock(w, in, block)) return std::nullopt;
  if (block.is_null()) return std::string("weight.block_size: null on a per_block weight (vLLM raises ValueError)");
  if (IsStr(w, "scale_type", "float8_e8m0fnu")) {
    return StrCat("weight.block_size ", block.dump(), " with E8M0 tile scales loads in vLLM only as QuarkW8A8Mxfp8 ",
                  "(block_size [R, 32], weight fp8_e4m3 symmetric static; input_tensors fp8_e4m3 per_group with ",
                  "group_size 32, dynamic) or QuarkW8A8Fp8PerBlock (block_size [128, 128]; input_tensors fp8_e4m3 ",
                  "per_group 128 dynamic symmetric)");
  }
  return StrCat("a per_block weight loads in vLLM only as QuarkW8A8Fp8PerBlock (weight fp8_e4m3 block_size ",
                "[128, 128] symmetric static; input fp8_e4m3 per_group 128 dynamic symmetric)");
}

}  // namespace quark::exporter

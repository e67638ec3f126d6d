#include "core/export/hf_quark_block_rules.h"

#include "core/base/strings.h"
#include "core/config/json_read.h"

namespace quark::exporter {
namespace {

using OrderedJson = nlohmann::ordered_json;

bool IsTrue(const OrderedJson& j, const char* key) { return j.is_object() && j.value(key, OrderedJson()) == true; }

// Dispatch step 0 (in get_quant_method, before everything else).
bool IsVllmMxfp8(const OrderedJson& w, const OrderedJson& in, const OrderedJson& block) {
  return JsonStringIs(w, "dtype", "fp8_e4m3") && IsTrue(w, "symmetric") && !IsTrue(w, "is_dynamic") &&
         JsonStringIs(w, "scale_type", "float8_e8m0fnu") && block.is_array() && block.size() == 2 && block[1] == 32 &&
         JsonStringIs(in, "dtype", "fp8_e4m3") && IsTrue(in, "is_dynamic") &&
         JsonStringIs(in, "qscheme", "per_group") && in.value("group_size", OrderedJson()) == block[1];
}

// Dispatch step 3a: _is_fp8_w8a8 with a [128, 128] symmetric weight and dynamic symmetric groups of 128.
bool IsVllmFp8PerBlock(const OrderedJson& w, const OrderedJson& in, const OrderedJson& block) {
  return JsonStringIs(w, "dtype", "fp8_e4m3") && !IsTrue(w, "is_dynamic") && block == OrderedJson::array({128, 128}) &&
         IsTrue(w, "symmetric") && JsonStringIs(in, "dtype", "fp8_e4m3") && JsonStringIs(in, "qscheme", "per_group") &&
         IsTrue(in, "is_dynamic") && in.value("group_size", OrderedJson()) == 128 && IsTrue(in, "symmetric");
}

}  // namespace

std::optional<std::string> VllmPerBlockProblem(const OrderedJson& weight, const OrderedJson& input) {
  const OrderedJson w = weight.is_array() && weight.size() == 1 ? weight[0] : weight;  // vLLM unwraps one-element lists
  const OrderedJson in = input.is_array() && input.size() == 1 ? input[0] : input;
  const OrderedJson block = w.is_object() ? w.value("block_size", OrderedJson()) : OrderedJson();
  if (IsVllmMxfp8(w, in, block) || IsVllmFp8PerBlock(w, in, block)) return std::nullopt;
  if (block.is_null()) return std::string("weight.block_size: null on a per_block weight (vLLM raises ValueError)");
  if (JsonStringIs(w, "scale_type", "float8_e8m0fnu")) {
    return StrCat("weight.block_size ", block.dump(), " with E8M0 tile scales loads in vLLM only as QuarkW8A8Mxfp8 ",
                  "(block_size [R, 32], weight fp8_e4m3 symmetric static; input_tensors fp8_e4m3 per_group with ",
                  "group_size 32, dynamic) or QuarkW8A8Fp8PerBlock (block_size [128, 128]; input_tensors fp8_e4m3 ",
                  "per_group 128 dynamic symmetric)");
  }
  return StrCat("a per_block weight loads in vLLM only as QuarkW8A8Fp8PerBlock (weight fp8_e4m3 block_size ",
                "[128, 128] symmetric static; input fp8_e4m3 per_group 128 dynamic symmetric)");
}

}  // namespace quark::exporter

#include "core/checkpoint/token_pass_memory.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>

namespace quark::checkpoint {

std::string ExpertKind(const std::string& relative_name) {
  static const std::string kExperts = ".experts.";
  const size_t at = relative_name.find(kExperts);
  if (at == std::string::npos) return relative_name;
  size_t end = at + kExperts.size();
  while (end < relative_name.size() && std::isdigit(static_cast<unsigned char>(relative_name[end]))) ++end;
  return relative_name.substr(0, at + kExperts.size()) + "*" + relative_name.substr(end);
}

int64_t TokenPassElements(const std::vector<LinearSpec>& linears, const std::function<bool(const LinearSpec&)>& quantized,
                          const ModelConfig& config, const TokenPasses& passes) {
  if (!passes.float_stream && !passes.awq && !passes.autosmoothquant && !passes.autoround &&
      passes.gptq_expert_group <= 0) {
    return 0;
  }
  const int64_t hidden = config.hidden_size;
  const int64_t top_k = std::max<int64_t>(1, config.num_experts_per_tok);
  // Every distinct input the quantized linears read: linears that read one tensor record it once (q, k and v; gate
  // and up); a routed expert's linears by their kind of input (every expert's gate and up read its tokens).
  std::map<std::string, int64_t> per_input;
  int64_t widest = hidden;
  int64_t expert_input = 0;  // the routed experts' input width (their gate and up read it), when any is quantized
  for (const LinearSpec& linear : linears) {
    if (!quantized(linear)) continue;
    // An expert's gate and up read what the router sends the expert ("mlp.experts.3"), its down_proj their product.
    if (linear.routed && linear.relative_name.rfind(linear.input + ".", 0) == 0) {
      expert_input = std::max(expert_input, linear.in_features);
    }
    const int64_t share = linear.routed ? top_k : 1;
    int64_t& input = per_input[linear.routed ? ExpertKind(linear.input) : linear.input];
    input = std::max(input, linear.in_features * share);
    widest = std::max(widest, linear.in_features * share);
  }
  int64_t distinct = 0;
  for (const auto& [name, elements] : per_input) distinct += elements;
  int64_t search = 0;
  // AWQ keeps every distinct input, AutoSmoothQuant those its pairs read first: the same bound.
  if (passes.awq || passes.autosmoothquant) search = distinct + hidden + 2 * widest;
  if (passes.autoround) search = std::max(search, hidden);
  if (passes.gptq_expert_group > 0 && expert_input > 0) {
    search = std::max(search, hidden + std::min(passes.gptq_expert_group, top_k) * expert_input);
  }
  return (passes.float_stream ? 2 * hidden : 0) + search;
}

}  // namespace quark::checkpoint

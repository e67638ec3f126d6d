#include "core/estimate/capture_cost.h"

#include <vector>

#include "absl/strings/match.h"
#include "core/checkpoint/model_layout.h"

namespace quark::estimate {

double CaptureFlops(const checkpoint::ModelConfig& config, int64_t num_layers, const std::set<std::string>& quantized,
                    int64_t samples, int64_t seq_len, bool routed_recorded) {
  const double tokens = static_cast<double>(samples) * static_cast<double>(seq_len);
  const double attention = 4.0 * static_cast<double>(seq_len) * seq_len * config.hidden_size * samples;
  const double expert_share =
      config.num_experts > 0 ? static_cast<double>(config.num_experts_per_tok) / config.num_experts : 1.0;
  double flops = 0;
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const std::string prefix = checkpoint::LayerPrefix(config, layer);
    const std::vector<checkpoint::LinearSpec> specs = checkpoint::LayerLinears(config, layer);
    double routed_flops = 0, routed_input_readers = 0;  // every routed linear; those reading the experts' input
    for (const checkpoint::LinearSpec& spec : specs) {
      if (!spec.routed) continue;
      const double flops = 2.0 * spec.out_features * spec.in_features * tokens * expert_share;
      routed_flops += flops;
      if (!absl::EndsWith(spec.input, ".act_fn")) routed_input_readers += flops;
    }
    std::set<std::string> captured;
    double before = 0;  // the linears' FLOPs of a forward stopped at the current linear
    bool past_attention = false;
    for (const checkpoint::LinearSpec& spec : specs) {
      past_attention = past_attention || spec.input == "self_attn";
      const bool act_fn = absl::EndsWith(spec.input, ".act_fn");
      const std::string input = !spec.routed ? spec.input : act_fn ? "routed act_fn" : "routed";
      if (quantized.count(prefix + spec.relative_name) > 0 && captured.insert(input).second) {
        if (!spec.routed || !routed_recorded) {
          flops += before + (spec.routed ? routed_flops : 0) + (past_attention ? attention : 0);
        } else {
          // Recorded: the block's inputs from one forward stopped there; an act_fn input from each expert run alone
          // on its recorded calls (its own first projections).
          flops += act_fn ? routed_input_readers : before + (past_attention ? attention : 0);
        }
      }
      before += 2.0 * spec.out_features * spec.in_features * tokens * (spec.routed ? expert_share : 1.0);
    }
  }
  return flops;
}

}  // namespace quark::estimate

// Quantizes the linears of one decoder layer as the LayerPlan says: replacement by QuantLinear, calibration of the
// static activation observers on the layer's inputs (which the already-quantized previous layers produced),
// freezing, and the KV-cache scale shared by k_proj and v_proj. Used as the LayerStreamer's `before` hook.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/quantize/expert_coverage.h"
#include "core/quantize/quant_linear.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/transformer_model.h"

namespace quark::quantize {

/// The known parameters of one module: calibrated static activations, and weight parameters an algorithm fixed
/// (GPTQ; unset = computed from the weight, which is deterministic).
struct ModuleParams {
  std::optional<QuantParams> input;
  std::optional<QuantParams> output;
  std::optional<QuantParams> weight;
};

/// By full module name. Small (scales only): kept for the whole model so that a fake-quantized evaluation after
/// calibration re-applies them without recalibrating.
using CalibratedParams = std::map<std::string, ModuleParams>;

/// Per fused group of `layer` (q/k/v, gate/up, each MoE expert's gate/up: Nvfp4GlobalScaleKey; else the linear
/// itself): the largest weight amax of the linears `plan` quantizes to NVFP4, for their shared global scale. GPTQ
/// takes it on the float weights before it rounds any of them (gptq_pass.cc), RTN when it installs the layer.
std::map<std::string, float> SharedNvfp4Amax(const LayerPlan& plan, const runtime::DecoderLayer& layer);

class LayerQuantizer {
 public:
  LayerQuantizer(Config config, LayerPlan plan) : config_(std::move(config)), plan_(std::move(plan)) {}

  /// Replaces every linear of `layer` that the plan quantizes (not excluded, config not empty) with a QuantLinear,
  /// in forward order. With `known`, the static activations take those parameters. Linears the plan does not know
  /// are an INVALID_ARGUMENT naming them (the plan and the model disagree).
  absl::StatusOr<std::vector<std::shared_ptr<QuantLinear>>> Install(runtime::DecoderLayer& layer,
                                                                   const CalibratedParams* known = nullptr) const;

  /// Install (with `known`'s weight parameters, e.g. GPTQ's), then (when any static activation needs it) run
  /// `inputs` ([1, T, hidden] each) through the layer in calibration mode, freeze every quantizer and share the
  /// KV-cache scales. After it the layer is fake-quantized. An MoE layer's experts are covered as expert_coverage.h
  /// says (min_expert_tokens); `coverage` (may be null) receives the per-expert counts of that forward, and an expert
  /// with a static activation that still saw no token is a FAILED_PRECONDITION naming it.
  absl::StatusOr<std::vector<std::shared_ptr<QuantLinear>>> Calibrate(
      runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs, runtime::TransformerModel& model,
      const CalibratedParams* known = nullptr, std::vector<runtime::ExpertCoverage>* coverage = nullptr) const;

  /// Install with the parameters of an earlier calibration and freeze: the same fake-quantized layer again.
  absl::StatusOr<std::vector<std::shared_ptr<QuantLinear>>> Apply(runtime::DecoderLayer& layer,
                                                                 const CalibratedParams& params) const;

  const Config& config() const { return config_; }
  const LayerPlan& plan() const { return plan_; }
  /// MoE calibration coverage: tokens each expert sees at least (0 = no top-up).
  void set_min_expert_tokens(int64_t n) { min_expert_tokens_ = n; }

 private:
  Config config_;
  LayerPlan plan_;
  int64_t min_expert_tokens_ = kDefaultMinExpertTokens;
};

/// Sets the output scale of every KV-cache module among `linears` (k_proj / v_proj outputs with a
/// kv_cache_quant_config spec) to max(scales) of the layer, and no less than `min_kv_scale`, as Quark exports it.
absl::Status ShareKvCacheScales(const std::vector<std::shared_ptr<QuantLinear>>& linears, const Config& config);

/// The frozen static activation parameters of `linears`, by module name.
CalibratedParams SnapshotParams(const std::vector<std::shared_ptr<QuantLinear>>& linears);

}  // namespace quark::quantize

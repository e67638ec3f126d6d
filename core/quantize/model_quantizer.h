// Quantizes a LibTorch-built model in place, as Quark's ModelQuantizer does a PyTorch model: every Linear, Embedding,
// EmbeddingBag, Conv2d and ConvTranspose2d of the module tree gets its config (layer_quant_config pattern, then
// layer_type_quant_config, then global_quant_config; exclude wins; embeddings without a pattern or type entry stay
// float) and is replaced by its quantized module (QuantLinear, QuantEmbedding, QuantEmbeddingBag, QuantConv2d,
// QuantConvTranspose2d) so that the caller's existing handle to the root runs the quantized modules on its next
// forward (child_replacement.h says how, and which parents qualify). Then:
//   Calibrate: runs calibration batches through the model while static activation observers see them (skipped when
//     every activation is dynamic, a cast, or absent: weight-only and dynamic configs need no data);
//   Freeze: fixes every scale and fake-quantizes the weights; ExportWeight gives their real codes and scales.
// Modules are matched by exact type (as Quark's LAYER_TO_QUANT_LAYER_MAP): a subclass with its own forward stays.
// The quantized modules hold the float weights detached (sharing their storage: edit neither in place) and are not
// registered parameters or buffers: CPU inference only; Module::to() and torch::save do not see them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "absl/status/statusor.h"
#include "core/config/layer_plan.h"
#include "core/config/quant_spec.h"
#include "core/numerics/real_quant.h"
#include "core/quantize/module_quantizers.h"

namespace quark::quantize {

/// One module the quantizer replaced.
struct QuantizedModule {
  std::string name;    // path in named_modules(), e.g. "features.0"
  std::string type;    // "Linear", "Embedding", "EmbeddingBag", "Conv2d", "ConvTranspose2d"
  std::string source;  // LayerAssignment::SourceLabel(), e.g. "layer_type_quant_config[Conv2d]"
  std::shared_ptr<torch::nn::Module> module;  // the quantized module, now in the model
  ModuleQuantizers* quantizers = nullptr;     // owned by `module`
};

/// One line of the report: every recognized module, quantized or not.
struct ModuleReport {
  std::string name;
  std::string type;
  std::string source;  // SourceLabel(): "exclude[...]" / "unquantized" for modules left in float
  bool quantized = false;
  std::vector<std::string> ignored_fields;  // config fields the module does not apply (an embedding's input_tensors)
  /// "features.0 Conv2d layer_type_quant_config[Conv2d]" (+ " (ignored: input_tensors)").
  std::string ToString() const;
};

class ModelQuantizer {
 public:
  /// Resolves, validates and replaces in place. Nothing is replaced unless every module can be:
  /// INVALID_ARGUMENT for an invalid config, or a spec that does not fit a module's weight (naming the module, the
  /// field and the config source, e.g. a group size that does not divide the grouped axis);
  /// FAILED_PRECONDITION naming the module path and the parent's type when the parent cannot take a replacement,
  /// when the module to quantize is the root itself, or is one object registered under two names.
  static absl::StatusOr<std::unique_ptr<ModelQuantizer>> Quantize(const std::shared_ptr<torch::nn::Module>& root,
                                                                   const Config& config);

  /// Runs forward(batch) for every batch (in calibration mode, without autograd) when a static activation needs
  /// calibration; a no-op otherwise. Exceptions thrown by forward come back as INTERNAL naming the batch.
  /// FAILED_PRECONDITION after Freeze, or with no batch while a static activation needs some.
  template <typename Batch, typename Forward>
  absl::Status Calibrate(const std::vector<Batch>& batches, Forward&& forward) {
    return CalibrateBatches(batches.size(), [&](size_t i) { forward(batches[i]); });
  }
  absl::Status CalibrateBatches(size_t count, const std::function<void(size_t)>& run_batch);

  /// Freezes every quantized module (see ModuleQuantizers::Freeze); FAILED_PRECONDITION naming the module and field
  /// for a static activation that saw no batch.
  absl::Status Freeze();
  bool frozen() const { return frozen_; }
  /// True while any static activation waits for calibration.
  bool NeedsCalibration() const;

  /// The real-quantized weight of module `name` (see ModuleQuantizers::ExportWeight); NOT_FOUND for a module that
  /// was not quantized.
  absl::StatusOr<RealQuantized> ExportWeight(const std::string& name) const;

  const LayerPlan& plan() const { return plan_; }
  const std::vector<QuantizedModule>& modules() const { return modules_; }
  /// nullptr when `name` was not quantized.
  const QuantizedModule* Find(const std::string& name) const;
  /// Every recognized module in named_modules() order.
  std::vector<ModuleReport> Report() const;

 private:
  ModelQuantizer() = default;

  LayerPlan plan_;
  std::vector<QuantizedModule> modules_;
  bool frozen_ = false;
};

}  // namespace quark::quantize

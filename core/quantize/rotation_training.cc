#include "core/quantize/rotation_training.h"

#include <optional>
#include <utility>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"

namespace quark::quantize {
namespace {

constexpr const char* kTrainedLinears[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                           "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                           "mlp.down_proj"};

std::string SpecLabel(const std::optional<QuantSpec>& spec) { return spec ? std::string(Name(spec->dtype)) : "none"; }

}  // namespace

absl::StatusOr<algorithms::RotationTrainingScheme> RotationTrainingSchemeFor(const LayerPlan& plan,
                                                                             const checkpoint::ModelConfig& model,
                                                                             const std::string& path) {
  std::optional<algorithms::RotationTrainingScheme> scheme;
  std::string first;
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    for (const char* linear : kTrainedLinears) {
      const std::string module = checkpoint::LayerPrefix(model, i) + linear;
      const LayerAssignment* a = plan.Find(module);
      if (a == nullptr) return absl::InvalidArgumentError(StrCat(path, ": the model has no module ", module));
      const algorithms::RotationTrainingScheme here{a->config.weight, a->config.input_tensors};
      if (!scheme) {
        scheme = here;
        first = module;
        continue;
      }
      if (here.weight != scheme->weight || here.input != scheme->input) {
        return absl::UnimplementedError(StrCat(
            path, ".trainable: the rotation trainer simulates one scheme for every decoder linear, but ", first,
            " (weight ", SpecLabel(scheme->weight), ", input ", SpecLabel(scheme->input), ") and ", module, " (",
            a->SourceLabel(), ": weight ", SpecLabel(here.weight), ", input ", SpecLabel(here.input), ") differ"));
      }
    }
  }
  if (!scheme || !scheme->weight) {
    return absl::InvalidArgumentError(StrCat(path, ".trainable: no decoder linear has a quantized weight to train "
                                                   "the rotation for"));
  }
  return *scheme;
}

absl::StatusOr<algorithms::RotationOptions> TrainEntryRotation(
    const RotationTraining& training, const std::vector<at::Tensor>& samples,
    const std::function<void(const algorithms::RotationTrainingStep&)>& progress, algorithms::LearnedRotation* result) {
  if (samples.empty()) {
    return absl::InvalidArgumentError(StrCat(training.path, ".trainable: no calibration windows to train on"));
  }
  const algorithms::LearnedRotationOptions options = algorithms::LearnedRotationOptionsFor(training.entry);
  // Load checks the layout and the memory bound from the shapes before it reads a weight.
  QUARK_ASSIGN_OR_RETURN(auto trainer, algorithms::RotationTrainingModel::Load(*training.weights, training.model,
                                                                               training.init, samples.front().size(-1),
                                                                               options, training.path));
  QUARK_ASSIGN_OR_RETURN(algorithms::LearnedRotation learned,
                         algorithms::TrainRotation(*trainer, training.init, samples, training.scheme, options,
                                                   training.path, progress));
  algorithms::RotationOptions fold = training.init;
  fold.r1 = learned.r1;
  fold.r2_per_layer = learned.r2;  // one per layer when the entry applies R2 (then trained); else empty, no R2
  if (result) *result = std::move(learned);
  return fold;
}

}  // namespace quark::quantize

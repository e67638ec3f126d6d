#include "core/quantize/layer_memory_profile.h"

#include <optional>
#include <utility>

#include "core/checkpoint/dtype.h"
#include "core/config/layer_plan.h"
#include "core/estimate/model_shape.h"
#include "core/quantize/pass_memory.h"
#include "core/runtime/compute_device.h"

namespace quark::quantize {

void LayerMemoryProfile::Attach(QuantizeModelOptions& options) {
  auto previous = std::move(options.on_progress);
  options.on_progress = [this, previous = std::move(previous)](const QuantizeProgress& progress) {
    const bool in_layers = progress.phase == "quantize";
    if (!in_layers || progress.layer - 1 != current_) CloseLayer();  // the next layer, or the run's finish
    if (in_layers && progress.layer - 1 != current_) {
      current_ = progress.layer - 1;
      start_ = meter_.live_bytes();
      meter_.ResetPeak();
      device_start_ = meter_.device();
    }
    if (previous) previous(progress);
  };
}

void LayerMemoryProfile::CloseLayer() {
  if (current_ >= 0) {
    layers_.push_back(LayerMemory{current_, start_, meter_.peak_bytes() - start_, device_start_, meter_.device()});
  }
  current_ = -1;
}

std::vector<LayerMemory> LayerMemoryProfile::Finish() {
  CloseLayer();
  return std::move(layers_);
}

absl::StatusOr<runtime::LayerDeviceMemory> BudgetFormulaFor(const std::string& model_dir,
                                                            const QuantizeModelOptions& options, int64_t index,
                                                            int64_t samples, int64_t seq) {
  auto shape = estimate::ReadModelShape(model_dir);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<at::ScalarType> compute_dtype = runtime::ResolveComputeDtype(options.compute_dtype, "compute_dtype");
  if (!compute_dtype.ok()) return compute_dtype.status();
  const at::ScalarType dtype = *compute_dtype;
  const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
  int64_t weights = 0;
  for (const estimate::TensorShape& t : shape->tensors) {
    if (t.layer == index) weights += static_cast<int64_t>(t.bytes) / checkpoint::StDTypeSize(t.dtype) * element;
  }
  const std::vector<at::Tensor> hidden(samples, at::empty({1, seq, shape->config.hidden_size},
                                                          at::device(at::kMeta).dtype(dtype)));
  runtime::StreamerOptions streamed;
  streamed.compute_dtype = dtype;
  auto streamer = runtime::LayerStreamer::Open(model_dir, streamed);
  if (!streamer.ok()) return streamer.status();
  auto layer = (*streamer)->model().LoadLayer(index);
  if (!layer.ok()) return layer.status();
  std::optional<at::Device> device;
  try {
    device = at::Device(options.device);
  } catch (const std::exception& error) {
    return absl::InvalidArgumentError("device: \"" + options.device + "\" is not a device: " + error.what());
  }
  absl::StatusOr<int64_t> search_batch = SearchBatchBytes(options.search_batch_bytes, *device);
  if (!search_batch.ok()) return search_batch.status();
  const PassMemoryOptions passes =
      PassMemoryOptionsFor(options.config, dtype, *device, options.expert_group_size, *search_batch);
  const LayerPlan plan = BuildLayerPlan(options.config, shape->modules);
  runtime::LayerDeviceMemory memory = runtime::LayerDeviceMemoryOf(shape->config, weights, hidden, passes.autoround);
  memory.passes = PassDeviceMemory(**layer, plan, passes, memory.tokens);
  memory.bytes_per_token = PassDeviceBytesPerToken(shape->config, **layer, plan, passes);
  return memory;
}

}  // namespace quark::quantize

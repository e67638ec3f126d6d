// The tensor memory each decoder layer of a QuantizeModel run holds, measured by a runtime::AllocationMeter: what
// the budget formula (quantize/pass_memory.h) is checked against on a machine without a GPU (#27).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/allocation_meter.h"
#include "core/runtime/layer_streamer.h"

namespace quark::quantize {

struct LayerMemory {
  int64_t layer = 0;
  int64_t live_at_start = 0;  // bytes alive when the layer's first pass starts (head, embeddings, inputs, ...)
  int64_t peak_above_start = 0;  // the most bytes alive above that until the next layer starts
  /// On a device whose allocator reports (runtime::DeviceAllocatorBytes): its allocated and reserved bytes when
  /// the layer started and at their peaks during it.
  runtime::DeviceAllocatorBytes device_at_start;
  runtime::DeviceAllocatorBytes device_peak;
};

/// The device budget's terms for decoder layer `index` of the model at `model_dir` as a QuantizeModel run with
/// `options` checks them (runtime::StreamerOptions::device_memory_budget and PassDeviceMemory), for `samples` hidden
/// states of `seq` tokens: what the layer should hold at most. Its weights are counted from the checkpoint's shapes
/// in the compute dtype (as the streamer places them).
absl::StatusOr<runtime::LayerDeviceMemory> BudgetFormulaFor(const std::string& model_dir,
                                                            const QuantizeModelOptions& options, int64_t index,
                                                            int64_t samples, int64_t seq);

/// Attach() chains into the options' on_progress: each layer's span runs from its first "quantize" progress event to
/// the next layer's (the last one to Finish()).
class LayerMemoryProfile {
 public:
  explicit LayerMemoryProfile(runtime::AllocationMeter& meter) : meter_(meter) {}
  void Attach(QuantizeModelOptions& options);
  /// Closes the last layer's span; the layers in run order.
  std::vector<LayerMemory> Finish();

 private:
  void CloseLayer();

  runtime::AllocationMeter& meter_;
  std::vector<LayerMemory> layers_;
  int64_t current_ = -1;
  int64_t start_ = 0;
  runtime::DeviceAllocatorBytes device_start_;
};

}  // namespace quark::quantize

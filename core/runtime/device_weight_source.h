// A WeightSource whose tensors live on a compute device: the layer streamer builds every layer from it, so a layer's
// weights are placed as the layer is built (staged through pinned host memory and copied asynchronously on a GPU;
// the identity on the CPU) and no module has to be moved afterwards. It also counts the bytes it placed, which is
// what the streamer checks against the device's memory budget.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/runtime/compute_device.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

class DeviceWeightSource : public WeightSource {
 public:
  DeviceWeightSource(std::shared_ptr<const WeightSource> host, ComputeDevice device)
      : host_(std::move(host)), device_(std::move(device)) {}

  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  /// Whole tables (embeddings, lm_head) are placed too: on a GPU they stay there for the run.
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  absl::StatusOr<at::Tensor> GetStoredOnHost(const std::string& name) const override { return host_->GetStored(name); }
  bool Has(const std::string& name) const override { return host_->Has(name); }
  void Prefetch(const std::string& prefix) const override { host_->Prefetch(prefix); }
  std::string Location() const override { return host_->Location(); }

  const ComputeDevice& device() const { return device_; }
  /// The source this one places from (host memory).
  const std::shared_ptr<const WeightSource>& host() const { return host_; }
  /// Bytes of the tensors placed so far (counted on every device, the CPU included).
  int64_t placed_bytes() const { return placed_bytes_.load(); }

 private:
  at::Tensor Placed(const at::Tensor& host) const;

  std::shared_ptr<const WeightSource> host_;
  ComputeDevice device_;
  mutable std::atomic<int64_t> placed_bytes_{0};
};

}  // namespace quark::runtime

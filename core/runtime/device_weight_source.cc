#include "core/runtime/device_weight_source.h"

namespace quark::runtime {

at::Tensor DeviceWeightSource::Placed(const at::Tensor& host) const {
  placed_bytes_ += static_cast<int64_t>(host.nbytes());
  return device_.Place(device_.Stage(host));
}

absl::StatusOr<at::Tensor> DeviceWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  absl::StatusOr<at::Tensor> host = host_->Get(name, dtype);
  if (!host.ok()) return host.status();
  return Placed(*host);
}

absl::StatusOr<at::Tensor> DeviceWeightSource::GetStored(const std::string& name) const {
  absl::StatusOr<at::Tensor> host = host_->GetStored(name);
  if (!host.ok()) return host.status();
  return Placed(*host);
}

}  // namespace quark::runtime

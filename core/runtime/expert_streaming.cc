#include "core/runtime/expert_streaming.h"

#include <algorithm>
#include <stdexcept>

#include "core/base/strings.h"
#include "core/runtime/device_weight_source.h"
#include "core/runtime/module_loader.h"

namespace quark::runtime {

void ExpertResidency::Register(const std::string& expert, const std::shared_ptr<StreamableLinear>& linear) {
  linears_[expert].push_back(linear);
  if (std::find(resident_.begin(), resident_.end(), expert) == resident_.end()) linear->ReleaseWeights();
}

void ExpertResidency::DropExpired() {
  // The experts of a released layer: their linears are gone, and so is their memory.
  for (auto it = linears_.begin(); it != linears_.end();) {
    auto& list = it->second;
    list.erase(std::remove_if(list.begin(), list.end(), [](const auto& w) { return w.expired(); }), list.end());
    if (!list.empty()) {
      ++it;
      continue;
    }
    resident_.erase(std::remove(resident_.begin(), resident_.end(), it->first), resident_.end());
    it = linears_.erase(it);
  }
}

void ExpertResidency::Acquire(const std::string& expert) {
  auto found = std::find(resident_.begin(), resident_.end(), expert);
  if (found != resident_.end()) {
    std::rotate(found, found + 1, resident_.end());  // now the most recently used
    return;
  }
  DropExpired();
  if (static_cast<int64_t>(resident_.size()) >= group_size_ && !resident_.empty()) Evict(resident_.back());
  // Resident before its linears load: a quantized linear materializing reads its float linear, which acquires again.
  resident_.push_back(expert);
  peak_resident_ = std::max(peak_resident_, resident());
  ++loads_;
  try {
    for (const auto& weak : linears_[expert]) {
      if (auto linear = weak.lock()) linear->MaterializeWeights();
    }
  } catch (...) {
    Evict(expert);
    throw;
  }
}

void ExpertResidency::Evict(std::string expert) {  // a copy: callers pass resident_'s own elements
  resident_.erase(std::remove(resident_.begin(), resident_.end(), expert), resident_.end());
  auto it = linears_.find(expert);
  if (it == linears_.end()) return;
  for (const auto& weak : it->second) {
    if (auto linear = weak.lock()) linear->ReleaseWeights();
  }
}

std::shared_ptr<const ExpertStreamingWeights> ExpertStreamingOf(const WeightSource& weights) {
  // The layers load through the streamer's DeviceWeightSource, whose host source is shared: a StreamedLinear keeps
  // that source alive for as long as it (or a quantized linear built on it) may load.
  const auto* placed = dynamic_cast<const DeviceWeightSource*>(&weights);
  if (placed == nullptr || placed->host() == nullptr) return nullptr;
  return std::dynamic_pointer_cast<const ExpertStreamingWeights>(placed->host());
}

absl::StatusOr<std::shared_ptr<StreamedLinear>> StreamedLinear::Create(std::shared_ptr<const ExpertStreamingWeights> source,
                                                                       const std::string& prefix,
                                                                       const checkpoint::LinearSpec& spec,
                                                                       at::ScalarType dtype) {
  const std::string name = prefix + spec.relative_name;
  // The shapes as stored (a view of the mmap where the source allows: no float copy of the expert is made here).
  const auto check = [&](const std::string& tensor, std::vector<int64_t> shape) -> absl::Status {
    auto stored = source->GetStored(tensor);
    if (!stored.ok()) return stored.status();
    if (stored->sizes() != at::IntArrayRef(shape)) {
      return absl::InvalidArgumentError(StrCat("tensor \"", tensor, "\" has shape [", StrJoin(stored->sizes(), ", "),
                                               "] but config.json implies [", StrJoin(shape, ", "), "]"));
    }
    return absl::OkStatus();
  };
  if (auto s = check(name + ".weight", {spec.out_features, spec.in_features}); !s.ok()) return s;
  if (spec.has_bias) {
    if (auto s = check(name + ".bias", {spec.out_features}); !s.ok()) return s;
  }
  const std::string expert = name.substr(0, name.rfind('.'));
  std::shared_ptr<StreamedLinear> linear(new StreamedLinear(std::move(source), name, expert, spec, dtype));
  linear->residency()->Register(expert, linear);
  return linear;
}

void StreamedLinear::MaterializeWeights() {
  if (loaded_) return;
  const auto load = [&](const std::string& tensor, std::vector<int64_t> shape) {
    auto t = LoadChecked(*source_, tensor, shape, dtype_);
    if (!t.ok()) throw std::runtime_error(std::string(t.status().message()));
    return source_->device().Place(*t);
  };
  at::Tensor weight = load(name_ + ".weight", {spec_.out_features, spec_.in_features});
  at::Tensor bias = spec_.has_bias ? load(name_ + ".bias", {spec_.out_features}) : at::Tensor();
  loaded_ = std::make_shared<FloatLinear>(std::move(weight), std::move(bias));
}

FloatLinear& StreamedLinear::Loaded() const {
  residency()->Acquire(expert_);
  if (!loaded_) throw std::runtime_error(StrCat(name_, ": the expert was acquired but its weight did not load"));
  return *loaded_;
}

absl::Status StreamedLinear::ReplaceWeight(const at::Tensor& weight) {
  const std::string tensor = name_ + ".weight";
  if (!source_->IsReplaced(tensor)) {
    return absl::FailedPreconditionError(StrCat(tensor, ": a streamed expert's new weight must be kept where the "
                                                "streamer reads it (the source's replaced weights), or its next load "
                                                "would read the checkpoint's"));
  }
  if (weight.sizes() != at::IntArrayRef({spec_.out_features, spec_.in_features})) {
    return absl::InvalidArgumentError(StrCat(tensor, ": the new weight has shape [", StrJoin(weight.sizes(), ", "),
                                             "], not [", spec_.out_features, ", ", spec_.in_features, "]"));
  }
  if (loaded_) loaded_->set_weight(source_->device().Place(weight.to(dtype_)));
  return absl::OkStatus();
}

at::Tensor StreamedLinear::forward(const at::Tensor& input) { return Loaded().forward(input); }

at::Tensor StreamedLinear::weight() const { return Loaded().weight(); }

at::Tensor StreamedLinear::bias() const { return Loaded().bias(); }

}  // namespace quark::runtime

// Routed experts streamed in groups (#32 item 5): an MoE layer's routed-expert linears keep their weights in the
// checkpoint and load them on demand, at most `group_size` experts at a time, so that a layer of 256 experts costs
// its attention, router and shared expert plus G experts instead of all of them.
//
// The seam is the WeightSource the model streams from: wrap it in ExpertStreamingWeights and LoadLinear (every
// family's layer loader) returns a StreamedLinear for each linear its layout marks routed (LinearSpec::routed: the
// linears of "...experts.<E>"; attention, routers, shared experts and dense MLPs load as today).
// Every pass that reads a linear (the forward of MoeBlock and its coverage top-up, the RTN quantizer's Install and
// Freeze, the export's per-linear write, the quantized forward) asks for its weights through the linear, which
// acquires its expert in the layer's ExpertResidency: an expert not resident is loaded (its float linear, then the
// quantized linear built on it recomputes its fake-quantized weight from the frozen parameters), and when G experts
// already are, the most recently used other one is released first. MoeBlock walks its experts in index order for
// every sample, so keeping the first G-1 and rotating the last slot (most-recently-used eviction) reuses G-1 loads
// per pass, where least-recently-used would reuse none.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/checkpoint/model_layout.h"
#include "core/runtime/compute_device.h"
#include "core/runtime/linear.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime {

/// A linear whose weights an ExpertResidency loads and drops. Both calls are idempotent; Materialize throws
/// std::runtime_error naming the tensor on a read error (it runs inside forwards, which cannot return a Status).
class StreamableLinear {
 public:
  virtual ~StreamableLinear() = default;
  virtual void MaterializeWeights() = 0;
  virtual void ReleaseWeights() = 0;
};

/// The routed experts whose weights are in memory, at most group_size() of them. Not thread-safe (a layer computes
/// on one thread).
class ExpertResidency {
 public:
  explicit ExpertResidency(int64_t group_size) : group_size_(group_size) {}
  /// `linear` belongs to `expert`; it is released at once unless the expert is resident.
  void Register(const std::string& expert, const std::shared_ptr<StreamableLinear>& linear);
  /// Makes `expert` resident: every live linear registered to it materializes (in registration order), after the most
  /// recently used other expert was released when group_size() already are.
  void Acquire(const std::string& expert);
  void Evict(std::string expert);

  int64_t group_size() const { return group_size_; }
  int64_t resident() const { return static_cast<int64_t>(resident_.size()); }
  /// The most experts resident at once so far, and how many times an expert was loaded.
  int64_t peak_resident() const { return peak_resident_; }
  int64_t loads() const { return loads_; }

 private:
  void DropExpired();
  int64_t group_size_;
  std::map<std::string, std::vector<std::weak_ptr<StreamableLinear>>> linears_;
  std::vector<std::string> resident_;  // least recently used first
  int64_t peak_resident_ = 0;
  int64_t loads_ = 0;
};

/// `base` (what the model streams from) whose routed-expert linears LoadLinear defers to StreamedLinear, placed on
/// `device` when they load. group_size >= 1.
///
/// `replaced`, when given, holds the weights an algorithm gave streamed experts (GPTQ's, kept on disk by the caller:
/// quantize/expert_weight_spill.h): its tensors are read in place of `base`'s, so an expert loaded again after its
/// eviction comes back as the algorithm left it.
class ExpertStreamingWeights : public WeightSource {
 public:
  ExpertStreamingWeights(std::shared_ptr<const WeightSource> base, int64_t group_size, ComputeDevice device = {},
                         std::shared_ptr<const WeightSource> replaced = nullptr)
      : base_(std::move(base)), replaced_(std::move(replaced)),
        residency_(std::make_shared<ExpertResidency>(group_size)), device_(std::move(device)) {}
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override {
    return SourceOf(name).Get(name, dtype);
  }
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override { return SourceOf(name).GetStored(name); }
  absl::StatusOr<at::Tensor> GetStoredOnHost(const std::string& name) const override {
    return SourceOf(name).GetStoredOnHost(name);
  }
  bool Has(const std::string& name) const override { return base_->Has(name); }
  void Prefetch(const std::string& prefix) const override { base_->Prefetch(prefix); }
  std::string Location() const override { return base_->Location(); }

  const std::shared_ptr<ExpertResidency>& residency() const { return residency_; }
  const ComputeDevice& device() const { return device_; }
  /// Whether `name` is read from the replaced weights rather than the base.
  bool IsReplaced(const std::string& name) const { return replaced_ != nullptr && replaced_->Has(name); }

 private:
  const WeightSource& SourceOf(const std::string& name) const { return IsReplaced(name) ? *replaced_ : *base_; }
  std::shared_ptr<const WeightSource> base_;
  std::shared_ptr<const WeightSource> replaced_;
  std::shared_ptr<ExpertResidency> residency_;
  ComputeDevice device_;
};

/// The ExpertStreamingWeights behind `weights` (itself, or the host source of the streamer's DeviceWeightSource),
/// else null.
std::shared_ptr<const ExpertStreamingWeights> ExpertStreamingOf(const WeightSource& weights);

/// A routed expert's float linear whose weight and bias are read from the source when its expert is acquired.
class StreamedLinear : public LinearLike, public StreamableLinear {
 public:
  /// Checks the stored shapes (no float copy is made) and registers the linear with the source's residency.
  static absl::StatusOr<std::shared_ptr<StreamedLinear>> Create(std::shared_ptr<const ExpertStreamingWeights> source,
                                                                const std::string& prefix,
                                                                const checkpoint::LinearSpec& spec, at::ScalarType dtype);
  at::Tensor forward(const at::Tensor& input) override;
  int64_t in_features() const override { return spec_.in_features; }
  int64_t out_features() const override { return spec_.out_features; }
  /// The weight as the checkpoint has it (acquires the expert; the tensor stays valid while the caller holds it).
  at::Tensor weight() const override;
  at::Tensor bias() const override;
  void MaterializeWeights() override;
  void ReleaseWeights() override { loaded_.reset(); }
  /// The dtype its weight loads in (known without loading it).
  at::ScalarType dtype() const { return dtype_; }
  /// An algorithm's new weight (GPTQ's) for this linear, which the caller has already put into the source's replaced
  /// weights (so that a later load reads it): the resident copy, if any, takes it too. FAILED_PRECONDITION, naming the
  /// tensor, when the source does not read it from its replaced weights.
  absl::Status ReplaceWeight(const at::Tensor& weight);

  const std::string& name() const { return name_; }
  const std::string& expert() const { return expert_; }
  const std::shared_ptr<ExpertResidency>& residency() const { return source_->residency(); }

 private:
  StreamedLinear(std::shared_ptr<const ExpertStreamingWeights> source, std::string name, std::string expert,
                 checkpoint::LinearSpec spec, at::ScalarType dtype)
      : source_(std::move(source)), name_(std::move(name)), expert_(std::move(expert)), spec_(std::move(spec)),
        dtype_(dtype) {}
  FloatLinear& Loaded() const;  // acquires the expert
  std::shared_ptr<const ExpertStreamingWeights> source_;
  std::string name_, expert_;
  checkpoint::LinearSpec spec_;
  at::ScalarType dtype_;
  std::shared_ptr<FloatLinear> loaded_;  // null while the expert is not resident
};

}  // namespace quark::runtime

// Where a model's float weights come from. The runtime asks a WeightSource for every tensor it builds a
// module from, by HF name; a later issue adds a source that dequantizes HF-quark packed weights on load.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/checkpoint/checkpoint_reader.h"

namespace quark::runtime {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  /// The tensor called `name` (full HF name, "model.layers.0.mlp.up_proj.weight") as a float tensor of `dtype`
  /// on CPU. NotFound naming the tensor when absent; InvalidArgument when it cannot become a float tensor.
  virtual absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const = 0;
  /// The tensor in the float dtype it is stored in (zero copy where the source allows): for big tables
  /// (embeddings, lm_head) that are used a slice at a time. Default: Get(name, float32).
  virtual absl::StatusOr<at::Tensor> GetStored(const std::string& name) const { return Get(name, at::kFloat); }
  /// GetStored, in host memory whatever device the source places tensors on: for tables read a few rows at a time
  /// (token embeddings), which a device need not hold.
  virtual absl::StatusOr<at::Tensor> GetStoredOnHost(const std::string& name) const { return GetStored(name); }
  virtual bool Has(const std::string& name) const = 0;
  /// Hints that the tensors with this name prefix are needed soon (read-ahead); may do nothing.
  virtual void Prefetch(const std::string& /*prefix*/) const {}
  /// Where the weights come from, for messages.
  virtual std::string Location() const = 0;
};

/// Float weights of a safetensors checkpoint (F32/F16/BF16), zero copy when the stored dtype is the one asked
/// for. Accepts HF names with or without the "model." prefix that older OPT checkpoints drop.
class CheckpointWeightSource : public WeightSource {
 public:
  explicit CheckpointWeightSource(std::shared_ptr<const checkpoint::CheckpointReader> reader) : reader_(std::move(reader)) {}
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override;
  void Prefetch(const std::string& prefix) const override;
  std::string Location() const override { return reader_->location(); }
  const checkpoint::CheckpointReader& reader() const { return *reader_; }

 private:
  std::shared_ptr<const checkpoint::CheckpointReader> reader_;
};

/// Weights held in memory by name (benchmarks, tests, and weights an algorithm produced). Not thread-safe
/// for concurrent Set.
class TensorMapWeightSource : public WeightSource {
 public:
  void Set(const std::string& name, at::Tensor tensor) { tensors_[name] = std::move(tensor); }
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override;
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override;
  bool Has(const std::string& name) const override { return tensors_.count(name) > 0; }
  std::string Location() const override { return "memory"; }

 private:
  std::map<std::string, at::Tensor> tensors_;
};

}  // namespace quark::runtime

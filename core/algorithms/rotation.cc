#include "core/algorithms/rotation.h"

#include <cmath>

#include "core/algorithms/hadamard.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"

namespace quark::algorithms {
namespace {

// x [..., k * n] times R [n, n] per block of n on the last axis (Quark's rotate_with_size), in float64.
at::Tensor RotateLastAxis(const at::Tensor& x, const at::Tensor& r) {
  const int64_t n = r.size(0);
  const at::Tensor x64 = x.to(at::kDouble);
  if (x.size(-1) == n) return at::matmul(x64, r);
  std::vector<int64_t> blocks = x.sizes().vec();
  blocks.back() = x.size(-1) / n;
  blocks.push_back(n);
  return at::matmul(x64.reshape(blocks), r).reshape(x.sizes());
}

// A linear's input channels rotated: W R (per block).
at::Tensor RotateIn(const at::Tensor& w, const at::Tensor& r) { return RotateLastAxis(w, r); }
// A linear's output channels rotated: (W^T R)^T (per block): its output y becomes y R.
at::Tensor RotateOut(const at::Tensor& w, const at::Tensor& r) { return RotateLastAxis(w.t(), r).t().contiguous(); }

}  // namespace

absl::StatusOr<at::Tensor> RotationFor(int64_t n, const RotationOptions& options, const std::string& field) {
  if (HasHadamard(n)) {
    return RotationMatrix(n, RotationKind::kHadamard, options.seed, /*random_signs=*/options.random);
  }
  if (!options.random) {
    return absl::InvalidArgumentError(StrCat(field, ": no Hadamard matrix of order ", n,
                                             " can be built here; set \"random\": true for a seeded random orthogonal "
                                             "rotation"));
  }
  return RotationMatrix(n, RotationKind::kRandom, options.seed);
}

absl::StatusOr<std::shared_ptr<RotatedWeightSource>> RotatedWeightSource::Create(
    std::shared_ptr<const runtime::WeightSource> base, const checkpoint::ModelConfig& model,
    const RotationOptions& options, const std::string& field) {
  if (model.family == checkpoint::ArchFamily::kOpt) {
    return absl::UnimplementedError(StrCat(field, ": rotation of ", model.model_type,
                                           " (LayerNorm with mean and bias) is not supported; Llama, Mistral and "
                                           "Qwen2 are"));
  }
  if (checkpoint::HasRoutedExperts(model)) {
    // R1 would have to go through the router and every expert; the rotation here rewrites Llama's MLP only.
    return absl::UnimplementedError(StrCat(field, ": rotation of ", model.model_type,
                                           " (mixture of experts) is not supported; Llama, Mistral and Qwen2 are"));
  }
  if (model.family == checkpoint::ArchFamily::kGemma) {
    // The residual stream cannot be rotated exactly: post_attention_layernorm and post_feedforward_layernorm scale
    // each branch's output elementwise by (1 + w) right before the residual add, with no linear after them to
    // absorb R1.
    return absl::UnimplementedError(StrCat(field, ": rotation of ", model.model_type,
                                           " (Gemma's (1 + w) post-norms write the residual stream) is not "
                                           "supported; Llama, Mistral and Qwen2 are"));
  }
  std::shared_ptr<RotatedWeightSource> source(new RotatedWeightSource());
  source->base_ = std::move(base);
  source->original_ = model;
  source->model_ = model;
  source->model_.tie_word_embeddings = false;  // W_e R1 and W_lm R1 are different matrices
  source->embed_ = checkpoint::EmbedTokensName(model) + ".weight";
  source->final_norm_ = checkpoint::FinalNormName(model) + ".weight";
  if (options.r1.defined()) {
    if (options.r1.dim() != 2 || options.r1.size(0) != model.hidden_size || options.r1.size(1) != model.hidden_size) {
      return absl::InvalidArgumentError(StrCat(field, " (R1): the given rotation is [", StrJoin(options.r1.sizes(), ", "),
                                               "], the model needs [", model.hidden_size, ", ", model.hidden_size, "]"));
    }
    source->r1_ = options.r1.to(at::kDouble).contiguous();
  } else {
    QUARK_ASSIGN_OR_RETURN(source->r1_, RotationFor(model.hidden_size, options, StrCat(field, " (R1, hidden_size)")));
  }
  if (options.r2) {
    QUARK_ASSIGN_OR_RETURN(source->r2_, RotationFor(model.head_dim, options, StrCat(field, " (R2, head_dim)")));
    if (!options.r2_per_layer.empty()) {
      if (static_cast<int64_t>(options.r2_per_layer.size()) != model.num_hidden_layers) {
        return absl::InvalidArgumentError(StrCat(field, " (R2): ", options.r2_per_layer.size(), " rotations given for ",
                                                 model.num_hidden_layers, " layers"));
      }
      for (const at::Tensor& r2 : options.r2_per_layer) {
        if (r2.dim() != 2 || r2.size(0) != model.head_dim || r2.size(1) != model.head_dim) {
          return absl::InvalidArgumentError(StrCat(field, " (R2): a given rotation is [", StrJoin(r2.sizes(), ", "),
                                                   "], head_dim is ", model.head_dim));
        }
        source->r2_per_layer_.push_back(r2.to(at::kDouble).contiguous());
      }
    }
  }
  if (options.r4) {
    // No random fallback: the matrix travels to vLLM as compressed-tensors' +-1 transform weight.
    const int64_t n = model.intermediate_size;
    if (!HasHadamard(n) || n > kMaxRotationOrder) {
      return absl::InvalidArgumentError(StrCat(field, ".r4 (R4, intermediate_size): no Hadamard matrix of order ", n,
                                               " can be built here (orders k * 2^m with a Paley or tabulated k)"));
    }
    QUARK_ASSIGN_OR_RETURN(source->r4_, HadamardMatrix(n));
    source->r4_normalised_ = source->r4_ / std::sqrt(static_cast<double>(n));
  }
  return source;
}

bool RotatedWeightSource::Has(const std::string& name) const {
  return name == "lm_head.weight" || base_->Has(name);
}

absl::StatusOr<at::Tensor> RotatedWeightSource::Stored(const std::string& name) const { return base_->GetStored(name); }

absl::StatusOr<at::Tensor> RotatedWeightSource::Compute(const std::string& name) const {
  const auto in_dtype = [](const at::Tensor& like, const at::Tensor& x64) { return x64.to(like.scalar_type()); };
  if (name == embed_ || name == "lm_head.weight") {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cached_.find(name);
    if (it != cached_.end()) return it->second;
    at::Tensor rotated;
    if (name == embed_) {
      QUARK_ASSIGN_OR_RETURN(const at::Tensor w, Stored(embed_));
      rotated = in_dtype(w, RotateIn(w, r1_));
    } else {
      const bool tied = original_.tie_word_embeddings || !base_->Has("lm_head.weight");
      QUARK_ASSIGN_OR_RETURN(const at::Tensor w, Stored(tied ? embed_ : "lm_head.weight"));
      QUARK_ASSIGN_OR_RETURN(const at::Tensor norm, Stored(final_norm_));
      rotated = in_dtype(w, RotateIn(w.to(at::kDouble) * norm.to(at::kDouble).view({1, -1}), r1_));
    }
    cached_[name] = rotated;
    return rotated;
  }
  if (name == final_norm_) {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor norm, Stored(name));
    return at::ones_like(norm);
  }
  int64_t layer = -1;
  std::string relative;
  for (int64_t i = 0; i < original_.num_hidden_layers && layer < 0; ++i) {
    const std::string prefix = checkpoint::LayerPrefix(original_, i);
    if (name.rfind(prefix, 0) == 0) {
      layer = i;
      relative = name.substr(prefix.size());
    }
  }
  if (layer < 0) return Stored(name);
  const std::string prefix = checkpoint::LayerPrefix(original_, layer);
  const at::Tensor& r2 = r2_per_layer_.empty() ? r2_ : r2_per_layer_[layer];
  if (relative == "input_layernorm.weight" || relative == "post_attention_layernorm.weight") {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor norm, Stored(name));
    return at::ones_like(norm);
  }
  QUARK_ASSIGN_OR_RETURN(const at::Tensor stored, Stored(name));
  // The norm a linear reads, folded into its columns before the rotation (Quark's transform_rms_norm_and_linear).
  const auto folded = [&](const std::string& norm_name) -> absl::StatusOr<at::Tensor> {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor norm, Stored(prefix + norm_name));
    return stored.to(at::kDouble) * norm.to(at::kDouble).view({1, -1});
  };
  if (relative == "self_attn.q_proj.weight" || relative == "self_attn.k_proj.weight") {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor w, folded("input_layernorm.weight"));
    return in_dtype(stored, RotateIn(w, r1_));
  }
  if (relative == "self_attn.v_proj.weight") {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor w, folded("input_layernorm.weight"));
    at::Tensor rotated = RotateIn(w, r1_);
    if (r2.defined()) rotated = RotateOut(rotated, r2);
    return in_dtype(stored, rotated);
  }
  if (relative == "self_attn.v_proj.bias" && r2.defined()) return in_dtype(stored, RotateLastAxis(stored, r2));
  if (relative == "self_attn.o_proj.weight") {
    at::Tensor rotated = RotateOut(stored, r1_);
    if (r2.defined()) rotated = RotateIn(rotated, r2);
    return in_dtype(stored, rotated);
  }
  if (relative == "mlp.gate_proj.weight" || relative == "mlp.up_proj.weight") {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor w, folded("post_attention_layernorm.weight"));
    return in_dtype(stored, RotateIn(w, r1_));
  }
  if (relative == "self_attn.qkv_proj.weight") {
    // Phi-3's fused q | k | v: the input norm and R1 as for q, k and v apart; R2 on the v rows only.
    QUARK_ASSIGN_OR_RETURN(const at::Tensor w, folded("input_layernorm.weight"));
    at::Tensor rotated = RotateIn(w, r1_);
    if (r2.defined()) {
      const int64_t kv_rows = original_.num_key_value_heads * original_.head_dim;
      const int64_t v_start = rotated.size(0) - kv_rows;
      rotated = at::cat({rotated.narrow(0, 0, v_start), RotateOut(rotated.narrow(0, v_start, kv_rows), r2)}, 0);
    }
    return in_dtype(stored, rotated);
  }
  if (relative == "mlp.gate_up_proj.weight") {
    QUARK_ASSIGN_OR_RETURN(const at::Tensor w, folded("post_attention_layernorm.weight"));
    return in_dtype(stored, RotateIn(w, r1_));
  }
  if (relative == "mlp.down_proj.weight") {
    at::Tensor rotated = RotateOut(stored, r1_);
    if (r4_normalised_.defined()) rotated = RotateIn(rotated, r4_normalised_);  // R4: W H4 / sqrt(n)
    return in_dtype(stored, rotated);
  }
  // Biases of the residual-stream writers rotate with their outputs.
  if (relative == "self_attn.o_proj.bias" || relative == "mlp.down_proj.bias") {
    return in_dtype(stored, RotateLastAxis(stored, r1_));
  }
  return stored;  // q/k biases: their output channels are not rotated
}

absl::StatusOr<at::Tensor> RotatedWeightSource::GetStored(const std::string& name) const {
  try {
    return Compute(name);
  } catch (const c10::Error& e) {
    return absl::InternalError(StrCat("rotating ", name, ": ", e.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> RotatedWeightSource::Get(const std::string& name, at::ScalarType dtype) const {
  QUARK_ASSIGN_OR_RETURN(const at::Tensor t, GetStored(name));
  return t.scalar_type() == dtype ? t : t.to(dtype);
}

}  // namespace quark::algorithms

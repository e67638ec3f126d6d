// One saved Llama MLP block (post_attention_layernorm + SwiGLU MLP) as a runtime::DecoderLayer, so the engine's
// scaling algorithms (AWQ, SmoothQuant) run on it exactly as they run on a streamed decoder layer, plus the
// quantized forward the benchmark measures.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "core/config/quant_spec.h"
#include "core/runtime/attention.h"
#include "core/runtime/decoder_layer.h"
#include "core/runtime/full_model.h"
#include "core/runtime/llama_layer.h"

namespace quark::bench {

/// The tensors of a saved block (float32): norm_weight [H], gate_proj / up_proj [I, H], down_proj [H, I] and
/// the hidden states before the norm, inputs [T, H].
struct MlpBlockTensors {
  at::Tensor norm_weight, gate_proj, up_proj, down_proj, inputs;
};

/// Reads and checks the shapes; errors name the file and the tensor.
absl::StatusOr<MlpBlockTensors> ReadMlpBlock(const std::string& path);

/// A decoder layer with only post_attention_layernorm and mlp.{gate,up,down}_proj: forward = mlp(norm(x)), no
/// residual (the scaling pairs and the benchmark's error only need the block itself).
class MlpOnlyLayer : public runtime::DecoderLayer {
 public:
  MlpOnlyLayer(const MlpBlockTensors& block, double eps);
  at::Tensor forward(const at::Tensor& hidden, const runtime::LayerContext& context) override;

  std::shared_ptr<runtime::RmsNorm> post_attention_layernorm;
  std::shared_ptr<runtime::LlamaMlp> mlp;
};

/// How the block is quantized for the error: weight spec for every linear, and (W8A8) an input spec whose
/// parameters come from the data each linear sees in this forward pass.
struct BlockQuant {
  QuantSpec weight;
  std::optional<QuantSpec> input;
};

/// The block's output [T, H] for x [T, H]: the layer's current norm (float), its linears' weights quantized as
/// `quant` (one scale set from each weight) and, with `quant.input`, each linear's input quantized with parameters
/// from that input (a static observer calibrated on this one batch). `quantized_weights` receives Q(W) by name.
absl::StatusOr<at::Tensor> QuantizedBlockOutput(const MlpOnlyLayer& layer, const at::Tensor& x, const BlockQuant& quant,
                                                std::map<std::string, at::Tensor>* quantized_weights = nullptr);

/// The model in `model_dir` (float32) after checking that `layer` is one of its decoder layers; errors name the flag
/// ("--model: ...", "--layer: L is not a layer of DIR") for the subcommands that take them.
absl::StatusOr<std::unique_ptr<runtime::CausalLm>> OpenModelAtLayer(const std::string& model_dir, int layer);

/// |y - yq|^2 / |y|^2 in float64.
double RelativeError(const at::Tensor& y, const at::Tensor& yq);

/// Writes float32 tensors to one safetensors file (via a scratch directory, renamed into place).
absl::Status WriteTensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                          const std::map<std::string, std::string>& metadata = {});

}  // namespace quark::bench

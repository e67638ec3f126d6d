#include "core/quantize/reload.h"

#include "absl/strings/match.h"
#include "core/export/ct_source.h"
#include "core/numerics/fake_quant.h"
#include "core/quantize/quant_linear.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/moe_layer.h"
#include "core/runtime/online_hadamard_linear.h"

namespace quark::quantize {
namespace {

// The Llama-family attention of `layer` (dense or MoE), or null for the other families.
runtime::LlamaAttention* LlamaAttentionOf(runtime::DecoderLayer& layer) {
  if (auto* dense = dynamic_cast<runtime::LlamaDecoderLayer*>(&layer)) return dense->self_attn.get();
  if (auto* moe = dynamic_cast<runtime::MoeDecoderLayer*>(&layer)) return moe->self_attn.get();
  return nullptr;
}

// vLLM writes K into its fp8 cache after RoPE with k_scale (the export's k_proj.output_scale): vllm/v1/attention/
// backends/flash_attn.py, FlashAttentionImpl.forward -> reshape_and_cache_flash(key, value, ..., layer._k_scale,
// layer._v_scale), the key being the one LlamaAttention.forward rotated first. Quark's output quantizer on k_proj
// quantizes before RoPE; an export is evaluated as vLLM serves it, so K's quantizer moves after RoPE there (V has no
// RoPE: the same either way). Other families keep k_proj's output quantizer (before RoPE).
bool MoveKeyQuantizerAfterRope(const exporter::HfQuarkWeightSource& source, const std::string& module,
                               const std::optional<QuantParams>& output, runtime::LlamaAttention* attention) {
  if (attention == nullptr || !output || !absl::EndsWith(module, ".self_attn.k_proj")) return false;
  const std::optional<QuantSpec> spec = KvCacheSpecFor(source.config(), module);
  if (!spec) return false;
  attention->key_cache_quantizer = [spec = *spec, params = *output, module](const at::Tensor& k) {
    absl::StatusOr<at::Tensor> q = FakeQuantize(k, spec, params, TensorRole::kActivation);
    TORCH_CHECK(q.ok(), module, " (KV cache, after RoPE): ", std::string(q.status().message()));
    return *std::move(q);
  };
  return true;
}

absl::Status InstallExported(const exporter::HfQuarkWeightSource& source, runtime::DecoderLayer& layer) {
  runtime::LlamaAttention* attention = LlamaAttentionOf(layer);
  for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
    const LayerAssignment* a = source.Assignment(linear.name);
    if (a == nullptr || a->source == ConfigSource::kExcluded || a->config.Empty()) continue;
    auto activations = source.Activations(linear.name);
    if (!activations.ok()) return activations.status();
    QuantLinearOptions options;
    options.name = linear.name;
    options.config = a->config;
    options.weight = linear.linear->weight();  // already dequantized by the source
    options.bias = linear.linear->bias();
    options.weight_prequantized = true;
    options.input_params = activations->input;
    options.output_params = activations->output;
    if (MoveKeyQuantizerAfterRope(source, linear.name, activations->output, attention)) {
      options.config.output_tensors.reset();
      options.output_params.reset();
    }
    auto q = QuantLinear::Create(std::move(options));
    if (!q.ok()) return q.status();
    if (auto s = (*q)->Freeze(); !s.ok()) return s;
    if (auto s = layer.ReplaceLinear(linear.relative_name, *q); !s.ok()) return s;
  }
  // #35 item 4: a compressed-tensors export's online input transforms (R4 on down_proj) in front of the linears.
  if (const auto* ct = dynamic_cast<const exporter::CtWeightSource*>(&source)) {
    for (const runtime::NamedLinear& linear : layer.NamedLinears()) {
      auto hadamard = ct->InputTransform(linear.name);
      if (!hadamard.ok()) return hadamard.status();
      if (!hadamard->defined()) continue;
      if (auto s = runtime::InstallOnlineHadamard(layer, linear.relative_name, *hadamard); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReloadedModel> OpenQuantizedExport(const std::string& dir, runtime::StreamerOptions options) {
  std::shared_ptr<const exporter::HfQuarkWeightSource> shared;
  if (exporter::ExportQuantMethod(dir) == "compressed-tensors") {  // #30 item 2
    auto source = exporter::CtWeightSource::Open(dir, options.compute_dtype);
    if (!source.ok()) return source.status();
    shared = *std::move(source);
  } else {
    auto source = exporter::HfQuarkWeightSource::Open(dir, options.compute_dtype);
    if (!source.ok()) return source.status();
    shared = *std::move(source);
  }
  auto streamer = runtime::LayerStreamer::Create(shared->model_config(), shared, options);
  if (!streamer.ok()) return streamer.status();
  ReloadedModel model;
  model.streamer = *std::move(streamer);
  model.source = shared;
  model.hooks.before = [shared](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    return InstallExported(*shared, layer);
  };
  return model;
}

}  // namespace quark::quantize

#include "bench/algorithms/mlp_block.h"

#include <filesystem>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/linear.h"
#include "core/runtime/weight_source.h"

namespace quark::bench {
namespace ckpt = quark::checkpoint;

absl::StatusOr<MlpBlockTensors> ReadMlpBlock(const std::string& path) {
  auto reader = ckpt::CheckpointReader::OpenFile(path);
  if (!reader.ok()) return absl::InvalidArgumentError(StrCat("--input: ", std::string(reader.status().message())));
  runtime::CheckpointWeightSource source(std::shared_ptr<const ckpt::CheckpointReader>(std::move(*reader)));
  MlpBlockTensors b;
  const std::pair<const char*, at::Tensor*> names[] = {{"norm_weight", &b.norm_weight}, {"gate_proj", &b.gate_proj},
                                                       {"up_proj", &b.up_proj},         {"down_proj", &b.down_proj},
                                                       {"inputs", &b.inputs}};
  for (const auto& [name, slot] : names) {
    auto t = source.Get(name, at::kFloat);
    if (!t.ok()) return absl::InvalidArgumentError(StrCat("--input ", path, ": ", std::string(t.status().message())));
    *slot = t->contiguous().clone();  // owned: the algorithms replace weights, the reader goes away
  }
  const int64_t h = b.norm_weight.numel(), i = b.gate_proj.size(0);
  const auto shape_is = [](const at::Tensor& t, std::vector<int64_t> s) { return t.sizes().vec() == s; };
  if (b.norm_weight.dim() != 1 || !shape_is(b.gate_proj, {i, h}) || !shape_is(b.up_proj, {i, h}) ||
      !shape_is(b.down_proj, {h, i}) || b.inputs.dim() != 2 || b.inputs.size(1) != h) {
    return absl::InvalidArgumentError(StrCat("--input ", path, ": needs norm_weight [H], gate_proj/up_proj [I, H], ",
                                             "down_proj [H, I], inputs [T, H] (H = ", h, ", I = ", i, ")"));
  }
  return b;
}

MlpOnlyLayer::MlpOnlyLayer(const MlpBlockTensors& block, double eps) : DecoderLayer(0, "mlp_block.") {
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<runtime::RmsNorm>(block.norm_weight, eps));
  mlp = register_module("mlp", std::make_shared<runtime::LlamaMlp>());
  mlp->gate_proj = std::make_shared<runtime::FloatLinear>(block.gate_proj, at::Tensor());
  mlp->up_proj = std::make_shared<runtime::FloatLinear>(block.up_proj, at::Tensor());
  mlp->down_proj = std::make_shared<runtime::FloatLinear>(block.down_proj, at::Tensor());
  AddLinear("mlp.gate_proj", *mlp, "gate_proj", &mlp->gate_proj);
  AddLinear("mlp.up_proj", *mlp, "up_proj", &mlp->up_proj);
  AddLinear("mlp.down_proj", *mlp, "down_proj", &mlp->down_proj);
}

at::Tensor MlpOnlyLayer::forward(const at::Tensor& hidden, const runtime::LayerContext& /*context*/) {
  return mlp->forward(post_attention_layernorm->forward(hidden));
}

namespace {

// x [T, in] through Q(W) with, for W8A8, x quantized by parameters observed on x itself.
absl::StatusOr<at::Tensor> QuantizedLinear(const at::Tensor& x, const at::Tensor& w, const BlockQuant& quant,
                                           at::Tensor* qw_out) {
  QUARK_ASSIGN_OR_RETURN(const QuantParams wp, ParamsOf(w, quant.weight, TensorRole::kWeight));
  QUARK_ASSIGN_OR_RETURN(const at::Tensor qw, FakeQuantize(w, quant.weight, wp, TensorRole::kWeight));
  at::Tensor xq = x;
  if (quant.input) {
    QUARK_ASSIGN_OR_RETURN(const QuantParams xp, ParamsOf(x, *quant.input, TensorRole::kActivation));
    QUARK_ASSIGN_OR_RETURN(xq, FakeQuantize(x, *quant.input, xp, TensorRole::kActivation));
  }
  if (qw_out) *qw_out = qw;
  return at::matmul(xq, qw.t());
}

}  // namespace

absl::StatusOr<at::Tensor> QuantizedBlockOutput(const MlpOnlyLayer& layer, const at::Tensor& x, const BlockQuant& quant,
                                                std::map<std::string, at::Tensor>* quantized_weights) {
  const at::Tensor normed = layer.post_attention_layernorm->forward(x);
  at::Tensor qg, qu, qd;
  QUARK_ASSIGN_OR_RETURN(const at::Tensor g, QuantizedLinear(normed, layer.mlp->gate_proj->weight(), quant, &qg));
  QUARK_ASSIGN_OR_RETURN(const at::Tensor u, QuantizedLinear(normed, layer.mlp->up_proj->weight(), quant, &qu));
  QUARK_ASSIGN_OR_RETURN(at::Tensor y, QuantizedLinear(at::silu(g) * u, layer.mlp->down_proj->weight(), quant, &qd));
  if (quantized_weights) {
    (*quantized_weights)["gate_proj"] = qg;
    (*quantized_weights)["up_proj"] = qu;
    (*quantized_weights)["down_proj"] = qd;
  }
  return y;
}

absl::StatusOr<std::unique_ptr<runtime::CausalLm>> OpenModelAtLayer(const std::string& model_dir, int layer) {
  auto lm = runtime::CausalLm::Open(model_dir);
  if (!lm.ok()) return absl::InvalidArgumentError(StrCat("--model: ", std::string(lm.status().message())));
  if (layer < 0 || layer >= static_cast<int>((*lm)->layers().size())) {
    return absl::InvalidArgumentError(StrCat("--layer: ", layer, " is not a layer of ", model_dir));
  }
  return lm;
}

double RelativeError(const at::Tensor& y, const at::Tensor& yq) {
  const at::Tensor ref = y.to(at::kDouble);
  return (ref - yq.to(at::kDouble)).pow(2).sum().item<double>() / ref.pow(2).sum().item<double>();
}

absl::Status WriteTensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                          const std::map<std::string, std::string>& metadata) {
  namespace fs = std::filesystem;
  const fs::path scratch = fs::path(path).concat(".partial.d");
  std::vector<ckpt::PlannedTensor> plan;
  for (const auto& [name, t] : tensors) plan.push_back({name, ckpt::StDType::kF32, t.sizes().vec()});
  ckpt::CheckpointWriterOptions options;
  for (const auto& [k, v] : metadata) options.metadata[k] = v;
  QUARK_ASSIGN_OR_RETURN(auto writer, ckpt::CheckpointWriter::Create(scratch.string(), plan, options));
  for (const auto& [name, t] : tensors) {
    const at::Tensor c = t.to(at::kFloat).contiguous();
    QUARK_RETURN_IF_ERROR(writer->Write(name, {static_cast<const char*>(c.data_ptr()), c.nbytes()}));
  }
  QUARK_RETURN_IF_ERROR(writer->Finish());
  std::error_code ec;
  fs::rename(scratch / "model.safetensors", path, ec);
  if (ec) return absl::InternalError(StrCat(path, ": ", ec.message()));
  fs::remove_all(scratch, ec);
  return absl::OkStatus();
}

}  // namespace quark::bench

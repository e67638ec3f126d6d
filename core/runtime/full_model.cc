#include "core/runtime/full_model.h"

#include "core/runtime/layer_streamer.h"
#include "core/runtime/mxfp4_expert_source.h"

namespace quark::runtime {

absl::StatusOr<std::unique_ptr<CausalLm>> CausalLm::Open(const std::string& model_dir, at::ScalarType compute_dtype) {
  auto config = checkpoint::LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  std::shared_ptr<const checkpoint::CheckpointReader> shared_reader(std::move(*reader));
  auto weights = CheckpointWeightsFor(*config, std::move(shared_reader));
  auto model = TransformerModel::Create(*std::move(config), std::move(weights), compute_dtype);
  if (!model.ok()) return model.status();
  return Create(*std::move(model));
}

absl::StatusOr<std::unique_ptr<CausalLm>> CausalLm::Create(std::unique_ptr<TransformerModel> model) {
  std::unique_ptr<CausalLm> lm(new CausalLm(std::move(model)));
  for (int64_t i = 0; i < lm->model_->config().num_hidden_layers; ++i) {
    auto layer = lm->model_->LoadLayer(i);
    if (!layer.ok()) return layer.status();
    lm->layers_.push_back(*std::move(layer));
  }
  return lm;
}

absl::StatusOr<at::Tensor> CausalLm::Hidden(const at::Tensor& ids) {
  try {
    auto hidden = model_->Embed(ids);
    if (!hidden.ok()) return hidden.status();
    at::Tensor h = *hidden;
    const LayerContext& context = model_->Context(ids.size(1));
    for (const auto& layer : layers_) h = layer->forward(h, context);
    return h;
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, "forward");
  }
}

absl::StatusOr<at::Tensor> CausalLm::Forward(const at::Tensor& ids) {
  auto hidden = Hidden(ids);
  if (!hidden.ok()) return hidden.status();
  try {
    return model_->Logits(*hidden);
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, "lm_head");
  }
}

}  // namespace quark::runtime

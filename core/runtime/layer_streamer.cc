#include "core/runtime/layer_streamer.h"

#include "core/base/strings.h"
#include "core/checkpoint/model_layout.h"

namespace quark::runtime {

absl::Status TorchErrorToStatus(const std::exception& error, const std::string& what) {
  // c10::Error messages carry a C++ backtrace after the first line: keep the first line only.
  std::string message = error.what();
  const size_t newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  return absl::InternalError(StrCat(what, ": ", message));
}

absl::StatusOr<std::unique_ptr<LayerStreamer>> LayerStreamer::Open(const std::string& model_dir, StreamerOptions options) {
  auto config = checkpoint::LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  std::shared_ptr<const checkpoint::CheckpointReader> shared_reader(std::move(*reader));
  return Create(*std::move(config), std::make_shared<CheckpointWeightSource>(shared_reader), options);
}

absl::StatusOr<std::unique_ptr<LayerStreamer>> LayerStreamer::Create(checkpoint::ModelConfig config,
                                                                     std::shared_ptr<const WeightSource> weights,
                                                                     StreamerOptions options) {
  auto model = TransformerModel::Create(std::move(config), std::move(weights), options.compute_dtype);
  if (!model.ok()) return model.status();
  return std::unique_ptr<LayerStreamer>(new LayerStreamer(*std::move(model)));
}

absl::Status LayerStreamer::RunLayer(int64_t index, std::vector<at::Tensor>& hidden, const LayerHooks& hooks) {
  auto layer = model_->LoadLayer(index);
  if (!layer.ok()) return layer.status();
  // Read-ahead of the next layer while this one computes.
  if (index + 1 < config().num_hidden_layers) model_->weights().Prefetch(checkpoint::LayerPrefix(config(), index + 1));
  if (hooks.before) {
    if (auto status = hooks.before(index, **layer, hidden); !status.ok()) return status;
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(hidden.size());
  for (const at::Tensor& input : hidden) outputs.push_back((*layer)->forward(input, model_->Context(input.size(1))));
  if (hooks.after) {
    if (auto status = hooks.after(index, **layer, hidden, outputs); !status.ok()) return status;
  }
  hidden = std::move(outputs);
  return absl::OkStatus();  // the layer (and its mmap pages) is released here
}

absl::StatusOr<std::vector<at::Tensor>> LayerStreamer::Run(const std::vector<at::Tensor>& samples, const LayerHooks& hooks) {
  std::vector<at::Tensor> hidden;
  hidden.reserve(samples.size());
  int64_t stage = -1;
  try {
    for (size_t i = 0; i < samples.size(); ++i) {
      at::Tensor ids = samples[i].dim() == 1 ? samples[i].unsqueeze(0) : samples[i];
      if (ids.dim() != 2 || ids.size(0) != 1 || ids.size(1) == 0) {
        return absl::InvalidArgumentError(StrCat("sample ", i, " must be [T] or [1, T] token ids with T > 0"));
      }
      auto embedded = model_->Embed(ids.to(at::kLong));
      if (!embedded.ok()) return absl::Status(embedded.status().code(), StrCat("sample ", i, ": ", std::string(embedded.status().message())));
      hidden.push_back(*std::move(embedded));
    }
    for (stage = 0; stage < config().num_hidden_layers; ++stage) {
      if (auto status = RunLayer(stage, hidden, hooks); !status.ok()) return status;
    }
  } catch (const std::exception& error) {
    return TorchErrorToStatus(error, stage < 0 ? "embeddings" : StrCat("layer ", stage));
  }
  return hidden;
}

}  // namespace quark::runtime

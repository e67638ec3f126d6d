#include "core/runtime/layer_streamer.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/base/strings.h"
#include "core/checkpoint/forward_workspace.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/layer_forward.h"
#include "core/runtime/mxfp4_expert_source.h"

namespace quark::runtime {

absl::Status TorchErrorToStatus(const std::exception& error, const std::string& what) {
  // c10::Error messages carry a C++ backtrace after the first line: keep the first line only.
  std::string message = error.what();
  const size_t newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  // Out of memory is the caller's to act on (a smaller budget, fewer samples, another device), not an engine fault:
  // a GPU's allocator throws OutOfMemoryError ("Tried to allocate N bytes"), the CPU's a plain error saying so.
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr ||
      message.find("not enough memory") != std::string::npos ||
      message.find("can't allocate memory") != std::string::npos) {
    return absl::ResourceExhaustedError(StrCat(what, ": out of memory: ", message));
  }
  return absl::InternalError(StrCat(what, ": ", message));
}

LayerDeviceMemory LayerDeviceMemoryOf(const checkpoint::ModelConfig& config, int64_t layer_weight_bytes,
                                      const std::vector<at::Tensor>& hidden, bool training_forward) {
  LayerDeviceMemory memory;
  memory.weights = layer_weight_bytes;
  int64_t longest = 0, width = config.hidden_size, element = 4;
  for (const at::Tensor& h : hidden) {
    memory.activations += 2 * static_cast<int64_t>(h.nbytes());
    memory.one_sample_activations = std::max<int64_t>(memory.one_sample_activations, 2 * static_cast<int64_t>(h.nbytes()));
    longest = std::max<int64_t>(longest, h.dim() >= 2 ? h.size(-2) : 0);
    memory.tokens += h.dim() >= 2 ? h.size(-2) : 0;
    width = h.dim() >= 1 ? h.size(-1) : width;
    element = static_cast<int64_t>(h.element_size());
  }
  memory.longest_sample = longest;
  memory.workspace = checkpoint::ForwardWorkspaceBytes(config, longest, width, element);  // one sample at a time
  if (training_forward) {
    memory.workspace = std::max(memory.workspace, checkpoint::TrainingForwardBytes(config, longest, width, element));
  }
  return memory;
}

absl::StatusOr<std::unique_ptr<LayerStreamer>> LayerStreamer::Open(const std::string& model_dir, StreamerOptions options) {
  auto config = checkpoint::LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  std::shared_ptr<const checkpoint::CheckpointReader> shared_reader(std::move(*reader));
  auto weights = CheckpointWeightsFor(*config, std::move(shared_reader));  // gpt-oss's MXFP4 experts dequantized
  return Create(*std::move(config), std::move(weights), options);
}

absl::StatusOr<std::unique_ptr<LayerStreamer>> LayerStreamer::Create(checkpoint::ModelConfig config,
                                                                     std::shared_ptr<const WeightSource> weights,
                                                                     StreamerOptions options) {
  auto placed = std::make_shared<const DeviceWeightSource>(std::move(weights), options.device);
  auto model = TransformerModel::Create(std::move(config), placed, options.compute_dtype, options.device.device());
  if (!model.ok()) return model.status();
  return std::unique_ptr<LayerStreamer>(new LayerStreamer(*std::move(model), std::move(placed), std::move(options)));
}

absl::StatusOr<std::pair<std::shared_ptr<DecoderLayer>, int64_t>> LayerStreamer::Load(int64_t index) const {
  const int64_t before = placed_->placed_bytes();
  auto layer = model_->LoadLayer(index);
  if (!layer.ok()) return layer.status();
  return std::make_pair(*std::move(layer), placed_->placed_bytes() - before);
}

absl::Status LayerStreamer::CheckBudget(int64_t index, const DecoderLayer& layer, int64_t weight_bytes,
                                        std::vector<at::Tensor>& hidden) {
  const int most_buffers = options_.device.OverlapsCopies() ? 2 : 1;
  const int64_t budget = options_.device_memory_budget;
  if (budget <= 0 && options_.device.is_cpu()) {  // nothing to choose and nothing reported: the CPU's default path
    double_buffered_ = false;
    return absl::OkStatus();
  }
  LayerDeviceMemory memory = LayerDeviceMemoryOf(config(), weight_bytes, hidden, options_.training_forward);
  if (options_.pass_memory) memory.passes = options_.pass_memory(layer, memory.tokens);
  if (options_.pass_bytes_per_token) memory.bytes_per_token = options_.pass_bytes_per_token(layer);
  memory_use_.peak_need_on_device = std::max(memory_use_.peak_need_on_device, memory.Need(1));
  memory_use_.least_budget = std::max(memory_use_.least_budget, memory.Need(1, !options_.device.is_cpu()));
  // The placements in the order the budget gives them up: double buffering first, then the activations' room.
  for (const bool on_host : {false, true}) {
    if (on_host && options_.device.is_cpu()) break;  // the CPU's activations are in host memory already
    for (int buffers = most_buffers; buffers >= 1; --buffers) {
      if (budget > 0 && memory.Need(buffers, on_host) > budget) continue;
      double_buffered_ = buffers == 2;
      model_->set_activations_on_host(on_host);
      // On the host the samples leave the device before the layer's forwards and the outputs come back as they are
      // computed; on the device, samples an earlier layer kept on the host come back.
      for (at::Tensor& h : hidden) h = on_host ? model_->activations().Hold(h) : model_->activations().Place(h);
      if (on_host) ++memory_use_.layers_activations_on_host;
      memory_use_.peak_need = std::max(memory_use_.peak_need, memory.Need(buffers, on_host));
      return absl::OkStatus();
    }
  }
  return absl::ResourceExhaustedError(StrCat(
      "layer ", index, ": needs ", memory.Need(1), " bytes of ", options_.device.name(), " memory (weights ",
      memory.weights, " + activations ", memory.activations, " + workspace ", memory.workspace, " + passes ",
      memory.Passes(), ") but device_memory_budget is ", budget, " bytes",
      options_.device.is_cpu() ? ""
                               : StrCat("; ", memory.Need(1, true), " with the activations kept in host memory (",
                                        memory.one_sample_activations, " for one sample in and out)"),
      ": fewer or shorter calibration samples, or a larger budget"));
}

absl::Status LayerStreamer::RunLayer(int64_t index, std::vector<at::Tensor>& hidden, const LayerHooks& hooks) {
  std::shared_ptr<DecoderLayer> layer = std::move(staged_);
  int64_t weight_bytes = staged_bytes_;
  if (layer == nullptr) {
    auto loaded = Load(index);
    if (!loaded.ok()) return loaded.status();
    std::tie(layer, weight_bytes) = *std::move(loaded);
  }
  const bool has_next = index + 1 < config().num_hidden_layers;
  // Read-ahead of the next layer while this one computes.
  if (has_next) model_->weights().Prefetch(checkpoint::LayerPrefix(config(), index + 1));
  if (auto status = CheckBudget(index, *layer, weight_bytes, hidden); !status.ok()) return status;
  if (hooks.before) {
    if (auto status = hooks.before(index, *layer, hidden); !status.ok()) return status;
  }
  std::vector<at::Tensor> outputs = ForwardLayerSamples(*layer, hidden, *model_);
  if (has_next && double_buffered_) {
    // The forward above is queued on the compute stream: the next layer's weights cross the bus beside it.
    absl::Status staged;
    options_.device.OnSideStream([&] {
      auto next = Load(index + 1);
      if (!next.ok()) {
        staged = next.status();
        return;
      }
      std::tie(staged_, staged_bytes_) = *std::move(next);
    });
    if (!staged.ok()) return staged;
  }
  if (hooks.after) {
    if (auto status = hooks.after(index, *layer, hidden, outputs); !status.ok()) return status;
  }
  hidden = std::move(outputs);
  return absl::OkStatus();  // the layer (and its mmap pages, or its device memory) is released here
}

absl::StatusOr<std::vector<at::Tensor>> LayerStreamer::Run(const std::vector<at::Tensor>& samples, const LayerHooks& hooks) {
  std::vector<at::Tensor> hidden;
  hidden.reserve(samples.size());
  model_->set_activations_on_host(false);
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
      if (auto status = RunLayer(stage, hidden, hooks); !status.ok()) {
        staged_.reset();
        return status;
      }
    }
  } catch (const std::exception& error) {
    staged_.reset();
    return TorchErrorToStatus(error, stage < 0 ? "embeddings" : StrCat("layer ", stage));
  }
  return hidden;
}

}  // namespace quark::runtime

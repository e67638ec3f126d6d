#include "core/estimate/model_shape.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_modules.h"

namespace quark::estimate {

namespace fs = std::filesystem;

int64_t LayerIndex(const std::string& name) {
  static const std::string kMarker = "layers.";
  const size_t at = name.find(kMarker);
  if (at == std::string::npos) return -1;
  size_t pos = at + kMarker.size();
  int64_t value = 0;
  bool digits = false;
  while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9') {
    value = value * 10 + (name[pos++] - '0');
    digits = true;
    if (value > (int64_t{1} << 40)) return -1;
  }
  return digits ? value : -1;
}

absl::StatusOr<ModelShape> ReadModelShape(const std::string& model_dir) {
  ModelShape shape;
  absl::StatusOr<checkpoint::ModelConfig> config = checkpoint::LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  shape.config = *config;
  absl::StatusOr<std::unique_ptr<checkpoint::CheckpointReader>> reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  absl::StatusOr<std::vector<ModuleInfo>> modules = checkpoint::ListModules(*config, **reader);
  if (!modules.ok()) return modules.status();
  shape.modules = std::move(*modules);
  std::map<checkpoint::StDType, uint64_t> bytes_by_dtype;
  std::map<int64_t, int64_t> layer_params;
  for (const auto& file : (*reader)->files()) {
    for (const checkpoint::TensorInfo& info : file->header().tensors) {
      TensorShape t{info.name, info.dtype, info.shape, info.NumBytes(), LayerIndex(info.name)};
      shape.weight_bytes += t.bytes;
      bytes_by_dtype[t.dtype] += t.bytes;
      shape.params_total += info.NumElements();
      if (t.layer >= 0) layer_params[t.layer] += info.NumElements();
      shape.tensors.push_back(std::move(t));
    }
  }
  uint64_t most = 0;
  for (const auto& [dtype, bytes] : bytes_by_dtype) {
    if (bytes > most) most = bytes, shape.model_dtype = dtype;
  }
  shape.num_layers = shape.config.num_hidden_layers;
  for (const auto& [layer, params] : layer_params) {
    shape.max_layer_params = std::max(shape.max_layer_params, params);
    shape.layer_params_total += params;
  }
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || entry.path().extension() == ".safetensors" ||
        name == "model.safetensors.index.json") {
      continue;
    }
    shape.other_file_bytes += entry.file_size(ec);
  }
  if (ec) return absl::InternalError(absl::StrCat(model_dir, ": ", ec.message()));
  return shape;
}

}  // namespace quark::estimate

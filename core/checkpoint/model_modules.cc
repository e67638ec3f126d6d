#include "core/checkpoint/model_modules.h"

#include "absl/status/status.h"
#include "core/base/strings.h"
#include "core/checkpoint/config_limits.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/model_layout.h"

namespace quark::checkpoint {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) { return quark::StrCat("[", quark::StrJoin(shape, ", "), "]"); }

std::string ModuleType(const TensorSpec& spec) {
  return spec.role == TensorRole::kEmbedding ? "Embedding" : "Linear";
}

}  // namespace

std::string ResolveTensorName(const CheckpointReader& reader, const std::string& name) {
  if (reader.Has(name)) return name;
  constexpr std::string_view kPrefix = "model.";
  if (name.rfind(kPrefix, 0) == 0 && reader.Has(name.substr(kPrefix.size()))) return name.substr(kPrefix.size());
  return "";
}

absl::StatusOr<std::vector<quark::ModuleInfo>> ListModules(const ModelConfig& config, const CheckpointReader& reader) {
  // ModelTensors sizes its list by the config's layers and experts: bound them by the tensors held first.
  int64_t tensors_held = 0;
  for (const auto& file : reader.files()) tensors_held += static_cast<int64_t>(file->header().tensors.size());
  if (auto bound = CheckTensorCountBound(config, tensors_held, reader.location()); !bound.ok()) return bound;
  std::vector<quark::ModuleInfo> modules;
  for (const TensorSpec& spec : ModelTensors(config)) {
    if (spec.role != TensorRole::kEmbedding && spec.role != TensorRole::kLinearWeight) continue;
    if (IsOutsideForward(config, spec.name)) continue;  // DeepSeek's MTP layers: copied, never quantized
    const std::string module = spec.name.substr(0, spec.name.size() - std::string(".weight").size());
    const std::string stored = ResolveTensorName(reader, spec.name);
    if (stored.empty() && config.family == ArchFamily::kGptOss) {
      // HF's and OpenAI's gpt-oss store each layer's experts fused (float or MXFP4): the per-expert linears are slices.
      if (auto fused = CheckGptOssFusedSource(*config.gpt_oss, reader, spec.name); !fused.ok()) return fused;
      modules.push_back({module, ModuleType(spec), spec.shape});
      continue;
    }
    if (stored.empty()) {
      return absl::NotFoundError(quark::StrCat("tensor \"", spec.name, "\" (module ", module, ") is missing from ",
                                              reader.location()));
    }
    auto ref = reader.Get(stored);
    if (!ref.ok()) return ref.status();
    if (ref->info->shape != spec.shape) {
      return absl::InvalidArgumentError(quark::StrCat("tensor \"", stored, "\" has shape ", ShapeText(ref->info->shape),
                                                     " but config.json implies ", ShapeText(spec.shape)));
    }
    modules.push_back({module, ModuleType(spec), spec.shape});
  }
  if (config.tie_word_embeddings) {
    const int64_t dim = config.family == ArchFamily::kOpt ? config.word_embed_proj_dim : config.hidden_size;
    modules.push_back({"lm_head", "Linear", {config.vocab_size, dim}});
  }
  return modules;
}

}  // namespace quark::checkpoint

namespace quark {

absl::StatusOr<std::vector<ModuleInfo>> ListModelModules(const std::string& model_dir) {
  auto config = checkpoint::LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  return checkpoint::ListModules(*config, **reader);
}

}  // namespace quark

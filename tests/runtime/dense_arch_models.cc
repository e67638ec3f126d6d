#include "tests/runtime/dense_arch_models.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/tensor_view.h"

namespace quark::runtime::testing {
namespace {

namespace fs = std::filesystem;

absl::Status WriteFolder(const checkpoint::ModelConfig& config, const std::string& dir,
                         const std::map<std::string, at::Tensor>& tensors) {
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    auto it = tensors.find(spec.name);
    if (it == tensors.end()) return absl::InternalError(StrCat("no tensor for ", spec.name));
    if (it->second.sizes().vec() != spec.shape) return absl::InternalError(StrCat(spec.name, " has the wrong shape"));
    plan.push_back({spec.name, checkpoint::StDType::kF32, spec.shape});
  }
  auto writer = checkpoint::CheckpointWriter::Create(dir, std::move(plan));
  if (!writer.ok()) return writer.status();
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.to(at::kFloat).contiguous();
    if (auto status = (*writer)->Write(name, std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes()));
        !status.ok()) {
      return status;
    }
  }
  if (auto status = (*writer)->Finish(); !status.ok()) return status;
  std::ofstream out(fs::path(dir) / "config.json", std::ios::trunc);
  out << checkpoint::ModelConfigToJson(config);
  return out ? absl::OkStatus() : absl::InternalError(StrCat("cannot write ", dir, "/config.json"));
}

}  // namespace

absl::Status WriteRandomDenseModel(const checkpoint::ModelConfig& config, const std::string& dir, uint64_t seed,
                                   double weight_std) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> tensors;
  for (const auto& spec : checkpoint::ModelTensors(config)) {
    switch (spec.role) {
      case checkpoint::TensorRole::kNormWeight: tensors[spec.name] = 1 + at::normal(0.0, 0.1, spec.shape, generator); break;
      case checkpoint::TensorRole::kNormBias:
      case checkpoint::TensorRole::kLinearBias: tensors[spec.name] = at::normal(0.0, 0.02, spec.shape, generator); break;
      default: tensors[spec.name] = at::normal(0.0, weight_std, spec.shape, generator); break;
    }
  }
  return WriteFolder(config, dir, tensors);
}

absl::Status TransplantTinyLlama(const std::string& llama_dir, const std::string& model_type, const std::string& dir) {
  auto source_config = checkpoint::LoadModelConfig(llama_dir);
  if (!source_config.ok()) return source_config.status();
  auto reader = checkpoint::CheckpointReader::Open(llama_dir);
  if (!reader.ok()) return reader.status();
  const auto get = [&](const std::string& name) -> at::Tensor {
    auto ref = (*reader)->Get(name);
    if (!ref.ok()) throw std::runtime_error(std::string(ref.status().message()));
    return ViewTensor(*ref).value().to(at::kFloat).clone();
  };
  checkpoint::ModelConfig config = *source_config;
  config.model_type = model_type;
  if (model_type == "phi3") {
    config.family = checkpoint::ArchFamily::kPhi3;
  } else if (model_type == "qwen3") {
    config.qk_norm = true;
  } else {
    return absl::InvalidArgumentError(StrCat("model_type \"", model_type, "\" is not qwen3 or phi3"));
  }
  auto generator = at::make_generator<at::CPUGeneratorImpl>(18);
  std::map<std::string, at::Tensor> tensors;
  try {
    for (const auto& spec : checkpoint::ModelTensors(config)) {
      const std::string& name = spec.name;
      const auto replace = [&](const std::string& from, const std::string& to) {
        std::string s = name;
        s.replace(s.find(from), from.size(), to);
        return s;
      };
      if (name.find("qkv_proj.weight") != std::string::npos) {
        tensors[name] = at::cat({get(replace("qkv_proj", "q_proj")), get(replace("qkv_proj", "k_proj")),
                                 get(replace("qkv_proj", "v_proj"))}, 0);
      } else if (name.find("gate_up_proj.weight") != std::string::npos) {
        tensors[name] = at::cat({get(replace("gate_up_proj", "gate_proj")), get(replace("gate_up_proj", "up_proj"))}, 0);
      } else if (name.find("q_norm") != std::string::npos || name.find("k_norm") != std::string::npos) {
        tensors[name] = 1 + at::normal(0.0, 0.05, spec.shape, generator);
      } else {
        tensors[name] = get(name);
      }
    }
  } catch (const std::exception& error) {
    return absl::InternalError(error.what());
  }
  if (auto status = WriteFolder(config, dir, tensors); !status.ok()) return status;
  std::error_code ec;
  fs::copy_file(fs::path(llama_dir) / "tokenizer.model", fs::path(dir) / "tokenizer.model",
                fs::copy_options::overwrite_existing, ec);
  return ec ? absl::InternalError(StrCat("copying tokenizer.model: ", ec.message())) : absl::OkStatus();
}

}  // namespace quark::runtime::testing

// A gpt-oss checkpoint as OpenAI ships it, made from a float one (the gpt-oss runtime and pipeline tests): each layer's
// fused experts replaced by seeded MXFP4 blocks [E, out, in / 32, 16] and scales [E, out, in / 32] (uint8), every
// other tensor copied, config.json saying quantization_config {"quant_method": "mxfp4"}, the folder's other files
// (tokenizer) copied. `twin` (optional) receives the same model with the experts dequantized to float.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/runtime/mxfp4_expert_source.h"
#include "core/runtime/weight_source.h"

namespace quark::runtime::testing {

// Seeded MXFP4 codes for [E, R, in]: blocks [E, R, in / 32, 16], scales [E, R, in / 32] around 2^-7.
inline std::pair<at::Tensor, at::Tensor> RandomMxfp4(int64_t experts, int64_t rows, int64_t in, uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor blocks = at::randint(0, 256, {experts, rows, in / 32, 16}, at::kByte);
  const at::Tensor scales = at::randint(118, 124, {experts, rows, in / 32}, at::kByte);
  return {blocks, scales};
}

inline void WriteMxfp4Twin(const checkpoint::GptOssConfig& config, const std::filesystem::path& float_dir,
                           const WeightSource& weights, const std::filesystem::path& out_dir,
                           TensorMapWeightSource* twin = nullptr) {
  std::filesystem::remove_all(out_dir);
  std::vector<checkpoint::PlannedTensor> plan;
  std::map<std::string, at::Tensor> tensors;
  int64_t layer = 0;
  for (const checkpoint::TensorSpec& spec : checkpoint::GptOssModelTensors(config)) {
    const at::Tensor stored = *weights.Get(spec.name, at::kFloat);
    const bool gate_up = spec.name.size() > 12 && spec.name.substr(spec.name.size() - 12) == "gate_up_proj";
    const bool down = spec.name.size() > 9 && spec.name.substr(spec.name.size() - 9) == "down_proj";
    if (!gate_up && !down) {
      tensors[spec.name] = stored;
      if (twin != nullptr) twin->Set(spec.name, stored);
      continue;
    }
    const int64_t rows = spec.shape[2], in = spec.shape[1];  // HF's float layout is [E, in, out]
    auto [blocks, scales] = RandomMxfp4(spec.shape[0], rows, in, 100 + layer++);
    tensors[spec.name + "_blocks"] = blocks;
    tensors[spec.name + "_scales"] = scales;
    if (twin != nullptr) twin->Set(spec.name, *DequantizeMxfp4(blocks, scales, spec.name));
  }
  for (const auto& [name, t] : tensors) {
    plan.push_back({name, t.scalar_type() == at::kByte ? checkpoint::StDType::kU8 : checkpoint::StDType::kF32, t.sizes().vec()});
  }
  auto writer = checkpoint::CheckpointWriter::Create(out_dir.string(), plan, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const auto& [name, t] : tensors) {
    const at::Tensor c = t.contiguous();
    ASSERT_TRUE((*writer)->WritePart(name, 0, {static_cast<const char*>(c.data_ptr()), c.nbytes()}).ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
  checkpoint::GptOssConfig mxfp4 = config;
  mxfp4.mxfp4_experts = true;
  std::ofstream(out_dir / "config.json") << checkpoint::GptOssConfigToJson(mxfp4);
  for (const auto& entry : std::filesystem::directory_iterator(float_dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || entry.path().extension() == ".safetensors" || name == "model.safetensors.index.json") {
      continue;
    }
    std::filesystem::copy_file(entry.path(), out_dir / name, std::filesystem::copy_options::overwrite_existing);
  }
}

}  // namespace quark::runtime::testing

#include "core/runtime/synthetic_model.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <fstream>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/deepseek_layout.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/runtime/gpt_oss_synthetic.h"
#include "core/checkpoint/llama4_config.h"
#include "core/runtime/gemma_synthetic.h"
#include "core/runtime/llama4_synthetic.h"
#include "core/runtime/moe_synthetic.h"
#include "core/runtime/tokenizer.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using checkpoint::ArchFamily;
using checkpoint::ModelConfig;

struct Shape {
  const char* arch;
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads, vocab, max_positions;
  double rope_theta;
  int64_t bos, eos;
  bool llama31_scaling;
  int64_t sliding_window;  // 0 = none
};

constexpr Shape kShapes[] = {
    {"llama", "tiny", 64, 172, 2, 8, 4, 512, 512, 10000.0, 1, 2, false, 0},
    {"llama", "llama-2-7b", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0, 1, 2, false, 0},
    {"llama", "llama-2-13b", 5120, 13824, 40, 40, 40, 32000, 4096, 10000.0, 1, 2, false, 0},
    {"llama", "llama-3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0, 128000, 128001, false, 0},
    {"llama", "llama-3.1-8b", 4096, 14336, 32, 32, 8, 128256, 131072, 500000.0, 128000, 128001, true, 0},
    // Mistral 7B v0.1 (the release with a 4096-token window); tiny: a window shorter than test sequences.
    {"mistral", "tiny", 64, 172, 2, 8, 4, 512, 512, 10000.0, 1, 2, false, 16},
    {"mistral", "mistral-7b", 4096, 14336, 32, 32, 8, 32000, 32768, 10000.0, 1, 2, false, 4096},
    // Qwen3 (q/k norms, explicit head_dim: see DenseArchDetails) and Phi-3 (fused qkv_proj, gate_up_proj).
    {"qwen3", "tiny", 64, 172, 2, 8, 4, 512, 512, 1000000.0, 1, 2, false, 0},
    {"qwen3", "qwen3-8b", 4096, 12288, 36, 32, 8, 151936, 40960, 1000000.0, 151643, 151645, false, 0},
    {"phi3", "tiny", 64, 172, 2, 8, 8, 512, 512, 10000.0, 1, 2, false, 0},
    {"phi3", "phi-3-mini", 3072, 8192, 32, 32, 32, 32064, 4096, 10000.0, 1, 32000, false, 2047},
    {"opt", "tiny", 64, 256, 2, 4, 4, 512, 512, 0, 2, 2, false, 0},
    {"opt", "opt-125m", 768, 3072, 12, 12, 12, 50272, 2048, 0, 2, 2, false, 0},
    {"opt", "opt-1.3b", 2048, 8192, 24, 32, 32, 50272, 2048, 0, 2, 2, false, 0},
    {"opt", "opt-6.7b", 4096, 16384, 32, 32, 32, 50272, 2048, 0, 2, 2, false, 0},
};

// Elements generated per slice: 16M floats (64 MiB) at a time, whatever the tensor's size.
constexpr int64_t kSliceElements = int64_t{16} << 20;

// What the shape table does not say for Qwen3 and Phi-3. Qwen3: q/k norms, RMS eps 1e-6, and a head_dim given
// apart from hidden/heads (tiny: 16 with hidden 64 and 8 heads, so q is wider than hidden as in Qwen3-0.6B's
// 16 x 128 > 1024). Phi-3: its own family (fused linears), eps 1e-5, lm_head never tied (Phi-3 ships one).
void DenseArchDetails(const std::string& shape, ModelConfig& c) {
  if (c.model_type == "qwen3") {
    c.qk_norm = true;
    c.rms_norm_eps = 1e-6;
    if (shape == "tiny") c.head_dim = 16;
  }
  if (c.model_type == "phi3") {
    c.family = ArchFamily::kPhi3;
    c.tie_word_embeddings = false;
  }
}

absl::StatusOr<std::pair<checkpoint::StDType, at::ScalarType>> ParseDtype(const std::string& dtype) {
  if (dtype == "f32" || dtype == "float32") return std::make_pair(checkpoint::StDType::kF32, at::kFloat);
  if (dtype == "bf16" || dtype == "bfloat16") return std::make_pair(checkpoint::StDType::kBF16, at::kBFloat16);
  if (dtype == "f16" || dtype == "float16") return std::make_pair(checkpoint::StDType::kF16, at::kHalf);
  return absl::InvalidArgumentError(StrCat("dtype \"", dtype, "\" is not one of f32, bf16, f16"));
}

// config.json's torch_dtype for a stored dtype ParseDtype gives.
std::string TorchDtypeName(checkpoint::StDType dtype) {
  return dtype == checkpoint::StDType::kF32 ? "float32" : dtype == checkpoint::StDType::kBF16 ? "bfloat16" : "float16";
}

// `unit_offset_norms`: Gemma's norms scale by 1 + w, so w = 0 is their identity scale (not 1).
absl::Status WriteTensor(checkpoint::CheckpointWriter& writer, const checkpoint::TensorSpec& spec, at::ScalarType dtype,
                         uint64_t seed, int64_t index, bool unit_offset_norms = false) {
  int64_t rows = spec.shape.empty() ? 1 : spec.shape[0];
  const int64_t row_elements = rows == 0 ? 0 : [&] {
    int64_t n = 1;
    for (size_t d = 1; d < spec.shape.size(); ++d) n *= spec.shape[d];
    return n;
  }();
  const int64_t rows_per_slice = std::max<int64_t>(1, kSliceElements / std::max<int64_t>(1, row_elements));
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index));
  const int64_t element_bytes = static_cast<int64_t>(c10::elementSize(dtype));
  for (int64_t row = 0; row < rows; row += rows_per_slice) {
    const int64_t n = std::min(rows_per_slice, rows - row);
    std::vector<int64_t> slice_shape = spec.shape.empty() ? std::vector<int64_t>{} : spec.shape;
    if (!slice_shape.empty()) slice_shape[0] = n;
    at::Tensor slice;
    switch (spec.role) {
      case checkpoint::TensorRole::kNormWeight:
        slice = unit_offset_norms ? at::zeros(slice_shape, dtype) : at::ones(slice_shape, dtype);
        break;
      case checkpoint::TensorRole::kNormBias:
      case checkpoint::TensorRole::kLinearBias: slice = at::zeros(slice_shape, dtype); break;
      default: slice = at::normal(0.0, 0.02, slice_shape, generator).to(dtype); break;
    }
    slice = slice.contiguous();
    const std::string_view bytes(static_cast<const char*>(slice.data_ptr()), slice.numel() * element_bytes);
    if (auto status = writer.WritePart(spec.name, static_cast<uint64_t>(row * row_elements * element_bytes), bytes);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status CopyTokenizer(const SyntheticModelOptions& options, const ModelConfig& config) {
  auto tokenizer = Tokenizer::Open(options.tokenizer_path);
  if (!tokenizer.ok()) return tokenizer.status();
  if ((*tokenizer)->vocab_size() > config.vocab_size) {
    return absl::InvalidArgumentError(StrCat("tokenizer ", options.tokenizer_path, " has ", (*tokenizer)->vocab_size(),
                                             " pieces, more than the vocab_size ", config.vocab_size, " of shape ", options.shape));
  }
  std::error_code ec;
  fs::copy_file(options.tokenizer_path, fs::path(options.out_dir) / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
  if (ec) return absl::InternalError(StrCat("cannot copy ", options.tokenizer_path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> SyntheticShapes(const std::string& arch) {
  std::vector<std::string> names;
  for (const Shape& s : kShapes) {
    if (arch == s.arch) names.push_back(s.name);
  }
  for (std::string& name : GemmaSyntheticShapes(arch)) names.push_back(std::move(name));
  for (std::string& name : MoeSyntheticShapes(arch)) names.push_back(std::move(name));
  for (std::string& name : DeepseekSyntheticShapes(arch)) names.push_back(std::move(name));
  for (std::string& name : GptOssSyntheticShapes(arch)) names.push_back(std::move(name));
  for (std::string& name : Llama4SyntheticShapes(arch)) names.push_back(std::move(name));
  return names;
}

absl::StatusOr<ModelConfig> SyntheticConfig(const std::string& arch, const std::string& shape, const std::string& dtype) {
  const bool moe = !MoeSyntheticShapes(arch).empty(), gemma = !GemmaSyntheticShapes(arch).empty();
  if (!Llama4SyntheticShapes(arch).empty()) {
    // Llama 4 (#32): the ModelConfig its config.json parses to (the parsed Llama4Config inside).
    auto parsed = ParseDtype(dtype);
    if (!parsed.ok()) return parsed.status();
    auto config = Llama4SyntheticConfig(shape, TorchDtypeName(parsed->first));
    if (!config.ok()) return config.status();
    return checkpoint::ParseModelConfig(checkpoint::Llama4ConfigToJson(*config));
  }
  if (moe || gemma) {
    auto parsed = ParseDtype(dtype);
    if (!parsed.ok()) return parsed.status();
    const std::string torch_dtype = TorchDtypeName(parsed->first);
    return moe ? MoeSyntheticConfig(arch, shape, torch_dtype) : GemmaSyntheticConfig(arch, shape, torch_dtype);
  }
  if (arch != "llama" && arch != "mistral" && arch != "opt" && arch != "qwen3" && arch != "phi3") {
    return absl::InvalidArgumentError(StrCat("arch \"", arch, "\" is not one of llama, mistral, qwen3, phi3, opt"));
  }
  auto parsed = ParseDtype(dtype);
  if (!parsed.ok()) return parsed.status();
  for (const Shape& s : kShapes) {
    if (arch != s.arch || shape != s.name) continue;
    ModelConfig c;
    c.model_type = arch;
    c.family = arch == "opt" ? ArchFamily::kOpt : ArchFamily::kLlama;
    c.hidden_size = s.hidden;
    c.intermediate_size = s.intermediate;
    c.num_hidden_layers = s.layers;
    c.num_attention_heads = s.heads;
    c.num_key_value_heads = s.kv_heads;
    c.head_dim = s.hidden / s.heads;
    c.vocab_size = s.vocab;
    c.max_position_embeddings = s.max_positions;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = s.rope_theta > 0 ? s.rope_theta : 10000.0;
    c.bos_token_id = s.bos;
    c.eos_token_id = s.eos;
    c.torch_dtype = TorchDtypeName(parsed->first);
    c.tie_word_embeddings = c.family == ArchFamily::kOpt || shape == "tiny";
    if (c.family == ArchFamily::kOpt) {
      c.hidden_act = "relu";
      c.word_embed_proj_dim = s.hidden;
      c.attention_bias = c.o_proj_bias = c.mlp_bias = true;
    }
    c.sliding_window = s.sliding_window;
    if (s.llama31_scaling) c.rope_scaling = checkpoint::RopeScaling{"llama3", 8.0, 1.0, 4.0, 8192};
    DenseArchDetails(shape, c);
    return c;
  }
  return absl::InvalidArgumentError(StrCat("shape \"", shape, "\" is not known for arch ", arch, " (known: ",
                                           StrJoin(SyntheticShapes(arch), ", "), ")"));
}

namespace {

// What MakeSyntheticModel writes: the tensors in order, config.json's text, the vocabulary, Gemma's norms.
struct SyntheticPlan {
  std::vector<checkpoint::TensorSpec> tensors;
  std::string config_json;
  ModelConfig base;
  bool unit_offset_norms = false;
};

absl::StatusOr<SyntheticPlan> PlanSyntheticModel(const SyntheticModelOptions& options) {
  SyntheticPlan plan;
  if (!DeepseekSyntheticShapes(options.arch).empty()) {
    auto dtypes = ParseDtype(options.dtype);
    if (!dtypes.ok()) return dtypes.status();
    auto config = DeepseekSyntheticConfig(options.shape, TorchDtypeName(dtypes->first));
    if (!config.ok()) return config.status();
    plan.tensors = checkpoint::DeepseekModelTensors(*config);
    plan.config_json = checkpoint::DeepseekConfigToJson(*config);
    plan.base = config->base;
    return plan;
  }
  if (!GptOssSyntheticShapes(options.arch).empty()) {
    auto dtypes = ParseDtype(options.dtype);
    if (!dtypes.ok()) return dtypes.status();
    auto config = GptOssSyntheticConfig(options.shape, TorchDtypeName(dtypes->first));
    if (!config.ok()) return config.status();
    plan.tensors = checkpoint::GptOssModelTensors(*config);
    plan.config_json = checkpoint::GptOssConfigToJson(*config);
    plan.base = config->base;
    return plan;
  }
  auto config = SyntheticConfig(options.arch, options.shape, options.dtype);
  if (!config.ok()) return config.status();
  plan.tensors = checkpoint::ModelTensors(*config);
  plan.config_json = checkpoint::ModelConfigToJson(*config);
  plan.base = *config;
  plan.unit_offset_norms = config->family == ArchFamily::kGemma;
  return plan;
}

}  // namespace

absl::Status MakeSyntheticModel(const SyntheticModelOptions& options) {
  if (options.out_dir.empty()) return absl::InvalidArgumentError("out_dir is empty");
  auto synthetic = PlanSyntheticModel(options);
  if (!synthetic.ok()) return synthetic.status();
  const auto dtypes = *ParseDtype(options.dtype);
  const auto& tensors = synthetic->tensors;
  std::vector<checkpoint::PlannedTensor> plan;
  uint64_t bytes = 0;
  for (const auto& t : tensors) {
    plan.push_back({t.name, dtypes.first, t.shape});
    uint64_t n = checkpoint::StDTypeSize(dtypes.first);
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    bytes += n;
  }
  // A real shape can be larger than the disk (deepseek-v3: 1.37 TB in bf16): refused before anything is written.
  std::error_code ec;
  const fs::path existing = fs::exists(options.out_dir, ec) ? fs::path(options.out_dir)
                                                             : fs::absolute(options.out_dir, ec).parent_path();
  const fs::space_info space = fs::space(existing, ec);
  if (!ec && bytes > space.available) {
    return absl::ResourceExhaustedError(StrCat("shape ", options.shape, " of ", options.arch, " needs ", bytes,
                                               " bytes of weights; ", existing.string(), " has ", space.available,
                                               " bytes free"));
  }
  checkpoint::CheckpointWriterOptions writer_options;
  writer_options.max_shard_bytes = options.max_shard_bytes;
  auto writer = checkpoint::CheckpointWriter::Create(options.out_dir, std::move(plan), writer_options);
  if (!writer.ok()) return writer.status();
  if (!options.tokenizer_path.empty()) {
    if (auto status = CopyTokenizer(options, synthetic->base); !status.ok()) return status;
  }
  try {
    for (size_t k = 0; k < tensors.size(); ++k) {
      if (auto status = WriteTensor(**writer, tensors[k], dtypes.second, options.seed, static_cast<int64_t>(k),
                                    synthetic->unit_offset_norms);
          !status.ok()) {
        return status;
      }
    }
  } catch (const std::exception& error) {
    return absl::InternalError(StrCat("generating weights: ", error.what()));
  }
  if (auto status = (*writer)->Finish(); !status.ok()) return status;
  std::ofstream out(fs::path(options.out_dir) / "config.json", std::ios::trunc);
  out << synthetic->config_json;
  if (!out) return absl::InternalError(StrCat("cannot write ", options.out_dir, "/config.json"));
  return absl::OkStatus();
}

}  // namespace quark::runtime

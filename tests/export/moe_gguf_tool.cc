// moe_gguf_tool: the engine's side of tests/node/gguf_gpt_oss_llama4_consumer_test.mjs (#32). For `--arch gpt_oss` or
// `--arch llama4` it builds the tiny shape (quark make-model's), adjusted to what llama.cpp's architecture hard-codes
// (said below), with seeded weights (linears N(0, 0.25 / in), embedding N(0, 1), lm_head N(0, 0.25^2), norms
// 1 + N(0, 0.1^2), biases N(0, 0.1^2), router N(0, 1), sinks 2 + N(0, 1); the linears' and lm_head's scales are
// options, see Scales), and
// writes in OUT_DIR:
//   hf/                         the HF checkpoint (config.json, float32 model.safetensors, stories260K's tokenizer)
//   <arch>_<case>.gguf          the GGUF export of each case: F32, Q8_0, and MXFP4 (the routed experts fake-quantized
//                               to OCP MXFP4 by the engine and written as GGML MXFP4, everything else F32)
//   tokenizer.model             stories260K's, next to the GGUFs: `quark eval --model <file>.gguf` reads each file
//                               back (GgufWeightSource: GptOssWeightsFromGguf / Llama4WeightsFromGguf), the engine's
//                               figure for that file
//   hf_control/                 the model with one feature changed (gpt-oss: the sinks at -100, i.e. none; llama4:
//                               RoPE on its NoPE layer too): its `quark eval` must land far from llama.cpp's F32 figure
//   hf_truncate_false/          (gpt-oss) the released config's YaRN truncate false: llama.cpp always truncates, so
//                               this one is reported, not bounded
//   ids.txt, ids.json           the token windows (a fixed sequence over [3, vocab))
// and prints one JSON object per file. The adjustments: gpt-oss's YaRN truncate true (llama.cpp floors / ceils the
// correction range); llama4's MoE on odd layers (interleave step 2), NoPE every 4th layer, chunks of 8192 and
// temperature tuning floor 8192 (llama.cpp hard-codes the last three; with 64-token windows chunks and tuning are
// inactive in both); the experts' (and Llama 4's shared expert's) width is 64 (--intermediate), not the tiny shape's
// 32: with rows of a single 32-block (ffn_down_shexp [64, 32]), llama.cpp's CPU Q8_0 matmul gives results far from
// its own dequantized weights' (Llama 4's NLL moved by 0.69 for that tensor alone), which real widths never meet.
//
//   moe_gguf_tool OUT_DIR SHARED_DIR --arch gpt_oss|llama4 [--seed N] [--seq-len L] [--windows W] [--intermediate I]
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <set>
#include <string>

#include <ATen/ATen.h>

#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/gpt_oss_config.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/checkpoint/llama4_config.h"
#include "core/checkpoint/llama4_layout.h"
#include "core/config/presets.h"
#include "core/engine/engine_init.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_gpt_oss.h"
#include "core/export/gguf_llama4.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_vocab.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/gpt_oss_synthetic.h"
#include "core/runtime/llama4_synthetic.h"

namespace {

namespace fs = std::filesystem;
using namespace quark;

int Fail(const absl::Status& status) {
  std::cerr << "moe_gguf_tool: " << status << "\n";
  return 1;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The seeded weights of every tensor in `specs` (see the file comment for the scales).
// Linears at half the unit-variance scale and a mild lm_head: llama.cpp quantizes the activations of every Q8_0 or
// MXFP4 product to Q8_0 (its vec_dot type), an error that a model whose every layer swings the residual stream and
// whose logits are very peaked (scales 1 and 0.5) amplifies to ~1e-2 in mean NLL; at these scales it stays ~1e-3.
struct Scales {
  double linear = 0.5;  // x 1/sqrt(in)
  double head = 0.25;
};

runtime::TensorMapWeightSource Weights(const std::vector<checkpoint::TensorSpec>& specs, uint64_t seed,
                                      const Scales& scales) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  runtime::TensorMapWeightSource out;
  for (const checkpoint::TensorSpec& s : specs) {
    at::Tensor r = at::randn(s.shape, gen, at::kFloat);
    const std::string& n = s.name;
    if (s.role == checkpoint::TensorRole::kNormWeight) {
      r = 1 + 0.1 * r;
    } else if (EndsWith(n, "bias")) {
      r = 0.1 * r;
    } else if (n == "lm_head.weight") {
      r = scales.head * r;
    } else if (EndsWith(n, "sinks")) {
      r = 2 + r;  // sinks that take a good share of each head's attention
    } else if (s.role == checkpoint::TensorRole::kEmbedding || EndsWith(n, "router.weight")) {
      // N(0, 1)
    } else {
      r = scales.linear * r / std::sqrt(static_cast<double>(s.shape[1]));  // [out, in] and fused [E, in, out]
    }
    out.Set(n, r.contiguous());
  }
  return out;
}

absl::Status WriteHfFolder(const std::string& config_json, const runtime::WeightSource& weights,
                           const std::vector<checkpoint::TensorSpec>& specs, const std::string& tokenizer,
                           const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config_json;
  fs::copy_file(tokenizer, dir / "tokenizer.model", fs::copy_options::overwrite_existing);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const checkpoint::TensorSpec& s : specs) plan.push_back({s.name, checkpoint::StDType::kF32, s.shape});
  auto writer = checkpoint::CheckpointWriter::Create(dir.string(), plan);
  if (!writer.ok()) return writer.status();
  for (const checkpoint::PlannedTensor& p : plan) {
    auto t = weights.Get(p.name, at::kFloat);
    if (!t.ok()) return t.status();
    const at::Tensor c = t->contiguous();
    const std::string_view bytes(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(float));
    if (auto s = (*writer)->Write(p.name, bytes); !s.ok()) return s;
  }
  return (*writer)->Finish();
}

// OCP MXFP4 weights as Quark's mxfp4 presets define them (fp4 in groups of 32 along the input, E8M0 scales).
QuantSpec Mxfp4() { return *PresetConfig("mxfp4_weight_only")->global_quant_config.weight; }

// One family's model and how to write / read its GGUF.
struct Family {
  std::string config_json, control_json, truncate_false_json;
  std::vector<checkpoint::TensorSpec> specs;
  std::vector<std::string> expert_modules;  // every routed expert linear (the MXFP4 case's)
  std::function<absl::Status(const runtime::WeightSource&, const exporter::gguf::SentencePieceVocab&,
                             exporter::gguf::GgmlType, const std::set<std::string>&, const std::string&)> write;
  int64_t vocab = 0;
};

absl::StatusOr<Family> GptOss(int64_t intermediate) {
  auto config = runtime::GptOssSyntheticConfig("tiny", "float32");
  if (!config.ok()) return config.status();
  config->base.intermediate_size = intermediate;
  config->yarn->truncate = true;  // llama.cpp's YaRN (see the file comment)
  Family f;
  f.config_json = checkpoint::GptOssConfigToJson(*config);
  checkpoint::GptOssConfig untruncated = *config;
  untruncated.yarn->truncate = false;
  f.truncate_false_json = checkpoint::GptOssConfigToJson(untruncated);
  f.control_json = f.config_json;  // the sinks change in the weights
  f.specs = checkpoint::GptOssModelTensors(*config);
  for (int64_t i = 0; i < config->base.num_hidden_layers; ++i) {
    for (int64_t e = 0; e < config->num_local_experts; ++e) {
      for (const char* proj : {"gate_up_proj", "down_proj"}) {
        f.expert_modules.push_back(StrCat("model.layers.", i, ".mlp.experts.", e, ".", proj));
      }
    }
  }
  const checkpoint::GptOssConfig c = *config;
  f.write = [c](const runtime::WeightSource& w, const exporter::gguf::SentencePieceVocab& v, exporter::gguf::GgmlType t,
                const std::set<std::string>& mx, const std::string& path) {
    return exporter::gguf::WriteGptOssGguf(c, w, v, t, mx, path);
  };
  f.vocab = c.base.vocab_size;
  return f;
}

absl::StatusOr<Family> Llama4(int64_t intermediate) {
  auto config = runtime::Llama4SyntheticConfig("tiny", "float32");
  if (!config.ok()) return config.status();
  checkpoint::Llama4Config& c = *config;
  c.base.intermediate_size = intermediate;
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
    c.moe_layers[i] = (i + 1) % 2 == 0;
    c.rope_layers[i] = (i + 1) % 4 != 0;
  }
  c.chunked_layers = c.rope_layers;
  c.attention_chunk_size = 8192;
  c.floor_scale = 8192;
  Family f;
  f.config_json = checkpoint::Llama4ConfigToJson(c);
  checkpoint::Llama4Config all_rope = c;
  all_rope.rope_layers.assign(all_rope.rope_layers.size(), true);
  all_rope.chunked_layers = all_rope.rope_layers;
  f.control_json = checkpoint::Llama4ConfigToJson(all_rope);
  f.specs = checkpoint::Llama4ModelTensors(c);
  for (int64_t i = 0; i < c.base.num_hidden_layers; ++i) {
    for (int64_t e = 0; c.IsMoeLayer(i) && e < c.num_local_experts; ++e) {
      for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
        f.expert_modules.push_back(StrCat("model.layers.", i, ".feed_forward.experts.", e, ".", proj));
      }
    }
  }
  f.write = [c](const runtime::WeightSource& w, const exporter::gguf::SentencePieceVocab& v, exporter::gguf::GgmlType t,
                const std::set<std::string>& mx, const std::string& path) {
    return exporter::gguf::WriteLlama4Gguf(c, w, v, t, mx, path);
  };
  f.vocab = c.base.vocab_size;
  return f;
}

// `weights` with every routed expert's weight fake-quantized to OCP MXFP4 under its own linear's name (gpt-oss's
// fused experts are sliced per expert and transposed to [out, in] first, as the pipeline sees them).
absl::StatusOr<runtime::TensorMapWeightSource> WithMxfp4Experts(const runtime::TensorMapWeightSource& weights,
                                                              const std::vector<std::string>& expert_modules) {
  runtime::TensorMapWeightSource out = weights;
  for (const std::string& module : expert_modules) {
    at::Tensor w;
    if (weights.Has(module + ".weight")) {
      w = *weights.Get(module + ".weight", at::kFloat);
    } else {  // gpt-oss: "...mlp.experts.E.proj" from the fused "...mlp.experts.proj" [E, in, out]
      const size_t experts = module.find("experts.") + 8, dot = module.find('.', experts);
      const int64_t e = std::stoll(module.substr(experts, dot - experts));
      const std::string fused = module.substr(0, experts) + module.substr(dot + 1);
      w = weights.Get(fused, at::kFloat)->select(0, e).t().contiguous();
      out.Set(module + ".bias", weights.Get(fused + "_bias", at::kFloat)->select(0, e).contiguous());
    }
    auto q = FakeQuantizeDynamic(w, Mxfp4());
    if (!q.ok()) return q.status();
    out.Set(module + ".weight", *q);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return std::cerr << "usage: moe_gguf_tool OUT_DIR SHARED_DIR --arch gpt_oss|llama4 [--seed N]\n", 2;
  const fs::path out = argv[1];
  const std::string shared = argv[2];
  uint64_t seed = 7;
  int64_t seq_len = 64, windows = 2, intermediate = 64;
  std::string arch;
  Scales scales;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--seq-len" && i + 1 < argc) seq_len = std::stoll(argv[++i]);
    else if (a == "--windows" && i + 1 < argc) windows = std::stoll(argv[++i]);
    else if (a == "--arch" && i + 1 < argc) arch = argv[++i];
    else if (a == "--intermediate" && i + 1 < argc) intermediate = std::stoll(argv[++i]);
    else if (a == "--linear-scale" && i + 1 < argc) scales.linear = std::stod(argv[++i]);
    else if (a == "--head-scale" && i + 1 < argc) scales.head = std::stod(argv[++i]);
    else return std::cerr << "unknown option " << a << "\n", 2;
  }
  EngineOptions engine;
  engine.intra_op_threads = 1;
  InitEngine(engine);
  std::cout << std::setprecision(10);
  absl::StatusOr<Family> family = absl::InvalidArgumentError("--arch: gpt_oss or llama4");
  if (arch == "gpt_oss") family = GptOss(intermediate);
  if (arch == "llama4") family = Llama4(intermediate);
  if (!family.ok()) return Fail(family.status());
  const std::string tokenizer = shared + "/fixtures/stories260K/tokenizer.model";
  auto vocab = exporter::gguf::ReadSentencePieceVocab(tokenizer);
  if (!vocab.ok()) return Fail(vocab.status());
  fs::create_directories(out);
  fs::copy_file(tokenizer, out / "tokenizer.model", fs::copy_options::overwrite_existing);
  const runtime::TensorMapWeightSource weights = Weights(family->specs, seed, scales);
  if (auto s = WriteHfFolder(family->config_json, weights, family->specs, tokenizer, out / "hf"); !s.ok()) return Fail(s);
  // The control: gpt-oss without sinks (-100: exp(-100) is nothing); llama4's config with RoPE on its NoPE layer.
  runtime::TensorMapWeightSource control = weights;
  for (const checkpoint::TensorSpec& s : family->specs) {
    if (EndsWith(s.name, "sinks")) control.Set(s.name, at::full(s.shape, -100.0f));
  }
  if (auto s = WriteHfFolder(family->control_json, control, family->specs, tokenizer, out / "hf_control"); !s.ok()) {
    return Fail(s);
  }
  if (!family->truncate_false_json.empty()) {
    auto s = WriteHfFolder(family->truncate_false_json, weights, family->specs, tokenizer, out / "hf_truncate_false");
    if (!s.ok()) return Fail(s);
  }
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < windows * seq_len; ++i) flat.push_back(3 + (i * 7919 + 104729 * (i / 7)) % (family->vocab - 3));
  {
    std::ofstream ids_txt(out / "ids.txt"), ids_json(out / "ids.json");
    ids_json << "[";
    for (size_t i = 0; i < flat.size(); ++i) {
      ids_txt << (i ? " " : "") << flat[i];
      ids_json << (i ? "," : "") << flat[i];
    }
    ids_txt << "\n";
    ids_json << "]\n";
  }
  auto mxfp4_weights = WithMxfp4Experts(weights, family->expert_modules);
  if (!mxfp4_weights.ok()) return Fail(mxfp4_weights.status());
  const std::set<std::string> all_experts(family->expert_modules.begin(), family->expert_modules.end());
  struct Case {
    std::string label;
    exporter::gguf::GgmlType type;
    bool mxfp4;
  };
  for (const Case& c : {Case{"F32", exporter::gguf::GgmlType::kF32, false},
                        Case{"Q8_0", exporter::gguf::GgmlType::kQ8_0, false},
                        Case{"MXFP4", exporter::gguf::GgmlType::kF32, true}}) {
    const std::string file = (out / (arch + "_" + c.label + ".gguf")).string();
    const runtime::TensorMapWeightSource& source = c.mxfp4 ? *mxfp4_weights : weights;
    if (auto s = family->write(source, *vocab, c.type, c.mxfp4 ? all_experts : std::set<std::string>{}, file); !s.ok()) {
      return Fail(s);
    }
    auto gguf = exporter::gguf::GgufFile::Open(file);
    if (!gguf.ok()) return Fail(gguf.status());
    int64_t mxfp4_tensors = 0;
    for (const auto& t : (*gguf)->tensors()) mxfp4_tensors += t.type == exporter::gguf::kGgmlMxfp4;
    std::cout << "{\"type\": \"" << c.label << "\", \"file\": \"" << file 
              << "\", \"mxfp4_tensors\": " << mxfp4_tensors << ", \"vocab\": " << family->vocab << "}" << std::endl;
  }
  return 0;
}

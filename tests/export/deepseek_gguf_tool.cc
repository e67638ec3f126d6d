// deepseek_gguf_tool: the engine's side of tests/node/gguf_deepseek_consumer_test.mjs. Writes the tiny DeepSeek-V3
// (quark make-model --arch deepseek_v3 --shape tiny --seed S) as deepseek2 GGUFs (F32 and Q8_0) with stories260K's
// 512-piece tokenizer, and prints, per file, the engine's mean NLL over fixed token windows computed on the GGUF's
// own weights read back (DeepseekWeightsFromGguf), and its logits of every window (float32 [windows, T, vocab]).
// Two changes to the synthetic model, both said here: lm_head is scaled by 25 (random weights give near-uniform
// logits otherwise, where every NLL is log(vocab)), and rope_scaling.mscale_all_dim is set to mscale (as DeepSeek-V3's
// own config has it: llama.cpp's deepseek2 cannot express cos/sin scaling, WriteDeepseekGguf refuses it).
//
//   deepseek_gguf_tool OUT_DIR SHARED_DIR [--shape tiny] [--seed N] [--seq-len L] [--windows W] [--control]
// --control: the engine's NLL with group-limited routing off (topk_group = n_group) on the F32 file, to show the
// comparison sees routing. Prints one JSON object per line. Also writes OUT_DIR/hf_eval (the HF checkpoint the GGUFs
// hold: config.json with the mscale change, model.safetensors with the scaled lm_head, float32) and OUT_DIR/ids.txt,
// for `quark eval --model OUT_DIR/hf_eval --token-ids OUT_DIR/ids.txt`.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <string>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/engine/engine_init.h"
#include "core/export/gguf_deepseek.h"
#include "core/runtime/deepseek_model.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/synthetic_model.h"

namespace {

namespace fs = std::filesystem;
using namespace quark;

int Fail(const absl::Status& status) {
  std::cerr << "deepseek_gguf_tool: " << status << "\n";
  return 1;
}

// Mean over windows of each window's mean next-token NLL (the project's protocol), from logits [W, T, V].
double MeanNll(const at::Tensor& logits, const at::Tensor& ids) {
  const at::Tensor logp = at::log_softmax(logits.to(at::kDouble), -1);
  const int64_t t = ids.size(1);
  const at::Tensor next = ids.narrow(1, 1, t - 1).unsqueeze(-1);
  return -logp.narrow(1, 0, t - 1).gather(-1, next).squeeze(-1).mean(1).mean().item<double>();
}

// The checkpoint the GGUFs are written from, as an HF folder `dir` (float32, one safetensors file).
absl::Status WriteHfFolder(const checkpoint::DeepseekConfig& config, const runtime::TensorMapWeightSource& weights,
                           const std::vector<std::string>& names, const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << checkpoint::DeepseekConfigToJson(config);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const std::string& name : names) {
    auto t = weights.Get(name, at::kFloat);
    if (!t.ok()) return t.status();
    plan.push_back({name, checkpoint::StDType::kF32, t->sizes().vec()});
  }
  auto writer = checkpoint::CheckpointWriter::Create(dir.string(), plan);
  if (!writer.ok()) return writer.status();
  for (const auto& p : plan) {
    const at::Tensor t = weights.Get(p.name, at::kFloat)->contiguous();
    const std::string_view bytes(static_cast<const char*>(t.data_ptr()), t.numel() * sizeof(float));
    if (auto s = (*writer)->Write(p.name, bytes); !s.ok()) return s;
  }
  return (*writer)->Finish();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return std::cerr << "usage: deepseek_gguf_tool OUT_DIR SHARED_DIR [--seed N] [--seq-len L] [--windows W]\n", 2;
  const fs::path out = argv[1];
  const std::string shared = argv[2];
  uint64_t seed = 5;
  int64_t seq_len = 64, windows = 2;
  bool control = false;
  std::string shape = "tiny";
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (a == "--seq-len" && i + 1 < argc) seq_len = std::stoll(argv[++i]);
    else if (a == "--windows" && i + 1 < argc) windows = std::stoll(argv[++i]);
    else if (a == "--control") control = true;
    else if (a == "--shape" && i + 1 < argc) shape = argv[++i];
    else return std::cerr << "unknown option " << a << "\n", 2;
  }
  std::cout << std::setprecision(10);
  EngineOptions engine;
  engine.intra_op_threads = 1;
  InitEngine(engine);
  fs::create_directories(out);
  runtime::SyntheticModelOptions options;
  options.arch = "deepseek_v3";
  options.shape = shape;
  options.dtype = "f32";
  options.seed = seed;
  options.out_dir = (out / "hf").string();
  if (auto s = runtime::MakeSyntheticModel(options); !s.ok()) return Fail(s);
  auto config = runtime::DeepseekSyntheticConfig(shape, "float32");
  if (!config.ok()) return Fail(config.status());
  config->yarn->mscale_all_dim = config->yarn->mscale;
  auto reader = checkpoint::CheckpointReader::Open(options.out_dir);
  if (!reader.ok()) return Fail(reader.status());
  runtime::CheckpointWeightSource stored(std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  runtime::TensorMapWeightSource weights;
  std::vector<std::string> names;
  for (const auto& file : stored.reader().files()) {
    for (const auto& info : file->header().tensors) {
      names.push_back(info.name);
      at::Tensor t = *stored.Get(info.name, at::kFloat);
      weights.Set(info.name, info.name == "lm_head.weight" ? t * 25.0 : t.clone());
    }
  }
  auto vocab = exporter::gguf::ReadSentencePieceVocab(shared + "/fixtures/stories260K/tokenizer.model");
  if (!vocab.ok()) return Fail(vocab.status());
  // Fixed windows over [3, vocab): a multiplicative sequence, the same for every file.
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < windows * seq_len; ++i) flat.push_back(3 + (i * 7919 + 104729 * (i / 7)) % 509);
  const at::Tensor ids = at::tensor(flat, at::kLong).view({windows, seq_len});
  if (auto s = WriteHfFolder(*config, weights, names, out / "hf_eval"); !s.ok()) return Fail(s);
  {
    std::ofstream ids_txt(out / "ids.txt");
    for (size_t i = 0; i < flat.size(); ++i) ids_txt << (i ? " " : "") << flat[i];
    ids_txt << "\n";
  }
  std::ofstream(out / "ids.json") << "[" << [&] {
    std::string s;
    for (size_t i = 0; i < flat.size(); ++i) s += (i ? "," : "") + std::to_string(flat[i]);
    return s;
  }() << "]\n";
  for (const auto& [label, type] : {std::pair{"F32", exporter::gguf::GgmlType::kF32},
                                    std::pair{"Q8_0", exporter::gguf::GgmlType::kQ8_0}}) {
    const std::string file = (out / ("deepseek_" + shape + "_" + label + ".gguf")).string();
    if (auto s = exporter::gguf::WriteDeepseekGguf(*config, weights, *vocab, type, file); !s.ok()) return Fail(s);
    auto gguf = exporter::gguf::GgufFile::Open(file);
    if (!gguf.ok()) return Fail(gguf.status());
    auto read = exporter::gguf::DeepseekWeightsFromGguf(*config, **gguf);
    if (!read.ok()) return Fail(read.status());
    auto logits = runtime::DeepseekLogits(*config, **read, ids, at::kFloat);
    if (!logits.ok()) return Fail(logits.status());
    const std::string logits_file = (out / ("logits_" + shape + "_" + label + ".f32")).string();
    const at::Tensor l = logits->contiguous();
    std::ofstream(logits_file, std::ios::binary).write(static_cast<const char*>(l.data_ptr()), l.numel() * 4);
    std::cout << "{\"type\": \"" << label << "\", \"file\": \"" << file << "\", \"quark_mean_nll\": " << MeanNll(l, ids)
              << ", \"logits_file\": \"" << logits_file << "\", \"windows\": " << windows << ", \"seq_len\": " << seq_len
              << ", \"vocab\": " << config->base.vocab_size << "}" << std::endl;
    if (control && type == exporter::gguf::GgmlType::kF32) {
      checkpoint::DeepseekConfig ungrouped = *config;
      ungrouped.topk_group = ungrouped.n_group;
      auto other = runtime::DeepseekLogits(ungrouped, **read, ids, at::kFloat);
      if (!other.ok()) return Fail(other.status());
      std::cout << "{\"control\": \"topk_group = n_group\", \"quark_mean_nll\": " << MeanNll(*other, ids)
                << ", \"max_logit_change\": " << (*other - l).abs().max().item<double>() << "}" << std::endl;
    }
  }
  return 0;
}

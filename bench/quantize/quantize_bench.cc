// quantize_bench: quantizes a synthetic Llama-2-7B-shaped bfloat16 model (hidden 4096, MLP 11008, 32 layers,
// 32 heads, vocab 32000; random weights written with the CheckpointWriter) with fp8 static, uint4_wo_128 and
// uint4_wo_128+gptq (GPTQ on the streamed layers), and prints wall time, peak RSS and the shards of each export.
// Calibration is a token-id file of seeded ids (the model has no tokenizer), one sample per line. Each quantization runs in a child process (fork + exec
// of this binary: a plain fork after LibTorch's OpenMP pool started would deadlock) so that its peak RSS is its own.
//
//   quantize_bench [--dir DIR] [--layers N] [--samples N] [--seq-len L] [--presets fp8,uint4_wo_128+gptq] [--keep]
//   (+autoround: AutoRound with auto-round's defaults; +autoround2: 2 iterations, to time one)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/base/openmp_wait_policy.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/presets.h"
#include "core/engine/engine_init.h"
#include "core/quantize/quantize_model.h"

namespace {

namespace fs = std::filesystem;

struct BenchOptions {
  std::string dir = "/tmp/quark_bench_llama7b";
  int64_t layers = 32;
  int samples = 1;
  int seq_len = 32;
  bool keep = false;
  std::string presets = "fp8,uint4_wo_128,uint4_wo_128+gptq";  // "+gptq": the preset with GPTQ's defaults
};

std::string CalibrationIds(const BenchOptions& o) { return o.dir + "/calib.ids"; }

// o.samples lines of o.seq_len ids from a fixed seed: the same calibration on every run.
void WriteCalibrationIds(const BenchOptions& o) {
  std::mt19937_64 random(42);
  std::ofstream out(CalibrationIds(o));
  for (int s = 0; s < o.samples; ++s) {
    for (int t = 0; t < o.seq_len; ++t) out << (t ? " " : "") << (t == 0 ? 1 : 3 + random() % 31990);
    out << "\n";
  }
}

quark::checkpoint::ModelConfig Llama7bShape(int64_t layers) {
  quark::checkpoint::ModelConfig c;
  c.model_type = "llama";
  c.hidden_size = 4096;
  c.intermediate_size = 11008;
  c.num_hidden_layers = layers;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 32;
  c.head_dim = 128;
  c.vocab_size = 32000;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.torch_dtype = "bfloat16";
  return c;
}

// Writes the model tensor by tensor (constant memory), skipping the work when config.json is already there.
bool MakeModel(const BenchOptions& o) {
  if (fs::exists(o.dir + "/config.json")) return true;
  fs::create_directories(o.dir);
  const auto config = Llama7bShape(o.layers);
  const auto tensors = quark::checkpoint::ModelTensors(config);
  std::vector<quark::checkpoint::PlannedTensor> plan;
  for (const auto& t : tensors) plan.push_back({t.name, quark::checkpoint::StDType::kBF16, t.shape});
  auto writer = quark::checkpoint::CheckpointWriter::Create(o.dir, plan);
  if (!writer.ok()) return std::cerr << writer.status() << "\n", false;
  at::manual_seed(0);
  for (const auto& t : tensors) {
    const double std = t.role == quark::checkpoint::TensorRole::kNormWeight ? 0.0 : 0.02;
    at::Tensor v = (at::randn(t.shape) * std + (std == 0.0 ? 1.0 : 0.0)).to(at::kBFloat16).contiguous();
    auto s = (*writer)->Write(t.name, std::string_view(static_cast<const char*>(v.data_ptr()), v.nbytes()));
    if (!s.ok()) return std::cerr << s << "\n", false;
  }
  if (auto s = (*writer)->Finish(); !s.ok()) return std::cerr << s << "\n", false;
  std::ofstream(o.dir + "/config.json") << quark::checkpoint::ModelConfigToJson(config);
  return true;
}

int QuantizeChild(const BenchOptions& o, const std::string& preset, const std::string& out) {
  quark::QuantizeModelOptions q;
  const size_t plus = preset.find('+');
  q.config = *quark::PresetConfig(preset.substr(0, plus));
  if (plus != std::string::npos && preset.substr(plus) == "+gptq") q.config.algo_config.push_back(quark::GptqAlgo{});
  // #35 AutoRound: "+autoround" (auto-round's 200 iterations) or "+autoroundN" (N iterations, for a timing per step).
  if (plus != std::string::npos && preset.compare(plus, 10, "+autoround") == 0) {
    quark::AutoRoundAlgo autoround;
    if (preset.size() > plus + 10) autoround.iters = std::stoi(preset.substr(plus + 10));
    q.config.algo_config.push_back(autoround);
  }
  q.calibration_file = CalibrationIds(o);
  q.output_dir = out;
  q.num_calibration_samples = o.samples;
  q.seq_len = o.seq_len;
  auto report = quark::QuantizeModel(o.dir, q);
  if (!report.ok()) return std::cerr << preset << ": " << report.status() << "\n", 1;
  return 0;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) total += e.is_regular_file() ? e.file_size() : 0;
  return total;
}

void RunOne(const BenchOptions& o, const std::string& preset, const char* self) {
  const std::string out = o.dir + "_" + preset;
  fs::remove_all(out);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string samples = std::to_string(o.samples), seq = std::to_string(o.seq_len);
    execl(self, self, "--child", preset.c_str(), out.c_str(), "--dir", o.dir.c_str(), "--samples", samples.c_str(),
          "--seq-len", seq.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int shards = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) shards += e.path().extension() == ".safetensors";
  fmt::print("| {:<17} | {:>8.1f} | {:>13.2f} | {:>6} | {:>9.2f} | {} |\n", preset, seconds,
             usage.ru_maxrss / 1024.0 / 1024.0, shards, DirBytes(out) / 1e9,
             WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "FAILED");
  if (!o.keep) fs::remove_all(out);
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  BenchOptions o;
  std::string child_preset, child_out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--dir") o.dir = next();
    else if (a == "--layers") o.layers = std::stoll(next());
    else if (a == "--samples") o.samples = std::stoi(next());
    else if (a == "--seq-len") o.seq_len = std::stoi(next());
    else if (a == "--keep") o.keep = true;
    else if (a == "--presets") o.presets = next();
    else if (a == "--child") child_preset = next(), child_out = next();
    else return std::cerr << "unknown option " << a << "\n", 2;
  }
  if (!child_preset.empty()) return QuantizeChild(o, child_preset, child_out);
  const auto make_start = std::chrono::steady_clock::now();
  if (!MakeModel(o)) return 1;
  fmt::print("model: {} ({} layers, bf16, {:.2f} GB), made/checked in {:.1f} s, threads {}\n", o.dir, o.layers,
             DirBytes(o.dir) / 1e9,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - make_start).count(), quark::EngineThreads());
  WriteCalibrationIds(o);
  fmt::print("calibration: {} sample(s) x {} tokens\n\n", o.samples, o.seq_len);
  fmt::print("| scheme            | wall (s) | peak RSS (GB) | shards | size (GB) | status |\n");
  fmt::print("|-------------------|----------|---------------|--------|-----------|--------|\n");
  std::stringstream presets(o.presets);
  for (std::string preset; std::getline(presets, preset, ',');) RunOne(o, preset, "/proc/self/exe");
  return 0;
}

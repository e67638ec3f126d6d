// estimate_bench: what quarkd's ValidateConfig --estimate says for the model quantize_bench made, on the rates this
// machine measures now (worker/throughput_probe, the probe quark-worker runs at start, at QUARK_THREADS threads).
// Beside quantize_bench's measured table (same --dir, --samples, --seq-len, presets) it gives docs/results.md's
// "Estimates vs measured". --extrapolate-layers N also prints the estimate for the same model with N decoder layers
// (layer 0's tensors repeated), to compare with full-depth runs that are too long to repeat.
//
//   estimate_bench --dir DIR [--samples N] [--seq-len L] [--presets fp8,uint4_wo_128+gptq,uint4_wo_128+learned_rotation10]
//                  (algorithms after the preset: gptq, gptaq, qronos, rotation, learned_rotationN, awq, autoround)
//                  [--extrapolate-layers N]
//                  [--device-rates h200]   (the nominal H200 rates of throughput.h instead of this machine's probe)
//                  [--deepseek deepseek-v3|deepseek-v3-4l]  (the shape of runtime/deepseek_synthetic.h in bf16 instead
//                  of --dir's model: estimate/deepseek_shape.h; --dir is then only where the disk probe writes)
//                  [--gpt-oss gpt-oss-20b|gpt-oss-20b-2l|gpt-oss-120b|gpt-oss-120b-2l]  (likewise runtime/gpt_oss_synthetic.h's shape:
//                  estimate/gpt_oss_shape.h)
//                  [--llama4 llama-4-scout|llama-4-scout-2l|llama-4-maverick]  (likewise for Llama 4 text, #32)
//                  [--expert-group-size G]  (#32 item 5: MoE experts streamed in groups of G, RTN presets only)
//                  [--gguf-types Q4_K_M,Q2_K,...]  (also the GGUF sizes of llama-quantize's file types with no scheme:
//                  every float weight by the type's mixture; bits per weight over all parameters)
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "core/base/openmp_wait_policy.h"
#include "core/config/presets.h"
#include "core/engine/engine_init.h"
#include "core/estimate/deepseek_shape.h"
#include "core/estimate/gpt_oss_shape.h"
#include "core/estimate/artifact_size.h"
#include "core/estimate/job_estimate.h"
#include "core/runtime/deepseek_synthetic.h"
#include "core/runtime/gpt_oss_synthetic.h"
#include "core/runtime/llama4_synthetic.h"
#include "worker/throughput_probe.h"

namespace {

using quark::estimate::ModelShape;

// `model` with `layers` decoder layers: every tensor and module of layer 0 repeated under each new index.
ModelShape WithLayers(const ModelShape& model, int64_t layers) {
  ModelShape out = model;
  out.tensors.clear();
  out.modules.clear();
  auto renamed = [](const std::string& name, int64_t layer) {
    const size_t at = name.find("layers.0.");
    return name.substr(0, at) + "layers." + std::to_string(layer) + "." + name.substr(at + 9);
  };
  out.weight_bytes = 0;
  out.params_total = 0;
  out.layer_params_total = 0;
  for (const auto& t : model.tensors) {
    const int64_t n = static_cast<int64_t>(t.bytes / quark::checkpoint::StDTypeSize(t.dtype));
    if (t.layer > 0) continue;
    for (int64_t l = 0; l < (t.layer == 0 ? layers : 1); ++l) {
      auto copy = t;
      if (t.layer == 0) copy.name = renamed(t.name, l), copy.layer = l, out.layer_params_total += n;
      out.weight_bytes += copy.bytes;
      out.params_total += n;
      out.tensors.push_back(copy);
    }
  }
  for (const auto& m : model.modules) {
    const int64_t layer = quark::estimate::LayerIndex(m.name);
    if (layer > 0) continue;
    for (int64_t l = 0; l < (layer == 0 ? layers : 1); ++l) {
      auto copy = m;
      if (layer == 0) copy.name = renamed(m.name, l);
      out.modules.push_back(copy);
    }
  }
  out.num_layers = layers;
  out.config.num_hidden_layers = layers;
  return out;
}

// The algorithms after a preset's '+'s, in order: gptq, gptaq, qronos, rotation, learned_rotationN (trainable, N
// steps), awq, autoround.
absl::StatusOr<std::vector<quark::AlgoConfig>> AlgorithmsOf(const std::string& preset) {
  std::vector<quark::AlgoConfig> algos;
  std::stringstream parts(preset);
  std::string part;
  std::getline(parts, part, '+');  // the preset itself
  while (std::getline(parts, part, '+')) {
    if (part == "gptq") {
      algos.push_back(quark::GptqAlgo{});
    } else if (part == "gptaq" || part == "qronos") {
      quark::GptqAlgo asymmetric;
      asymmetric.method = part == "gptaq" ? quark::HessianMethod::kGptaq : quark::HessianMethod::kQronos;
      algos.push_back(asymmetric);
    } else if (part == "rotation") {
      algos.push_back(quark::RotationAlgo{});
    } else if (part == "awq") {
      algos.push_back(quark::AwqAlgo{});
    } else if (part == "autoround") {
      algos.push_back(quark::AutoRoundAlgo{});
    } else if (part.rfind("learned_rotation", 0) == 0) {
      quark::RotationAlgo rotation;
      rotation.trainable = true;
      if (part.size() > 16) rotation.max_steps = std::stoi(part.substr(16));
      algos.push_back(rotation);
    } else {
      return absl::InvalidArgumentError("unknown algorithm \"" + part +
                                        "\" (gptq, gptaq, qronos, rotation, learned_rotationN, awq, autoround)");
    }
  }
  return algos;
}

void PrintTable(const ModelShape& model, const std::string& presets, int samples, int seq_len,
                const quark::estimate::Throughput& rates, int64_t expert_group_size) {
  fmt::print("| scheme            | est. wall (s) | est. peak RSS (GB) | est. peak GPU (GB) | est. size (GB) | peak phase | phases (s) |\n");
  fmt::print("|-------------------|---------------|--------------------|--------------------|----------------|------------|------------|\n");
  std::stringstream list(presets);
  for (std::string preset; std::getline(list, preset, ',');) {
    quark::estimate::JobInputs job;
    auto algos = AlgorithmsOf(preset);
    if (!algos.ok()) {
      std::cerr << preset << ": " << algos.status() << "\n";
      continue;
    }
    job.config = *quark::PresetConfig(preset.substr(0, preset.find('+')));
    job.config.algo_config = *std::move(algos);
    job.calibration_samples = samples;
    job.calibration_seq_len = seq_len;
    job.expert_group_size = expert_group_size;
    auto e = quark::estimate::EstimateJob(model, job, rates);
    if (!e.ok()) {
      std::cerr << preset << ": " << e.status() << "\n";
      continue;
    }
    std::string phases;
    for (const auto& p : e->phases) phases += fmt::format("{}{} {:.1f}", phases.empty() ? "" : ", ", p.phase, p.seconds);
    fmt::print("| {:<17} | {:>13.1f} | {:>18.2f} | {:>18.2f} | {:>14.2f} | {} | {} |\n", preset, e->total_seconds,
               e->peak_host_bytes / 1024.0 / 1024.0 / 1024.0, e->peak_gpu_bytes / 1024.0 / 1024.0 / 1024.0,
               e->artifacts[0].bytes / 1e9, e->peak_host_phase, phases);
  }
}

// The GGUF artifact of each llama-quantize file type in `types` with no engine scheme (the writer's own type plan).
void PrintGgufSizes(const ModelShape& model, const std::string& types) {
  fmt::print("| GGUF file type | est. size (GB) | tensor data (GiB) | bits per weight |\n");
  fmt::print("|----------------|----------------|-------------------|-----------------|\n");
  const quark::LayerPlan plan = quark::BuildLayerPlan(quark::Config{}, model.modules);
  std::stringstream list(types);
  for (std::string type; std::getline(list, type, ',');) {
    quark::estimate::GgufArtifactOptions options;
    options.type = type;
    auto size = quark::estimate::GgufArtifactSize(model, plan, options);
    if (!size.ok()) {
      std::cerr << type << ": " << size.status() << "\n";
      continue;
    }
    fmt::print("| {:<14} | {:>14.3f} | {:>17.3f} | {:>15.3f} |\n", type, (size->data_bytes + size->header_bytes) / 1e9,
               size->data_bytes / 1024.0 / 1024.0 / 1024.0, size->data_bytes * 8.0 / model.params_total);
  }
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  std::string dir = "/tmp/quark_bench_llama7b", presets = "fp8,uint4_wo_128,uint4_wo_128+gptq";
  int samples = 1, seq_len = 32;
  int64_t expert_group_size = 0;
  int64_t extrapolate = 0;
  std::string deepseek;      // a DeepSeek-V3 shape name: estimate it instead of --dir's model
  std::string gpt_oss;       // a gpt-oss shape name (gpt-oss-120b, ...): likewise
  std::string llama4;        // a Llama 4 shape name (runtime/llama4_synthetic.h), likewise
  std::string device_rates;  // "h200": the nominal H200 rates (throughput.h) instead of this machine's probe
  std::string gguf_types;    // llama-quantize file types whose GGUF sizes to print
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--dir") dir = next();
    else if (a == "--samples") samples = std::stoi(next());
    else if (a == "--seq-len") seq_len = std::stoi(next());
    else if (a == "--expert-group-size") expert_group_size = std::stoll(next());
    else if (a == "--presets") presets = next();
    else if (a == "--extrapolate-layers") extrapolate = std::stoll(next());
    else if (a == "--device-rates") device_rates = next();
    else if (a == "--deepseek") deepseek = next();
    else if (a == "--gpt-oss") gpt_oss = next();
    else if (a == "--llama4") llama4 = next();
    else if (a == "--gguf-types") gguf_types = next();
    else return std::cerr << "unknown option " << a << "\n", 2;
  }
  absl::StatusOr<ModelShape> model;
  if (!gpt_oss.empty()) {
    auto config = quark::runtime::GptOssSyntheticConfig(gpt_oss, "bfloat16");
    if (!config.ok()) return std::cerr << config.status() << "\n", 2;
    model = quark::estimate::GptOssModelShape(*config, quark::checkpoint::StDType::kBF16);
    deepseek = gpt_oss;  // the name printed below
    dir = std::filesystem::temp_directory_path().string();
  } else if (!llama4.empty()) {
    auto config = quark::runtime::Llama4SyntheticConfig(llama4, "bfloat16");
    if (!config.ok()) return std::cerr << config.status() << "\n", 2;
    model = quark::estimate::Llama4ModelShape(*config, quark::checkpoint::StDType::kBF16);
    dir = std::filesystem::temp_directory_path().string();
    deepseek = llama4;  // the name printed below
  } else if (deepseek.empty()) {
    model = quark::estimate::ReadModelShape(dir);
  } else {
    auto config = quark::runtime::DeepseekSyntheticConfig(deepseek, "bfloat16");
    if (!config.ok()) return std::cerr << config.status() << "\n", 2;
    model = quark::estimate::DeepseekModelShape(*config, quark::checkpoint::StDType::kBF16);
    dir = std::filesystem::temp_directory_path().string();
  }
  if (!model.ok()) return std::cerr << model.status() << "\n", 1;
  const auto t = quark::worker::MeasureThroughput(dir);
  quark::estimate::Throughput rates = quark::estimate::ReferenceThroughput();
  rates.threads = t.threads();
  rates.gemm_flops = t.gemm_gflops() * 1e9;
  rates.cholesky_flops = t.cholesky_gflops() * 1e9;
  rates.fake_quant_bytes_per_s = t.fake_quant_bytes_per_s();
  rates.float_codes_bytes_per_s = t.float_codes_bytes_per_s();
  rates.disk_write_bytes_per_s = t.disk_write_bytes_per_s();
  rates.disk_read_bytes_per_s = t.disk_read_bytes_per_s();
  rates.host_memory_bytes = t.host_memory_bytes();
  fmt::print("rates ({} threads, probe {:.1f} s): GEMM {:.1f} GFLOP/s, Cholesky {:.1f} GFLOP/s, fake-quant {:.2f} GB/s, "
             "fp8 codes {:.2f} GB/s, disk write {:.0f} MB/s, read {:.0f} MB/s\n\n",
             t.threads(), t.probe_seconds(), t.gemm_gflops(), t.cholesky_gflops(), t.fake_quant_bytes_per_s() / 1e9,
             t.float_codes_bytes_per_s() / 1e9, t.disk_write_bytes_per_s() / 1e6, t.disk_read_bytes_per_s() / 1e6);
  if (device_rates == "h200") {
    rates = quark::estimate::NominalH200Throughput();
    fmt::print("device rates: nominal H200 (throughput.h; not measured): GEMM {:.0f} TFLOP/s, Cholesky {:.0f} TFLOP/s, "
               "fake-quant {:.0f} GB/s, {:.0f} us per device op\n\n",
               rates.gemm_flops / 1e12, rates.cholesky_flops / 1e12, rates.fake_quant_bytes_per_s / 1e9,
               rates.device_op_seconds * 1e6);
  } else if (!device_rates.empty()) {
    return std::cerr << "--device-rates: unknown \"" << device_rates << "\" (h200)\n", 2;
  }
  fmt::print("model: {} ({} layers, {:.1f}B parameters, largest layer {:.2f}B), {} sample(s) x {} tokens\n",
             deepseek.empty() ? dir : deepseek, model->num_layers, model->params_total / 1e9,
             model->max_layer_params / 1e9, samples, seq_len);
  PrintTable(*model, presets, samples, seq_len, rates, expert_group_size);
  if (extrapolate > 0) {
    fmt::print("\nextrapolated to {} layers (layer 0 repeated):\n", extrapolate);
    PrintTable(WithLayers(*model, extrapolate), presets, samples, seq_len, rates, expert_group_size);
  }
  if (!gguf_types.empty()) {
    fmt::print("\n");
    PrintGgufSizes(extrapolate > 0 ? WithLayers(*model, extrapolate) : *model, gguf_types);
  }
  return 0;
}

// pass_memory_bench: the tensor memory a quantize run's passes hold per decoder layer, beside the two formulas that
// should bound it: the streamer's device budget (runtime::LayerDeviceMemoryOf, checked before each layer) and the
// estimator's peak for a GPU worker (EstimateJob's peak_gpu_bytes). Runs on the CPU with an AllocationMeter: what
// the passes allocate there is what they would allocate on a device (#27: the H200 held 3.6x the formula).
//
//   pass_memory_bench --model DIR [--preset fp8|uint4_wo_128+gptq|uint4_wo_128+awq|...] [--samples N] [--seq-len T]
//                     [--compute-dtype f32|bf16] [--seed S] [--device cpu|cuda:N] [--max-layers N]
//                     [--search-batch-mb M]
//
// Calibration: N samples of T seeded random token ids. Prints one row per layer: the bytes alive when the layer
// starts (the head, the embeddings and the hidden states coming in), the layer's peak above that, and the formulas.
// On a GPU (--device cuda:0) the rows are the device allocator's: its allocated bytes (what the formula should bound)
// and its reserved ones (the caching allocator's pools), each at the layer's start and peak. --max-layers N stops the
// run (cancelled) after N layers: a cut of a long model's job. --search-batch-mb M sets AWQ's search batches
// (QuantizeModelOptions::search_batch_bytes; default: the device's) and the first line says how long the run took,
// so two runs compare AWQ's batched and one-at-a-time searches in time and memory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/base/openmp_wait_policy.h"
#include "core/config/presets.h"
#include "core/engine/engine_init.h"
#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/throughput.h"
#include "core/quantize/layer_memory_profile.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/allocation_meter.h"

namespace {

struct Args {
  std::string model, preset = "fp8", dtype = "f32", device = "cpu";
  int samples = 8, seq_len = 512, max_layers = 0;
  int64_t search_batch_mb = -1;
  uint64_t seed = 1;
};

std::string RandomIdsFile(const std::string& dir, int samples, int seq_len, int64_t vocab, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  const std::string path = dir + "/calib.ids";
  std::ofstream out(path);
  for (int s = 0; s < samples; ++s) {
    for (int t = 0; t < seq_len; ++t) out << (t ? " " : "") << id(random);
    out << "\n";
  }
  return path;
}

double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") a.model = value;
    else if (flag == "--preset") a.preset = value;
    else if (flag == "--samples") a.samples = std::stoi(value);
    else if (flag == "--seq-len") a.seq_len = std::stoi(value);
    else if (flag == "--compute-dtype") a.dtype = value;
    else if (flag == "--seed") a.seed = std::stoull(value);
    else if (flag == "--device") a.device = value;
    else if (flag == "--max-layers") a.max_layers = std::stoi(value);
    else if (flag == "--search-batch-mb") a.search_batch_mb = std::stoll(value);
  }
  if (a.model.empty()) {
    std::fprintf(stderr, "usage: pass_memory_bench --model DIR [--preset P[+gptq]] [--samples N] [--seq-len T] "
                         "[--compute-dtype f32|bf16] [--seed S]\n");
    return 2;
  }
  auto shape = quark::estimate::ReadModelShape(a.model);
  if (!shape.ok()) return std::fprintf(stderr, "%s\n", shape.status().ToString().c_str()), 1;
  const std::string scheme = a.preset.substr(0, a.preset.find('+'));
  auto config = quark::PresetConfig(scheme);
  if (!config.ok()) return std::fprintf(stderr, "%s\n", config.status().ToString().c_str()), 1;
  if (a.preset.find("+gptq") != std::string::npos) config->algo_config.push_back(quark::GptqAlgo{});
  if (a.preset.find("+awq") != std::string::npos) config->algo_config.push_back(quark::AwqAlgo{});

  const std::string dir = (std::filesystem::temp_directory_path() / fmt::format("pass_memory_{}", getpid())).string();
  std::filesystem::create_directories(dir);
  quark::QuantizeModelOptions options;
  options.config = *config;
  options.compute_dtype = a.dtype;
  options.device = a.device;
  options.calibration_file = RandomIdsFile(dir, a.samples, a.seq_len, shape->config.vocab_size, a.seed);
  options.num_calibration_samples = a.samples;
  options.seq_len = a.seq_len;
  options.output_dir = dir + "/out";
  options.search_batch_bytes = a.search_batch_mb < 0 ? -1 : a.search_batch_mb << 20;

  // The budget formula for layer 0 (every layer of a dense model has its shapes).
  auto formula = quark::quantize::BudgetFormulaFor(a.model, options, 0, a.samples, a.seq_len);
  if (!formula.ok()) return std::fprintf(stderr, "%s\n", formula.status().ToString().c_str()), 1;
  quark::estimate::JobInputs job;
  job.config = *config;
  job.calibration_samples = a.samples;
  job.calibration_seq_len = a.seq_len;
  auto estimate = quark::estimate::EstimateJob(*shape, job, quark::estimate::NominalH200Throughput());

  quark::runtime::AllocationMeter meter(/*device_reports=*/a.device != "cpu");
  quark::quantize::LayerMemoryProfile profile(meter);
  profile.Attach(options);
  int started = 0;  // layers begun, counted from the profile's progress events
  auto progress = std::move(options.on_progress);
  options.on_progress = [&](const quark::QuantizeProgress& p) {
    if (p.phase == "quantize") started = std::max(started, p.layer);
    progress(p);
  };
  options.cancelled = [&] { return a.max_layers > 0 && started >= a.max_layers; };
  const auto start = std::chrono::steady_clock::now();
  auto report = quark::QuantizeModel(a.model, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<quark::quantize::LayerMemory> rows = profile.Finish();
  std::filesystem::remove_all(dir);
  const bool cut = report.status().code() == absl::StatusCode::kCancelled && a.max_layers > 0;
  if (!report.ok() && !cut) return std::fprintf(stderr, "%s\n", report.status().ToString().c_str()), 1;

  fmt::print("{} on {} ({}): {} x {} tokens, {}, search batches {} MiB, {:.2f} s; formula weights {:.1f} + activations {:.1f} + workspace {:.1f} + "
             "passes {:.1f} = {:.1f} MiB (one buffer); estimator's peak GPU {:.1f} MiB ({})\n",
             a.preset, a.model, a.device, a.samples, a.seq_len, a.dtype, a.search_batch_mb, seconds, MiB(formula->weights),
             MiB(formula->activations), MiB(formula->workspace), MiB(formula->passes), MiB(formula->Need(1)),
             estimate.ok() ? MiB(estimate->peak_gpu_bytes) : -1.0, estimate.ok() ? estimate->peak_gpu_phase : "");
  // The formula counts the layer's weights and inputs, which are alive when its first pass starts: the layer holds
  // its rise above the start plus those.
  const int64_t inputs = formula->activations / 2, weights = formula->weights;
  if (a.device == "cpu") {
    fmt::print("| layer | live at start (MiB) | rise (MiB) | held = rise + weights + inputs (MiB) | formula (MiB) | held / formula |\n");
    fmt::print("|---|---|---|---|---|---|\n");
    for (const quark::quantize::LayerMemory& r : rows) {
      const int64_t held = r.peak_above_start + weights + inputs;
      fmt::print("| {} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.3f} |\n", r.layer, MiB(r.live_at_start),
                 MiB(r.peak_above_start), MiB(held), MiB(formula->Need(1)), static_cast<double>(held) / formula->Need(1));
    }
    return 0;
  }
  fmt::print("| layer | allocated at start (MiB) | allocated peak (MiB) | held = peak - start + weights + inputs (MiB) | "
             "held / formula (2 buffers: the next layer staged) | reserved at start (MiB) | reserved peak (MiB) | reserved peak / allocated peak |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (const quark::quantize::LayerMemory& r : rows) {
    if (!r.device_peak.reported) {
      fmt::print("| {} | the device allocator reported nothing |\n", r.layer);
      continue;
    }
    const int64_t held = r.device_peak.peak_allocated - r.device_at_start.allocated + weights + inputs;
    fmt::print("| {} | {:.1f} | {:.1f} | {:.1f} | {:.3f} | {:.1f} | {:.1f} | {:.2f} |\n", r.layer,
               MiB(r.device_at_start.allocated), MiB(r.device_peak.peak_allocated), MiB(held),
               static_cast<double>(held) / formula->Need(2), MiB(r.device_at_start.reserved),
               MiB(r.device_peak.peak_reserved),
               static_cast<double>(r.device_peak.peak_reserved) / std::max<int64_t>(1, r.device_peak.peak_allocated));
  }
  return 0;
}

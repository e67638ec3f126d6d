// algo_bench gptq --input IN.safetensors --bits 4 --group-size 128 [--asym] [--act-order] [--static-groups]
//                 [--damp 0.01] [--block-size 128] [--spec SPEC.json] [--threads N] [--fast-linalg] [--tensor-ops]
//                 [--device cpu|cuda:N] [--out OUT.safetensors]
// algo_bench gptq --random N,K,T [--seed S] ...   (a seeded layer instead of a file: the GPU kit carries no layer)
//
// One linear through the engine's GPTQ, timed: IN holds float32 `weight` [N, K] and calibration `inputs` [T, K] (one
// sequence); --random makes them (weights ~ N(0, 0.02), inputs with correlated columns and log-normal channel scales,
// as tests/algorithms/gptq_cuda_test.cc). --device runs the Hessian and GPTQ on that device (the tensor-op path on a
// GPU; timings wait for the device); the errors are computed on the host. Prints one JSON line: hessian_s,
// quantize_s, total_s, rel_output_error = |XW^T - XQ^T|^2 / |XW^T|^2 and rtn_rel_output_error (round to nearest
// with the same spec). OUT gets the dequantized `weight`. The same layer
// through IST-DASLab's and Quark's Python GPTQ: bench/algorithms/peers/gptq_peers.py (side by side in docs/results.md).
//
// algo_bench awq --input MLP.safetensors [--bits 4] [--group-size 128] [--sym] [--eps 1e-5] [--out OUT.safetensors]
// algo_bench smoothquant --input MLP.safetensors [--alpha 0.5] [--scale-clamp-min 1e-3] [--pairs both|norm] ...
// algo_bench gptaq|qronos --random N,K,T [--seed S] [--drift 0.1] [--group-size 128] [--no-act-order]
//                 [--block-size 128] [--threads N] [--compare-gptq] [--column-loop] [--device cpu|cuda:N]
//                 (asymmetric_bench.h: #35)
//                 [--save-inputs IN.safetensors | --load-inputs IN.safetensors]   (Quark's side: asymmetric_vs_quark.sh)
//                 [--save-weights Q.safetensors]   (the result, to compare two builds byte for byte)
// algo_bench autoround --model DIR --calib TEXT --save DIR [--layer 0 --samples 8 --heldout 8 --seq-len 128 --iters 200
//                 --batch 8 --group-size 128 --seed 42 --order-seed S]   (autoround_bench.h: #35, auto-round's own code
//                 beside it)
// algo_bench dump-mlp --model DIR --layer L --calib TEXT [--samples 16 --seq-len 128 --seed 42] --out MLP.safetensors
//
// The MLP subcommands (mlp_bench.cc) run the engine's AwqLayer / SmoothQuantLayer on one saved Llama MLP block
// (norm_weight [H], gate_proj/up_proj [I, H], down_proj [H, I], inputs [T, H] before the norm) and print one JSON line
// with the block's rel_output_error and rtn_rel_output_error, the scales per pair and algo_s; the same blocks through
// mit-han-lab/llm-awq and mit-han-lab/smoothquant: bench/algorithms/smoothing_vs_peers.sh.
//
// --bits 8|4|3|2 picks int8/int4/int3/int2, with --asym uint8/uint4 (3 and 2 bits stay signed, with a zero point);
// --group-size -1 is per output channel. --spec takes any Quark tensor spec instead (fp8, fp4, MX ...; NVFP4 and W4A8
// as the two-element list `quark presets --show NAME` prints for their weight).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/algorithms/asymmetric_bench.h"
#include "bench/algorithms/autoround_bench.h"
#include "bench/algorithms/mlp_bench.h"
#include "core/algorithms/gptq.h"
#include "core/algorithms/gptq_columns.h"
#include "core/algorithms/hessian.h"
#include "core/base/openmp_wait_policy.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/config/quark_json.h"
#include "core/config/quark_json_two_stage.h"
#include "core/engine/engine_init.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/compute_device.h"
#include "core/runtime/weight_source.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace ckpt = quark::checkpoint;

struct Flags {
  std::string input, out, spec_file;
  int bits = 4;
  int group_size = 128;
  bool asym = false;
  bool act_order = false;
  bool static_groups = false;
  double damp = 0.01;
  int block_size = 128;
  int threads = 0;
  bool fast_linalg = false;
  bool tensor_ops = false;
  bool column_loop = false;
  bool warmup = false;
  std::string device = "cpu";
  std::string random;
  uint64_t seed = 0;
};

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

absl::StatusOr<quark::QuantSpec> SpecFromFlags(const Flags& f) {
  if (!f.spec_file.empty()) {
    std::ifstream in(f.spec_file);
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!in || j.is_discarded()) return absl::InvalidArgumentError("--spec: cannot read " + f.spec_file);
    // A two-element list is Quark's NVFP4 or W4A8 (what `quark presets --show` prints for their weight).
    if (j.is_array()) return quark::TwoStageFromQuarkJson(j, "spec");
    return quark::QuantSpecFromQuarkJson(j, "spec");
  }
  quark::QuantSpec spec;
  switch (f.bits) {
    case 8: spec.dtype = f.asym ? quark::DType::kUInt8 : quark::DType::kInt8; break;
    case 4: spec.dtype = f.asym ? quark::DType::kUInt4 : quark::DType::kInt4; break;
    case 3: spec.dtype = quark::DType::kInt3; break;
    case 2: spec.dtype = quark::DType::kInt2; break;
    default: return absl::InvalidArgumentError(fmt::format("--bits: {} is not 8, 4, 3 or 2", f.bits));
  }
  spec.symmetric = !f.asym;
  if (f.group_size > 0) {
    spec.qscheme = quark::QScheme::kPerGroup;
    spec.group_size = f.group_size;
    spec.ch_axis = 1;
  } else {
    spec.qscheme = quark::QScheme::kPerChannel;
    spec.ch_axis = 0;
  }
  return spec;
}

double RelativeOutputError(const at::Tensor& x, const at::Tensor& w, const at::Tensor& q) {
  const at::Tensor reference = at::matmul(x, w.t()).to(at::kDouble);
  const at::Tensor diff = reference - at::matmul(x, q.t()).to(at::kDouble);
  return diff.pow(2).sum().item<double>() / reference.pow(2).sum().item<double>();
}

absl::Status WriteWeight(const std::string& path, const at::Tensor& weight) {
  namespace fs = std::filesystem;
  const fs::path scratch = fs::path(path).concat(".partial.d");
  auto writer =
      ckpt::CheckpointWriter::Create(scratch.string(), {{"weight", ckpt::StDType::kF32, weight.sizes().vec()}});
  if (!writer.ok()) return writer.status();
  const at::Tensor c = weight.to(at::kFloat).contiguous();
  if (auto s = (*writer)->Write("weight", {static_cast<const char*>(c.data_ptr()), c.nbytes()}); !s.ok()) return s;
  if (auto s = (*writer)->Finish(); !s.ok()) return s;
  std::error_code ec;
  fs::rename(scratch / "model.safetensors", path, ec);
  if (ec) return absl::InternalError(path + ": " + ec.message());
  fs::remove_all(scratch, ec);
  return absl::OkStatus();
}

struct Layer {
  at::Tensor weight, inputs;  // [N, K] and [T, K], float32, contiguous, in host memory
};

absl::StatusOr<Layer> RandomLayer(const std::string& shape, uint64_t seed) {
  int64_t n = 0, k = 0, t = 0;
  if (std::sscanf(shape.c_str(), "%ld,%ld,%ld", &n, &k, &t) != 3 || n <= 0 || k < 8 || t <= 0 ||
      n * k > (int64_t{1} << 28) || t * k > (int64_t{1} << 28)) {
    return absl::InvalidArgumentError("--random: '" + shape + "' is not N,K,T with K >= 8 and N*K, T*K <= 2^28");
  }
  at::manual_seed(seed);
  const at::Tensor channel_scale = at::exp(at::randn({k}) * 0.8);
  at::Tensor x = (at::matmul(at::randn({t, k / 8}), at::randn({k / 8, k})) + 0.3 * at::randn({t, k})) * channel_scale;
  return Layer{at::randn({n, k}) * 0.02, x.contiguous()};
}

absl::StatusOr<Layer> LayerFromFile(const std::string& path) {
  auto reader = ckpt::CheckpointReader::OpenFile(path);
  if (!reader.ok()) return absl::InvalidArgumentError("--input: " + std::string(reader.status().message()));
  quark::runtime::CheckpointWeightSource source(std::shared_ptr<const ckpt::CheckpointReader>(std::move(*reader)));
  auto weight = source.Get("weight", at::kFloat);
  auto inputs = source.Get("inputs", at::kFloat);
  if (!weight.ok() || !inputs.ok()) {
    return absl::InvalidArgumentError("--input: needs float `weight` [N, K] and `inputs` [T, K]");
  }
  // Copied out of the file's mapping before the clock starts: the layer is in memory, as a layer pass holds it and as
  // the peers' harness holds it (it reads the file into memory first). Timing the first touch of each mapped page
  // would add the file's page faults to ours alone.
  return Layer{weight->clone(at::MemoryFormat::Contiguous), inputs->clone(at::MemoryFormat::Contiguous)};
}

int RunGptq(const Flags& f) {
  auto spec = SpecFromFlags(f);
  if (!spec.ok()) return std::cerr << spec.status().message() << "\n", 2;
  if (f.random.empty() == f.input.empty()) return std::cerr << "gptq: give either --input or --random\n", 2;
  auto device = quark::runtime::ComputeDevice::Open(f.device, "--device");
  if (!device.ok()) return std::cerr << device.status().message() << "\n", 2;
  auto layer = f.random.empty() ? LayerFromFile(f.input) : RandomLayer(f.random, f.seed);
  if (!layer.ok()) return std::cerr << layer.status().message() << "\n", 2;
  const at::Tensor w = layer->weight, x = layer->inputs;
  if (w.dim() != 2 || x.dim() != 2 || w.size(1) != x.size(1)) {
    return std::cerr << "--input: `weight` [N, K] and `inputs` [T, K] must share K\n", 2;
  }
  // On a device the layer is placed before the clock starts, as the layer streamer has it there before GPTQ runs.
  const at::Tensor w_on = device->Place(w), x_on = device->Place(x);
  device->Synchronize();
  quark::algorithms::GptqOptions options;
  options.damp_percent = f.damp;
  options.block_size = f.block_size;
  options.act_order = f.act_order;
  options.static_groups = f.static_groups;
  options.fast_linalg = f.fast_linalg;
  options.tensor_ops = f.tensor_ops;
  options.fused_blocks = !f.column_loop;

  // One timed run: the Hessian from the inputs, then GPTQ on a copy of the weight (GPTQ factors the Hessian in place).
  struct Timed {
    quark::algorithms::GptqResult result;
    double hessian_s = 0, quantize_s = 0, total_s = 0;
  };
  auto run = [&]() -> absl::StatusOr<Timed> {
    Timed timed;
    const auto start = Clock::now();
    quark::algorithms::HessianAccumulator accumulator(w.size(1), f.fast_linalg, f.tensor_ops);
    if (auto s = accumulator.Add(x_on.unsqueeze(0)); !s.ok()) return s;
    auto hessian = std::move(accumulator).Finish();
    device->Synchronize();
    if (!hessian.ok()) return hessian.status();
    timed.hessian_s = Seconds(start);
    const auto quantize_start = Clock::now();
    // Handed over, as the layer pass hands over its Hessians: GPTQ factors it in place instead of copying it.
    auto result = quark::algorithms::GptqQuantizeWeight(w_on, *std::move(hessian), *spec, options);
    if (!result.ok()) return absl::Status(result.status().code(), "gptq: " + std::string(result.status().message()));
    device->Synchronize();
    timed.quantize_s = Seconds(quantize_start);
    timed.total_s = Seconds(start);
    timed.result = *std::move(result);
    return timed;
  };
  // --warmup: one untimed run first (a GPU's context, cuBLAS / cuSOLVER handles and kernels load on first use; the
  // peers' harness has the same flag).
  if (f.warmup) {
    if (auto warm = run(); !warm.ok()) return std::cerr << warm.status().message() << "\n", 1;
  }
  auto timed = run();
  if (!timed.ok()) return std::cerr << timed.status().message() << "\n", 1;
  const double hessian_s = timed->hessian_s, quantize_s = timed->quantize_s, total_s = timed->total_s;
  const auto* result = &timed->result;
  const at::Tensor quantized = device->ToHost(result->weight);

  auto rtn = quark::FakeQuantizeDynamic(w, *spec, quark::TensorRole::kWeight);
  if (!rtn.ok()) return std::cerr << "rtn: " << rtn.status().message() << "\n", 2;
  nlohmann::ordered_json line = {
      {"algorithm", "gptq"},
      {"shape", {w.size(0), w.size(1)}},
      {"tokens", x.size(0)},
      {"threads", at::get_num_threads()},
      {"hessian_s", hessian_s},
      {"quantize_s", quantize_s},
      {"total_s", total_s},
      {"factor_s", result->factor_seconds},
      {"columns_s", result->columns_seconds},
      {"rel_output_error", RelativeOutputError(x, w, quantized)},
      {"rtn_rel_output_error", RelativeOutputError(x, w, *rtn)},
      {"extra_damp", result->extra_damp},
      {"linalg", f.fast_linalg ? "fast" : "quark"},
      {"path", f.tensor_ops || !device->is_cpu() ? "tensor_ops" : "cpu"},
      {"fused_blocks", result->fused_blocks},
      {"device", device->name()},
  };
  std::cout << line.dump() << std::endl;
  if (!f.out.empty()) {
    if (auto s = WriteWeight(f.out, quantized); !s.ok()) return std::cerr << s.message() << "\n", 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  CLI::App app{"algo_bench: the engine's algorithms on one saved layer, timed"};
  app.require_subcommand(1);
  Flags f;
  CLI::App* gptq = app.add_subcommand("gptq", "GPTQ on weight [N, K] with calibration inputs [T, K]");
  gptq->add_option("--input", f.input, "safetensors with `weight` and `inputs`");
  gptq->add_option("--random", f.random, "N,K,T: a seeded random layer instead of --input");
  gptq->add_option("--seed", f.seed, "seed of --random (default 0)");
  gptq->add_option("--device", f.device, "cpu (default) or cuda:N: where the Hessian and GPTQ run");
  gptq->add_option("--out", f.out, "writes the dequantized `weight` here");
  gptq->add_option("--bits", f.bits, "8, 4, 3 or 2");
  gptq->add_option("--group-size", f.group_size, "columns per group; -1 = per output channel");
  gptq->add_flag("--asym", f.asym, "asymmetric (uint8/uint4, zero point)");
  gptq->add_flag("--warmup", f.warmup, "one untimed run first (a GPU's context, handles and kernels load on first use)");
  gptq->add_flag("--act-order", f.act_order, "columns by descending Hessian diagonal (desc_act)");
  gptq->add_flag("--static-groups", f.static_groups, "group parameters from the original weight");
  gptq->add_option("--damp", f.damp, "damp_percent");
  gptq->add_option("--block-size", f.block_size, "columns per lazy update");
  gptq->add_option("--spec", f.spec_file,
                   "a Quark tensor spec (JSON; NVFP4 and W4A8 as their two-element list) instead of "
                   "--bits/--group-size/--asym");
  gptq->add_option("--threads", f.threads, "LibTorch and OpenBLAS threads (default: QUARK_THREADS or every core)");
  gptq->add_flag("--fast-linalg", f.fast_linalg,
                 "Hessian by a symmetric rank-k update and the factor by one Cholesky + triangular inverse (half the "
                 "flops; equal to Quark's up to rounding)");
  gptq->add_flag("--tensor-ops", f.tensor_ops,
                 "the device-generic path (gptq_tensor_ops.h: what a GPU runs) on the CPU, for the parity figures");
  gptq->add_flag("--column-loop", f.column_loop,
                 "the device-generic path column by column instead of one fused kernel launch a block");
  quark::bench::MlpFlags m;
  const auto common = [&m](CLI::App* sub) {
    sub->add_option("--input", m.input, "safetensors with norm_weight, gate_proj, up_proj, down_proj, inputs")
        ->required();
    sub->add_option("--out", m.out, "writes the transformed (*_scaled, norm_weight) and quantized weights, scales_*");
    sub->add_option("--eps", m.eps, "RMSNorm eps (default 1e-5, Llama-2/3's)");
    sub->add_option("--threads", m.threads, "LibTorch and OpenBLAS threads (default: QUARK_THREADS or every core)");
  };
  CLI::App* awq = app.add_subcommand("awq", "AWQ on a saved Llama MLP block");
  common(awq);
  awq->add_option("--bits", m.bits, "8, 4 or 3 (default 4: uint4)");
  awq->add_option("--group-size", m.group_size, "columns per group (default 128); -1 = per output channel");
  awq->add_flag("--sym", m.sym, "symmetric int (default asymmetric uint with zero point, as llm-awq and Quark)");
  awq->add_option("--grid", m.grid, "ratios searched (default 20)");
  awq->add_flag("--time-clip", m.time_clip, "also time the clip search alone (clip_s; runs it once more)");
  awq->add_flag("--clip-only", m.clip_only, "only time the clip search on the unscaled block (clip_s)");
  CLI::App* smooth = app.add_subcommand("smoothquant", "SmoothQuant + W8A8 int8 per-tensor static on an MLP block");
  common(smooth);
  smooth->add_option("--alpha", m.alpha, "migration strength (default 0.5)");
  smooth->add_option("--scale-clamp-min", m.scale_clamp_min, "lower clamp of the scales (default 1e-3, Quark's)");
  smooth->add_option("--pairs", m.pairs, "both (norm -> gate/up and up -> down, Quark's template) or norm");
  CLI::App* dump = app.add_subcommand("dump-mlp", "saves layer L's MLP block with the model's hidden states");
  dump->add_option("--model", m.model_dir, "HF model directory with tokenizer.model")->required();
  dump->add_option("--layer", m.layer, "decoder layer (default 1)");
  dump->add_option("--calib", m.calib, "text file for calibration windows")->required();
  dump->add_option("--samples", m.samples, "windows (default 16)");
  dump->add_option("--seq-len", m.seq_len, "tokens per window (default 128)");
  dump->add_option("--seed", m.seed, "window seed (default 42)");
  dump->add_option("--out", m.out, "the block's safetensors")->required();
  dump->add_option("--threads", m.threads, "LibTorch threads");
  quark::bench::AsymmetricFlags a;
  std::vector<CLI::App*> asymmetric;
  for (const char* method : {"gptaq", "qronos"}) {
    CLI::App* sub = app.add_subcommand(method, std::string(method) + " on a seeded linear (asymmetric inputs)");
    sub->add_option("--random", a.random, "N,K,T (default 4096,4096,2048)");
    sub->add_option("--seed", a.seed, "seed (default 0)");
    sub->add_option("--drift", a.drift, "the quantized inputs' perturbation (default 0.1)");
    sub->add_option("--group-size", a.group_size, "uint4 asymmetric groups (default 128)");
    sub->add_flag("!--no-act-order", a.act_order, "columns in their own order (default: desc_act, Quark's)");
    sub->add_option("--block-size", a.block_size, "columns per lazy update (default 128)");
    sub->add_option("--threads", a.threads, "LibTorch and OpenBLAS threads");
    sub->add_flag("--compare-gptq", a.compare_gptq, "also GPTQ on the quantized inputs alone");
    sub->add_flag("--column-loop", a.column_loop, "the column-by-column loop instead of fused blocks");
    sub->add_option("--device", a.device, "cpu (default) or cuda:N: where the statistics and the quantization run");
    CLI::Option* save = sub->add_option("--save-inputs", a.save_inputs,
                                        "writes the seeded x, xq, w (float32 safetensors) here and exits");
    sub->add_option("--load-inputs", a.load_inputs, "x, xq, w from a --save-inputs file instead of seeded ones")
        ->excludes(save)
        ->excludes("--random")
        ->excludes("--seed")
        ->excludes("--drift");
    sub->add_option("--save-weights", a.save_weights,
                    "also writes the quantized weight, scale and zero_point (safetensors) here")
        ->excludes(save);
    asymmetric.push_back(sub);
  }
  quark::bench::AutoRoundBenchFlags r;
  CLI::App* autoround = app.add_subcommand("autoround", "AutoRound on one decoder layer, saved for auto-round's code");
  autoround->add_option("--model", r.model_dir, "HF Llama directory with tokenizer.model")->required();
  autoround->add_option("--calib", r.calib, "text file for the windows")->required();
  autoround->add_option("--save", r.save_dir, "folder for layer.safetensors, engine_weights.safetensors, engine.json")
      ->required();
  autoround->add_option("--layer", r.layer, "decoder layer (default 0)");
  autoround->add_option("--samples", r.samples, "training windows (default 8)");
  autoround->add_option("--heldout", r.heldout, "held-out windows (default 8)");
  autoround->add_option("--seq-len", r.seq_len, "tokens per window (default 128)");
  autoround->add_option("--seed", r.seed, "window and sampler seed (default 42)");
  autoround->add_option("--order-seed", r.order_seed, "sampler seed alone, the windows kept (default: --seed)")
      ->check(CLI::NonNegativeNumber);
  autoround->add_option("--iters", r.iters, "iterations (default 200; lr = minmax_lr = 1 / iters)");
  autoround->add_option("--batch", r.batch, "batch size (default 8)");
  autoround->add_option("--group-size", r.group_size, "uint4 asymmetric groups (default 128)");
  autoround->add_option("--threads", r.threads, "LibTorch threads");
  CLI11_PARSE(app, argc, argv);
  // LibTorch's and OpenBLAS's threads both (0: QUARK_THREADS or every core).
  quark::EngineOptions engine;
  engine.intra_op_threads = gptq->parsed() ? f.threads : autoround->parsed() ? r.threads : m.threads;
  for (CLI::App* sub : asymmetric) {
    if (sub->parsed()) engine.intra_op_threads = a.threads;
  }
  quark::InitEngine(engine);
  for (CLI::App* sub : asymmetric) {
    if (!sub->parsed()) continue;
    a.method = sub->get_name();
    return quark::bench::RunAsymmetric(a);
  }
  if (autoround->parsed()) return quark::bench::RunAutoRoundBench(r);
  if (awq->parsed()) return quark::bench::RunAwq(m);
  if (smooth->parsed()) return quark::bench::RunSmoothQuant(m);
  if (dump->parsed()) return quark::bench::RunDumpMlp(m);
  return RunGptq(f);
}

// Forward throughput of one Llama-2-7B-shaped decoder layer on N tokens (default 2048), fp32 and bf16, as
// achieved GFLOP/s and as a ratio to LibTorch's best matmul rate on the layer's linear shapes in the same run
// (bf16: the better of LibTorch's bf16 and float32 GEMMs). The bf16 layer runs in the process's bf16 matmul
// mode (matmul_precision.h; QUARK_BF16_MATMUL=native|f32 overrides the CPU detection). Then the layer's attention
// alone, side by side: CausalAttention's blocks of query rows (checkpoint::ScoreBlockOf) against whole rows of
// every key in chunks of KV heads of 32M score elements (CausalAttention before 2026-12-04).
//
//   decoder_layer_bench [--tokens 2048] [--dtypes f32,bf16] [--shape llama-2-7b] [--reps 1]
//                       [--native-bf16-mm-tokens 128]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/openmp_wait_policy.h"
#include "core/checkpoint/forward_workspace.h"
#include "core/checkpoint/model_layout.h"
#include "core/engine/engine_init.h"
#include "core/runtime/attention.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/matmul_precision.h"
#include "core/runtime/synthetic_model.h"

namespace {

using Clock = std::chrono::steady_clock;
using quark::checkpoint::ModelConfig;

double Seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Row {
  std::string dtype;
  double layer_s;  // best steady-state forward
  double first_s;  // the first (warm-up) forward: includes the bf16 layer's one-time float32 weight copy
  double gflop;
};

at::Tensor RandomLike(std::vector<int64_t> shape, at::ScalarType dtype) { return at::randn(shape).mul_(0.02).to(dtype); }

// LibTorch's own at::linear rate (GFLOP/s) on the layer's seven linear shapes with `tokens` rows, in `dtype`.
double MmGflops(const ModelConfig& config, at::ScalarType dtype, int64_t tokens, int reps) {
  double flop = 0, seconds = 0;
  for (const auto& spec : quark::checkpoint::LayerLinears(config)) {
    flop += 2.0 * tokens * spec.out_features * spec.in_features;
    const at::Tensor a = RandomLike({tokens, spec.in_features}, dtype);
    const at::Tensor w = RandomLike({spec.out_features, spec.in_features}, dtype);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto start = Clock::now();
      (void)at::linear(a, w);
      best = std::min(best, Seconds(start));
    }
    seconds += best;
  }
  return flop / seconds / 1e9;
}

struct AttentionRow {
  double blocks_s;      // CausalAttention: its blocks of KV heads and query rows
  double whole_rows_s;  // every key for every row, KV heads in chunks of 32M score elements
};

AttentionRow MeasureAttention(const ModelConfig& config, at::ScalarType dtype, int64_t tokens, int reps) {
  const int64_t heads = config.num_attention_heads, dim = config.head_dim;
  const int64_t kv_heads = quark::checkpoint::KvHeadsOf(config);
  const at::Tensor q = RandomLike({1, heads, tokens, dim}, dtype).mul_(50);
  const at::Tensor k = RandomLike({1, kv_heads, tokens, dim}, dtype).mul_(50);
  const at::Tensor v = RandomLike({1, kv_heads, tokens, dim}, dtype);
  const at::Tensor mask = quark::runtime::CausalMask(tokens);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  const int64_t rep = heads / kv_heads;
  const quark::checkpoint::ScoreBlock whole_rows{
      std::clamp<int64_t>((int64_t{32} << 20) / (rep * tokens * tokens), 1, kv_heads), tokens};
  auto best_of = [&](auto&& run) {
    (void)run();  // warm-up
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto start = Clock::now();
      (void)run();
      best = std::min(best, Seconds(start));
    }
    return best;
  };
  AttentionRow row;
  row.blocks_s = best_of([&] { return quark::runtime::CausalAttention(q, k, v, mask, scale); });
  row.whole_rows_s =
      best_of([&] { return quark::runtime::CausalAttentionInBlocks(q, k, v, mask, scale, 0, whole_rows); });
  return row;
}

Row MeasureLayer(const ModelConfig& config, at::ScalarType dtype, const std::string& dtype_name, int64_t tokens, int reps) {
  quark::runtime::TensorMapWeightSource weights;
  const std::string prefix = quark::checkpoint::LayerPrefix(config, 0);
  for (const auto& spec : quark::checkpoint::LayerLinears(config)) {
    weights.Set(prefix + spec.relative_name + ".weight", RandomLike({spec.out_features, spec.in_features}, dtype));
  }
  for (const auto& norm : quark::checkpoint::LayerNormTensors(config, 0)) weights.Set(norm.name, at::ones(norm.shape, dtype));
  auto layer = quark::runtime::LlamaDecoderLayer::Load(config, 0, weights, dtype).value();
  quark::runtime::LayerContext context;
  context.seq_len = tokens;
  context.mask = quark::runtime::CausalMask(tokens);
  quark::runtime::RopeTables(config, tokens, dtype, &context.cos, &context.sin);
  const at::Tensor x = at::randn({1, tokens, config.hidden_size}).to(dtype);
  const int64_t warm_tokens = std::min<int64_t>(64, tokens);  // warm-up: allocator, BLAS/oneDNN set-up, weight copy
  quark::runtime::LayerContext warm;
  warm.mask = quark::runtime::CausalMask(warm_tokens);
  quark::runtime::RopeTables(config, warm_tokens, dtype, &warm.cos, &warm.sin);
  const auto first = Clock::now();
  (void)layer->forward(x.narrow(1, 0, warm_tokens).contiguous(), warm);
  const double first_s = Seconds(first);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    (void)layer->forward(x, context);
    best = std::min(best, Seconds(start));
  }
  double linear_flop = 0;
  for (const auto& spec : quark::checkpoint::LayerLinears(config)) linear_flop += 2.0 * tokens * spec.out_features * spec.in_features;
  // Attention: QK^T and PV over the causal blocks' keys (the masked keys after each block's last row are skipped).
  const double attention_flop = 4.0 * config.head_dim *
                                quark::checkpoint::CausalScoreElements(1, config.num_attention_heads,
                                                                       quark::checkpoint::KvHeadsOf(config), tokens);
  return {dtype_name, best, first_s, (linear_flop + attention_flop) / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  int64_t tokens = 2048, native_mm_tokens = 128;
  int reps = 1;
  std::string dtypes = "f32,bf16", shape = "llama-2-7b";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dtypes")) dtypes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--shape")) shape = argv[i + 1];
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--native-bf16-mm-tokens")) native_mm_tokens = std::stoll(argv[i + 1]);
  }
  auto config = quark::runtime::SyntheticConfig("llama", shape, "f32");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const bool bf16_in_f32 = quark::runtime::ActiveBf16Matmul() == quark::runtime::Bf16Matmul::kFloat32;
  std::printf("decoder layer %s, %lld tokens, %d threads, best of %d; bf16 products computed in %s\n", shape.c_str(),
              static_cast<long long>(tokens), quark::EngineThreads(), reps, bf16_in_f32 ? "float32" : "bf16 (native)");
  // The ratio's denominator is LibTorch's best GEMM rate for the row's dtype on the same shapes: for bf16 the
  // better of its bf16 and its float32 at::linear, so a slow bf16 GEMM cannot flatter the bf16 layer. The bf16
  // GEMM is timed on fewer rows (--native-bf16-mm-tokens): where it is a scalar fallback its rate barely
  // depends on the row count (1.0-1.4 GFLOP/s at 32-512 rows here), and at 2048 rows the seven products would
  // take ~10 minutes.
  // Timed before and after the layers, the best kept: on a shared machine a GEMM timed during someone else's
  // build would otherwise understate the denominator and flatter the ratio.
  double f32_mm = MmGflops(*config, at::kFloat, tokens, reps);
  std::vector<Row> rows;
  std::vector<AttentionRow> attention;
  std::vector<double> bf16_mm;
  for (const std::string name : {std::string("f32"), std::string("bf16")}) {
    if (dtypes.find(name) == std::string::npos) continue;
    const bool bf16 = name == "bf16";
    rows.push_back(MeasureLayer(*config, bf16 ? at::kBFloat16 : at::kFloat, name, tokens, reps));
    attention.push_back(MeasureAttention(*config, bf16 ? at::kBFloat16 : at::kFloat, tokens, reps));
    bf16_mm.push_back(bf16 ? MmGflops(*config, at::kBFloat16, std::min(tokens, native_mm_tokens), 1) : 0);
  }
  f32_mm = std::max(f32_mm, MmGflops(*config, at::kFloat, tokens, reps));
  std::printf("%-6s %10s %10s %10s %10s %14s %15s %8s\n", "dtype", "layer_s", "first_s", "GFLOP", "GFLOP/s",
              "f32 mm GFLOP/s", "bf16 mm GFLOP/s", "ratio");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const double achieved = row.gflop / row.layer_s;
    char bf16_column[32] = "-";
    if (row.dtype == "bf16") {
      std::snprintf(bf16_column, sizeof(bf16_column), "%.1f@%lld", bf16_mm[i], static_cast<long long>(std::min(tokens, native_mm_tokens)));
    }
    std::printf("%-6s %10.3f %10.3f %10.1f %10.1f %14.1f %15s %8.2f\n", row.dtype.c_str(), row.layer_s, row.first_s,
                row.gflop, achieved, f32_mm, bf16_column, achieved / std::max(f32_mm, bf16_mm[i]));
  }
  const quark::checkpoint::ScoreBlock block =
      quark::checkpoint::ScoreBlockOf(1, config->num_attention_heads, quark::checkpoint::KvHeadsOf(*config), tokens);
  std::printf("\nattention alone: blocks of %lld KV heads x %lld rows (keys up to each block's last row) against whole "
              "rows in 32M-element chunks of KV heads\n",
              static_cast<long long>(block.kv_heads), static_cast<long long>(block.rows));
  std::printf("%-6s %10s %14s %8s\n", "dtype", "blocks_s", "whole_rows_s", "speedup");
  for (size_t i = 0; i < rows.size(); ++i) {
    std::printf("%-6s %10.3f %14.3f %8.2f\n", rows[i].dtype.c_str(), attention[i].blocks_s, attention[i].whole_rows_s,
                attention[i].whole_rows_s / attention[i].blocks_s);
  }
  return 0;
}

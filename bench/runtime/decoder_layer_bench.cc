// Forward throughput of one Llama-2-7B-shaped decoder layer on N tokens (default 2048), fp32 and bf16, as
// achieved GFLOP/s and as a ratio to LibTorch's own matmul rate on the layer's linear shapes in the same run.
//
//   decoder_layer_bench [--tokens 2048] [--dtypes f32,bf16] [--shape llama-2-7b] [--reps 1]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/checkpoint/model_layout.h"
#include "core/engine/engine_init.h"
#include "core/runtime/attention.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/synthetic_model.h"

namespace {

using Clock = std::chrono::steady_clock;
using quark::checkpoint::ModelConfig;

double Seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Row {
  std::string dtype;
  double layer_s, gflop, mm_gflops;
};

Row Measure(const ModelConfig& config, at::ScalarType dtype, const std::string& dtype_name, int64_t tokens, int reps) {
  quark::runtime::TensorMapWeightSource weights;
  const std::string prefix = quark::checkpoint::LayerPrefix(config, 0);
  for (const auto& spec : quark::checkpoint::LayerLinears(config)) {
    weights.Set(prefix + spec.relative_name + ".weight", at::randn({spec.out_features, spec.in_features}).mul_(0.02).to(dtype));
  }
  for (const auto& norm : quark::checkpoint::LayerNormTensors(config, 0)) weights.Set(norm.name, at::ones(norm.shape, dtype));
  auto layer = quark::runtime::LlamaDecoderLayer::Load(config, 0, weights, dtype).value();
  quark::runtime::LayerContext context;
  context.seq_len = tokens;
  context.mask = quark::runtime::CausalMask(tokens);
  quark::runtime::RopeTables(config, tokens, dtype, &context.cos, &context.sin);
  const at::Tensor x = at::randn({1, tokens, config.hidden_size}).to(dtype);
  const int64_t warm_tokens = std::min<int64_t>(64, tokens);  // warm-up: allocator, BLAS/oneDNN set-up
  quark::runtime::LayerContext warm;
  warm.mask = quark::runtime::CausalMask(warm_tokens);
  quark::runtime::RopeTables(config, warm_tokens, dtype, &warm.cos, &warm.sin);
  (void)layer->forward(x.narrow(1, 0, warm_tokens).contiguous(), warm);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    (void)layer->forward(x, context);
    best = std::min(best, Seconds(start));
  }
  double linear_flop = 0, mm_s = 0;
  for (const auto& spec : quark::checkpoint::LayerLinears(config)) {
    const double flop = 2.0 * tokens * spec.out_features * spec.in_features;
    linear_flop += flop;
    const at::Tensor a = at::randn({tokens, spec.in_features}).to(dtype);
    const at::Tensor w = at::randn({spec.out_features, spec.in_features}).to(dtype);
    double mm_best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto start = Clock::now();
      (void)at::linear(a, w);
      mm_best = std::min(mm_best, Seconds(start));
    }
    mm_s += mm_best;
  }
  // Attention: QK^T and PV over the full square (the runtime does not skip the masked half).
  const double attention_flop = 4.0 * tokens * tokens * config.num_attention_heads * config.head_dim;
  return {dtype_name, best, (linear_flop + attention_flop) / 1e9, linear_flop / mm_s / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  quark::InitEngine();
  int64_t tokens = 2048;
  int reps = 1;
  std::string dtypes = "f32,bf16", shape = "llama-2-7b";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--tokens")) tokens = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dtypes")) dtypes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--shape")) shape = argv[i + 1];
    else if (!std::strcmp(argv[i], "--reps")) reps = std::stoi(argv[i + 1]);
  }
  auto config = quark::runtime::SyntheticConfig("llama", shape, "f32");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  std::printf("decoder layer %s, %lld tokens, %d threads, best of %d\n", shape.c_str(), static_cast<long long>(tokens),
              quark::EngineThreads(), reps);
  std::printf("%-6s %10s %10s %12s %14s %8s\n", "dtype", "layer_s", "GFLOP", "GFLOP/s", "mm GFLOP/s", "ratio");
  for (const std::string name : {std::string("f32"), std::string("bf16")}) {
    if (dtypes.find(name) == std::string::npos) continue;
    const Row row = Measure(*config, name == "f32" ? at::kFloat : at::kBFloat16, name, tokens, reps);
    const double achieved = row.gflop / row.layer_s;
    std::printf("%-6s %10.3f %10.1f %12.1f %14.1f %8.2f\n", row.dtype.c_str(), row.layer_s, row.gflop, achieved,
                row.mm_gflops, achieved / row.mm_gflops);
    std::fflush(stdout);
  }
  return 0;
}

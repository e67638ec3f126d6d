// Peak memory and wall time of a layer-streamed perplexity evaluation of a model folder (e.g. a synthetic
// Llama-2-7B made by `quark make-model --arch llama --shape llama-2-7b --dtype bf16 --out DIR`).
//
//   eval_memory_bench --model DIR [--tokens 2048] [--dtype f32|bf16] [--text FILE]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/base/openmp_wait_policy.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/engine/engine_init.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"

namespace {

// VmHWM (peak resident set) in MiB, from /proc/self/status.
double PeakRssMiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

double RssMiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  quark::EnsurePassiveOpenMpWaits();  // OpenMP's idle threads sleep, as in quark and quark-worker
  quark::InitEngine();
  std::string model, text, dtype = "f32";
  int64_t tokens = 2048;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!std::strcmp(argv[i], "--tokens")) tokens = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
    else if (!std::strcmp(argv[i], "--text")) text = argv[i + 1];
  }
  if (model.empty()) {
    std::fprintf(stderr, "usage: eval_memory_bench --model DIR [--tokens N] [--dtype f32|bf16] [--text FILE]\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  quark::runtime::StreamerOptions options;
  options.compute_dtype = dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  auto streamer = quark::runtime::LayerStreamer::Open(model, options);
  if (!streamer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(streamer.status().message()).c_str());
    return 1;
  }
  std::vector<int64_t> ids;
  const auto& config = (*streamer)->config();
  if (!text.empty()) {
    auto tokenizer = quark::runtime::Tokenizer::Open(model, config.bos_token_id, config.eos_token_id);
    auto content = quark::runtime::ReadTextFile(text);
    if (tokenizer.ok() && content.ok()) ids = (*tokenizer)->EncodeWithBos(content->substr(0, 40 * tokens)).value();
  }
  for (int64_t i = static_cast<int64_t>(ids.size()); i < tokens; ++i) ids.push_back((i * 7919 + 13) % config.vocab_size);
  ids.resize(tokens);
  quark::runtime::PerplexityOptions ppl;
  ppl.seq_len = tokens;
  ppl.max_windows = 1;
  auto last = std::chrono::steady_clock::now();
  ppl.hooks.after = [&](int64_t index, quark::runtime::DecoderLayer&, const std::vector<at::Tensor>&,
                        const std::vector<at::Tensor>&) {
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "layer %3lld  %6.2f s  rss %7.0f MiB  peak %7.0f MiB\n", static_cast<long long>(index),
                 std::chrono::duration<double>(now - last).count(), RssMiB(), PeakRssMiB());
    last = now;
    return absl::OkStatus();
  };
  auto result = quark::runtime::EvaluatePerplexity(**streamer, ids, ppl);
  if (!result.ok()) {
    std::fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto reader = quark::checkpoint::CheckpointReader::Open(model);
  const double gib = reader.ok() ? (*reader)->TotalBytes() / double(1ull << 30) : 0;
  std::printf("%-10s %8s %6s %8s %10s %12s %10s\n", "model_GiB", "tokens", "dtype", "wall_s", "mean_nll", "peak_rss_MiB",
              "threads");
  std::printf("%-10.2f %8lld %6s %8.1f %10.4f %12.0f %10d\n", gib, static_cast<long long>(tokens), dtype.c_str(), wall,
              result->mean_nll, PeakRssMiB(), quark::EngineThreads());
  return 0;
}

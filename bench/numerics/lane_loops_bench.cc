// lane_loops_bench: cycles per element of the bfloat16 lane loops on one core, with the data in L1 (one 512-element
// chunk, the size the kernels hand to a loop, run over and over), for the baseline table (generic fused loops
// compiled for any x86-64) and the table this CPU runs (the hand-written AVX2 loops where it has AVX2). It shows the
// compute cost alone, apart from memory; numerics_bench measures whole tensors. Cycles assume the clock given as the
// first argument (GHz).
// Usage: lane_loops_bench [GHz, default 3.0] [repetitions, default 200000]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "kernels/cpu/lane_table.h"

namespace {

using quark::kernels::Bf16LaneTable;
using quark::kernels::GridArgs;

constexpr int64_t kChunk = 512;

struct Row {
  const char* name;
  std::function<void(const Bf16LaneTable&, const uint16_t*, uint16_t*)> run;
};

}  // namespace

int main(int argc, char** argv) {
  const double ghz = argc > 1 ? std::atof(argv[1]) : 3.0;
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 200000;
  const auto& base = quark::kernels::BaseLaneTable();
  const auto& fast = quark::kernels::LaneOpsForThisCpu();

  // Weights-like data: normal with std 0.02, as bfloat16.
  std::vector<float> f(kChunk);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (float& v : f) v = normal(rng);
  std::vector<uint16_t> x(kChunk), y(kChunk);
  base.store_bf16(f.data(), x.data(), kChunk);

  const float s = 0.02f * 4 / 127, inv = 1.0f / s;
  const int64_t blocks = kChunk / 32;
  std::vector<float> group_s(kChunk / 128, s), group_inv(kChunk / 128, inv), group_z(kChunk / 128, 8.0f);
  std::vector<float> mx_inv(blocks, 1024.0f), mx_s(blocks, 1.0f / 1024.0f), amax(blocks);
  const GridArgs fp8{3, -6, 448.0f};
  const std::vector<Row> rows = {
      {"int8 per-channel", [&](auto& t, auto* in, auto* out) { t.affine_run[0][0](in, out, kChunk, s, inv, 0.0f, -128, 127); }},
      {"uint8 asym", [&](auto& t, auto* in, auto* out) { t.affine_run[0][0](in, out, kChunk, s, inv, 128.0f, 0, 255); }},
      {"uint4 group 128", [&](auto& t, auto* in, auto* out) {
         t.affine_groups[0][0](in, out, kChunk, 128, group_s.data(), group_inv.data(), group_z.data(), 0, 15);
       }},
      {"fp8_e4m3 per-channel", [&](auto& t, auto* in, auto* out) { t.float_run(in, out, kChunk, s, fp8); }},
      {"mxfp8_e4m3", [&](auto& t, auto* in, auto* out) { t.mx_grid(in, out, kChunk, mx_inv.data(), mx_s.data(), fp8); }},
      {"mxint8", [&](auto& t, auto* in, auto* out) { t.mx_int[0](in, out, kChunk, mx_inv.data(), mx_s.data()); }},
      {"block amax", [&](auto& t, auto* in, auto*) { t.block_amax(in, kChunk, amax.data()); }},
  };

  auto cycles_per_element = [&](const Row& row, const Bf16LaneTable& t) {
    double best = 1e30;
    for (int trial = 0; trial < 3; ++trial) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) row.run(t, x.data(), y.data());
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best * ghz * 1e9 / (static_cast<double>(reps) * kChunk);
  };
  std::printf("bfloat16 lane loops, %lld elements in L1, cycles per element at %.2f GHz (best of 3)\n",
              static_cast<long long>(kChunk), ghz);
  std::printf("%-22s %10s %10s\n", "loop", "baseline", "this CPU");
  for (const Row& row : rows) {
    std::printf("%-22s %10.3f %10.3f\n", row.name, cycles_per_element(row, base.bf16), cycles_per_element(row, fast.bf16));
  }
  return 0;
}

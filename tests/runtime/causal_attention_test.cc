// CausalAttention's blocks of KV heads and query rows (each block scoring only the keys up to its last row) against
// every head's whole score matrix computed in float64: for blocks of every shape, with the masks the models use, with
// Gemma 2's softcap, through autograd, and in the default blocks of a sample long enough to need several.
#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include "core/checkpoint/forward_workspace.h"
#include "core/runtime/attention.h"
#include "core/runtime/llama4_attention.h"

namespace quark::runtime {
namespace {

using checkpoint::ScoreBlock;

// q [B, H, T, D], k and v [B, KV, T, D] -> [B, T, H * D] in float64, one head's [T, T] scores at a time.
at::Tensor WholeMatrixAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                                double scale, double softcap) {
  const int64_t batch = q.size(0), heads = q.size(1), seq = q.size(2), dim = q.size(3);
  const int64_t rep = heads / k.size(1);
  std::vector<at::Tensor> per_head;
  for (int64_t h = 0; h < heads; ++h) {
    const at::Tensor qh = q.select(1, h).to(at::kDouble);
    const at::Tensor kh = k.select(1, h / rep).to(at::kDouble), vh = v.select(1, h / rep).to(at::kDouble);
    at::Tensor scores = at::matmul(qh, kh.transpose(-1, -2)) * scale;  // [B, T, T]
    if (softcap > 0) scores = at::tanh(scores / softcap) * softcap;
    per_head.push_back(at::matmul(at::softmax(scores + mask.to(at::kDouble), -1), vh));  // [B, T, D]
  }
  return at::stack(per_head, 2).reshape({batch, seq, heads * dim});
}

double MaxAbsDifference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

struct Inputs {
  at::Tensor q, k, v;
};

Inputs RandomInputs(int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq, int64_t dim, uint64_t seed) {
  at::manual_seed(seed);
  return {at::randn({batch, heads, seq, dim}), at::randn({batch, kv_heads, seq, dim}),
          at::randn({batch, kv_heads, seq, dim})};
}

TEST(CausalAttentionTest, BlocksOfEveryShapeEqualTheWholeScoreMatrix) {
  constexpr int64_t kSeq = 37;
  const Inputs in = RandomInputs(2, 4, 2, kSeq, 8, 11);
  const std::vector<std::pair<const char*, at::Tensor>> masks = {
      {"causal", CausalMask(kSeq)}, {"window 5", CausalMask(kSeq, 5)}, {"Llama 4 chunks of 8", ChunkedCausalMask(kSeq, 8)}};
  const std::vector<ScoreBlock> blocks = {{1, 1}, {1, 5}, {2, 8}, {2, 36}, {1, kSeq}, {2, kSeq}, {4, 100}};
  for (const auto& [name, mask] : masks) {
    for (const double softcap : {0.0, 2.5}) {
      const at::Tensor expected = WholeMatrixAttention(in.q, in.k, in.v, mask, 0.35, softcap);
      for (const ScoreBlock& block : blocks) {
        const at::Tensor out = CausalAttentionInBlocks(in.q, in.k, in.v, mask, 0.35, softcap, block);
        ASSERT_EQ(out.sizes(), expected.sizes());
        EXPECT_LT(MaxAbsDifference(out, expected), 1e-5)
            << name << ", softcap " << softcap << ", blocks of " << block.kv_heads << " KV heads x " << block.rows
            << " rows";
      }
    }
  }
}

TEST(CausalAttentionTest, GradientsFlowThroughEveryBlock) {
  const Inputs in = RandomInputs(1, 4, 2, 23, 8, 12);
  const at::Tensor mask = CausalMask(23);
  const at::Tensor weights = at::randn({1, 23, 32});
  std::vector<at::Tensor> grads[2];
  for (int path = 0; path < 2; ++path) {
    const at::Tensor q = in.q.clone().to(path == 0 ? at::kFloat : at::kDouble).requires_grad_(true);
    const at::Tensor k = in.k.clone().to(q.scalar_type()).requires_grad_(true);
    const at::Tensor v = in.v.clone().to(q.scalar_type()).requires_grad_(true);
    const at::Tensor out = path == 0 ? CausalAttentionInBlocks(q, k, v, mask, 0.35, 0, {1, 6})
                                     : WholeMatrixAttention(q, k, v, mask, 0.35, 0);
    (out * weights.to(out.scalar_type())).sum().backward();
    grads[path] = {q.grad(), k.grad(), v.grad()};
  }
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(grads[0][i].defined()) << "input " << i;
    EXPECT_LT(MaxAbsDifference(grads[0][i], grads[1][i]), 1e-4) << "input " << i;
  }
}

TEST(CausalAttentionTest, BfloatSixteenBlocksAgreeWithFloat32) {
  const Inputs in = RandomInputs(1, 4, 1, 29, 16, 13);
  const at::Tensor mask = CausalMask(29, 9);
  const at::Tensor expected = WholeMatrixAttention(in.q, in.k, in.v, mask, 0.25, 0);
  const at::Tensor out = CausalAttentionInBlocks(in.q.to(at::kBFloat16), in.k.to(at::kBFloat16),
                                                 in.v.to(at::kBFloat16), mask, 0.25, 0, {1, 4});
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_LT(MaxAbsDifference(out, expected), 3e-2);
}

// A sample long enough for ScoreBlockOf to cut it into several blocks of rows (grouped KV heads, as Llama 3's).
TEST(CausalAttentionTest, TheDefaultBlocksOfALongSampleEqualTheWholeScoreMatrix) {
  constexpr int64_t kSeq = 1000;
  const ScoreBlock block = checkpoint::ScoreBlockOf(1, 32, 8, kSeq);
  ASSERT_LT(block.rows, kSeq / 2) << "the sample must take several blocks of rows";
  const Inputs in = RandomInputs(1, 32, 8, kSeq, 16, 14);
  const at::Tensor mask = CausalMask(kSeq);
  EXPECT_LT(MaxAbsDifference(CausalAttention(in.q, in.k, in.v, mask, 0.25), WholeMatrixAttention(in.q, in.k, in.v, mask, 0.25, 0)),
            1e-5);
}

TEST(CausalAttentionTest, ScoresCountedForAutogradAreTheBlocksCausalShare) {
  // One block: every row scores every key. Blocks of 128 rows of 2048: (1 + 2 + ... + 16) * 128 * 128 per head.
  EXPECT_EQ(checkpoint::CausalScoreElements(1, 8, 8, 256), 8 * 256 * 256);
  EXPECT_EQ(checkpoint::CausalScoreElements(1, 32, 32, 2048), int64_t{32} * 136 * 128 * 128);
  // A last block shorter than the rest: 1000 rows in blocks of 262, then one of 214 that reads every key.
  ASSERT_EQ(checkpoint::ScoreBlockOf(1, 32, 8, 1000).rows, 262);
  EXPECT_EQ(checkpoint::CausalScoreElements(1, 32, 8, 1000), int64_t{32} * (262 * (262 + 524 + 786) + 214 * 1000));
}

}  // namespace
}  // namespace quark::runtime

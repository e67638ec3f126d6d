#include "core/export/onnx_torch_order.h"

#include <array>
#include <cmath>
#include <optional>
#include <vector>

#include "core/base/strings.h"

namespace quark::exporter::onnx_export {
namespace {

// multi_row_sum's constants: 4 levels of partial sums, each flushed into the next every 2^power rows, power =
// max(4, CeilLog2(rows) / 4) (16 rows for any row count below 2^20); row_sum reads 4 vectors per row (ILP).
constexpr int kLevels = 4;
constexpr int64_t kIlp = 4;

int64_t CeilLog2(int64_t x) {
  if (x <= 2) return 1;
  int64_t bits = 0;
  for (uint64_t v = static_cast<uint64_t>(x) - 1; v != 0; v >>= 1) ++bits;
  return bits;
}

// The order itself, once, over any value type: `Ops` slices ([B, T, ...] axes counted from 0), reshapes (0 copies a
// leading axis, as in ONNX) and adds. A missing value is a zero accumulator: 0 + v = v exactly for v >= 0, so the
// first addition of every chain is left out.
template <class Ops>
typename Ops::Value SumInTorchOrder(Ops& ops, const typename Ops::Value& x, int64_t n, int64_t lanes) {
  using Value = typename Ops::Value;
  using Acc = std::optional<Value>;
  const auto add = [&](const Acc& acc, const Value& v) -> Value { return acc ? ops.Add(*acc, v) : v; };
  // vectorized_inner_sum reads vectors of `lanes`; a row shorter than one vector goes to scalar_inner_sum, which is
  // the same row_sum over single floats.
  const int64_t width = n >= lanes ? lanes : 1;
  const int64_t vectors = n / width, rows = vectors / kIlp;
  std::array<Acc, kIlp> partial;  // row_sum's partial sums, each [B, T, 1, 1, width]
  if (rows > 0) {
    // multi_row_sum over rows of kIlp vectors at once: [B, T, rows, kIlp, width].
    const Value grid = ops.Reshape(ops.Slice(x, 2, 0, rows * kIlp * width), {0, 0, rows, kIlp, width});
    const int64_t power = std::max<int64_t>(4, CeilLog2(rows) / kLevels), step = int64_t{1} << power;
    std::array<Acc, kLevels> acc;
    int64_t i = 0;
    while (i + step <= rows) {
      for (int64_t j = 0; j < step; ++j, ++i) acc[0] = add(acc[0], ops.Slice(grid, 2, i, 1));
      for (int level = 1; level < kLevels; ++level) {
        acc[level] = add(acc[level], *acc[level - 1]);
        acc[level - 1].reset();
        if ((i & ((step - 1) << (level * power))) != 0) break;
      }
    }
    for (; i < rows; ++i) acc[0] = add(acc[0], ops.Slice(grid, 2, i, 1));
    for (int level = 1; level < kLevels; ++level) {
      if (acc[level]) acc[0] = add(acc[0], *acc[level]);
    }
    for (int64_t k = 0; k < kIlp; ++k) partial[k] = ops.Slice(*acc[0], 3, k, 1);
  }
  // row_sum: the vectors left over go to the first partial sum, then the others join it in order.
  for (int64_t v = rows * kIlp; v < vectors; ++v) {
    partial[0] = add(partial[0], ops.Reshape(ops.Slice(x, 2, v * width, width), {0, 0, 1, 1, width}));
  }
  Acc lanes_sum = partial[0];
  for (int64_t k = 1; k < kIlp; ++k) {
    if (partial[k]) lanes_sum = add(lanes_sum, *partial[k]);
  }
  // vectorized_inner_sum: the floats after the last whole vector first, then the vector's lanes in order.
  Acc total;
  for (int64_t k = vectors * width; k < n; ++k) total = add(total, ops.Slice(x, 2, k, 1));
  for (int64_t lane = 0; lane < width; ++lane) {
    total = add(total, ops.Reshape(ops.Slice(*lanes_sum, 4, lane, 1), {0, 0, 1}));
  }
  return *total;
}

struct GraphOps {
  using Value = std::string;
  OnnxGraph& g;
  std::string name;
  Value Slice(const Value& v, int64_t axis, int64_t start, int64_t length) {
    return g.Op("Slice", {v, g.ConstI64({start}), g.ConstI64({start + length}), g.ConstI64({axis})}, name + "_part");
  }
  Value Reshape(const Value& v, const std::vector<int64_t>& dims) {
    return g.Op("Reshape", {v, g.ConstI64(dims)}, name + "_view");
  }
  Value Add(const Value& a, const Value& b) { return g.Op("Add", {a, b}, name + "_acc"); }
};

struct TensorOps {
  using Value = at::Tensor;
  Value Slice(const Value& v, int64_t axis, int64_t start, int64_t length) { return v.narrow(axis, start, length); }
  Value Reshape(const Value& v, std::vector<int64_t> dims) {
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0) dims[i] = v.size(static_cast<int64_t>(i));
    }
    return v.reshape(dims);
  }
  Value Add(const Value& a, const Value& b) { return a + b; }
};

// Values >= 0 of many magnitudes, no two alike (a sum order shows in the last bits), with no random generator touched.
at::Tensor ProbeRows(int64_t n) {
  std::vector<float> v(static_cast<size_t>(3 * n));
  for (size_t i = 0; i < v.size(); ++i) {
    const double frac = std::fmod(static_cast<double>(i + 1) * 0.6180339887498949, 1.0);
    v[i] = static_cast<float>(frac * std::ldexp(1.0, static_cast<int>(i % 11) - 5));
  }
  return at::tensor(v, at::kFloat).view({1, 3, n});
}

int64_t ProbeLanes() {
  for (int64_t lanes : {8, 16}) {
    bool all = true;
    for (int64_t n : {1, 17, 300, 5000}) {
      const at::Tensor x = ProbeRows(n);
      all = all && at::equal(x.sum(-1, /*keepdim=*/true), TorchOrderSumRef(x, lanes));
    }
    if (all) return lanes;
  }
  return 0;
}

}  // namespace

std::string TorchOrderSum(OnnxGraph& g, const std::string& x, int64_t n, int64_t lanes, const std::string& name) {
  GraphOps ops{g, name};
  return SumInTorchOrder(ops, x, n, lanes);
}

at::Tensor TorchOrderSumRef(const at::Tensor& x, int64_t lanes) {
  TensorOps ops;
  const at::Tensor x3 = x.reshape({1, -1, x.size(-1)});
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = 1;
  return SumInTorchOrder(ops, x3, x.size(-1), lanes).reshape(shape);
}

int64_t EngineSumLanes() {
  static const int64_t lanes = ProbeLanes();  // magic static: probed once, thread-safe
  return lanes;
}

std::string RmsNormNodes(OnnxGraph& g, const std::string& x, const std::string& weight, int64_t n, float eps,
                         const std::string& name) {
  const std::string sq = g.Op("Mul", {x, x}, name + "_sq");
  const int64_t lanes = EngineSumLanes();
  // at::mean is at::sum divided by the count (ReduceOps.cpp, mean_out on CPU).
  const std::string mean =
      lanes > 0 ? g.Op("Div", {TorchOrderSum(g, sq, n, lanes, name + "_sum"), g.ConstF32(static_cast<float>(n))},
                       name + "_mean_sq")
                : g.Reduce("ReduceMean", sq, {-1}, true, name + "_mean_sq");
  const std::string rstd =
      g.Op("Reciprocal", {g.Op("Sqrt", {g.Op("Add", {mean, g.ConstF32(eps)}, name + "_var_eps")}, name + "_std")},
           name + "_rstd");
  return g.Op("Mul", {weight, g.Op("Mul", {x, rstd}, name + "_normed")}, name + "_out");
}

std::string SiluNodes(OnnxGraph& g, const std::string& x, const std::string& name) {
  const std::string e = g.Op("Exp", {g.Op("Neg", {x}, name + "_neg")}, name + "_exp");
  return g.Op("Div", {x, g.Op("Add", {g.ConstF32(1.0f), e}, name + "_denominator")}, name + "_silu");
}

}  // namespace quark::exporter::onnx_export

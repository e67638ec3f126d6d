#include "core/algorithms/linalg.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>

#include "core/base/blas_threads.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "kernels/cpu/lane_table.h"

#ifdef QUARK_HAVE_LAPACK
// Fortran BLAS/LAPACK entry points (column-major; every argument by pointer; hidden string lengths last).
extern "C" {
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha, const float* a,
            const int* lda, const float* beta, float* c, const int* ldc, size_t uplo_len, size_t trans_len);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t uplo_len);
void spotri_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t uplo_len);
void strtri_(const char* uplo, const char* diag, const int* n, float* a, const int* lda, int* info, size_t uplo_len,
             size_t diag_len);
}
#endif

namespace quark::algorithms {

void AddGram(at::Tensor& sum, const at::Tensor& x, double beta) {
  const at::Tensor a = x.contiguous();
#ifdef QUARK_HAVE_LAPACK
  // Row-major x [T, K] is column-major x^T [K, T]: C := x^T x is syrk(trans 'N') on it. Column-major 'U' is the
  // row-major lower triangle.
  const int n = static_cast<int>(a.size(1)), k = static_cast<int>(a.size(0));
  const float alpha = 1.0f, c_beta = static_cast<float>(beta);
  if (n > 0 && k > 0) {
    ssyrk_("U", "N", &n, &k, &alpha, a.data_ptr<float>(), &n, &c_beta, sum.data_ptr<float>(), &n, 1, 1);
  }
#else
  sum.addmm_(a.t(), a, beta, /*alpha=*/1);
#endif
}

bool GramHasThreadedGemmBits(int64_t k, int64_t tokens) {
#ifdef QUARK_HAVE_LAPACK
  // OpenBLAS's sgemm: products of at most 100^3 multiply-adds go to its small-matrix kernel, which sums without
  // blocking; above that, more than one thread runs the threaded driver (interface/gemm.c).
  constexpr double kSmallGemm = 100.0 * 100.0 * 100.0;
  const double multiply_adds = static_cast<double>(k) * static_cast<double>(k) * static_cast<double>(tokens);
  return BlasThreads() > 1 && multiply_adds > kSmallGemm;
#else
  (void)k;
  (void)tokens;
  return false;
#endif
}

namespace {

// Square tiles of the symmetric completion: a tile and its transposed partner stay in L1 while one is written.
constexpr int64_t kTile = 64;
// The side of the blocks transposed in vector registers.
constexpr int64_t kBlock = 8;

}  // namespace

void TransposeBlock(const float* src, int64_t src_stride, int64_t rows, int64_t columns, float* dst,
                    int64_t dst_stride) {
  const auto transpose8x8 = kernels::LaneOpsForThisCpu().transpose8x8;
  const auto piece = [&](int64_t rb, int64_t cb) {
    if (rb + kBlock <= rows && cb + kBlock <= columns) {
      const float* from[kBlock];
      float* to[kBlock];
      for (int64_t k = 0; k < kBlock; ++k) {
        from[k] = src + (rb + k) * src_stride + cb;
        to[k] = dst + (cb + k) * dst_stride + rb;
      }
      transpose8x8(from, to, /*only_changed=*/false);
      return;
    }
    for (int64_t r = rb; r < std::min(rows, rb + kBlock); ++r) {
      for (int64_t c = cb; c < std::min(columns, cb + kBlock); ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
    }
  };
  // The inner loop walks down the source's rows (and along the destination's) or along the source's rows (and down
  // the destination's): the walk down the side that spans fewer pages, so that it stays within the TLB's reach
  // (GPTQ's blocks are 128 columns of thousands of rows K floats apart).
  if (rows * src_stride <= columns * dst_stride) {
    for (int64_t cb = 0; cb < columns; cb += kBlock) {
      for (int64_t rb = 0; rb < rows; rb += kBlock) piece(rb, cb);
    }
  } else {
    for (int64_t rb = 0; rb < rows; rb += kBlock) {
      for (int64_t cb = 0; cb < columns; cb += kBlock) piece(rb, cb);
    }
  }
}

namespace {

// out[c] = row[column[c]] for c < count: one row, which stays in L1 while it is gathered from.
void GatherRow(const float* row, const int64_t* column, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c) out[c] = row[column[c]];
}

}  // namespace

at::Tensor GatheredColumns(const at::Tensor& a, const at::Tensor& index) {
  const at::Tensor src = a.contiguous();
  const int64_t rows = src.size(0), in_columns = src.size(1), out_columns = index.numel();
  at::Tensor out = at::empty({rows, out_columns}, src.options());
  const float* in = src.data_ptr<float>();
  const int64_t* column = index.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) GatherRow(in + r * in_columns, column, out_columns, o + r * out_columns);
  });
  return out;
}

void PermuteColumnsInPlace(at::Tensor& a, const at::Tensor& perm) {
  const int64_t rows = a.size(0), columns = a.size(1);
  const int64_t* column = perm.data_ptr<int64_t>();
  float* p = a.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(columns));  // the row as it was, gathered back over itself
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(row.data(), p + r * columns, sizeof(float) * static_cast<size_t>(columns));
      GatherRow(row.data(), column, columns, p + r * columns);
    }
  });
}

void CompleteSymmetric(at::Tensor& a, Triangle from, Writes writes) {
  const int64_t n = a.size(0);
  float* p = a.data_ptr<float>();
  const bool lower = from == Triangle::kLower;
  // A matrix that is already symmetric (a Hessian from HessianAccumulator reaching the factorisation) is read, not
  // rewritten; a triangle that was never written is written without being read first (reading a fresh page maps
  // the zero page, and the write then faults again).
  const bool only_changed = writes == Writes::kOnlyDiffering;
  const auto transpose8x8 = kernels::LaneOpsForThisCpu().transpose8x8;
  // Element (r, c) below the diagonal and its mirror (c, r), as bits (-0 and +0 differ; a NaN is copied as it is).
  const auto mirror = [&](int64_t r, int64_t c) {
    float* to = lower ? p + c * n + r : p + r * n + c;
    const float* source = lower ? p + r * n + c : p + c * n + r;
    if (!only_changed || std::memcmp(to, source, sizeof(float)) != 0) std::memcpy(to, source, sizeof(float));
  };
  const auto complete_tile_row = [&](int64_t tile) {
    const int64_t r0 = tile * kTile, r1 = std::min(n, r0 + kTile);
    for (int64_t c0 = 0; c0 <= r0; c0 += kTile) {
      const int64_t c1 = std::min(n, c0 + kTile);
      for (int64_t rb = r0; rb < r1; rb += kBlock) {
        for (int64_t cb = c0; cb < std::min(c1, rb + kBlock); cb += kBlock) {
          if (cb + kBlock <= rb && rb + kBlock <= r1 && cb + kBlock <= c1) {  // wholly below the diagonal
            const float* source[kBlock];
            float* to[kBlock];
            for (int64_t k = 0; k < kBlock; ++k) {
              source[k] = lower ? p + (rb + k) * n + cb : p + (cb + k) * n + rb;
              to[k] = lower ? p + (cb + k) * n + rb : p + (rb + k) * n + cb;
            }
            transpose8x8(source, to, only_changed);
            continue;
          }
          for (int64_t r = rb; r < std::min(r1, rb + kBlock); ++r) {
            for (int64_t c = cb; c < std::min({c1, r, cb + kBlock}); ++c) mirror(r, c);
          }
        }
      }
    }
  };
  // Tile row t has t + 1 tiles: the rows are taken in pairs (t, last - t) of equal work, so that threads given
  // consecutive pairs get the same share.
  const int64_t tile_rows = (n + kTile - 1) / kTile;
  at::parallel_for(0, (tile_rows + 1) / 2, 1, [&](int64_t begin, int64_t end) {
    for (int64_t pair = begin; pair < end; ++pair) {
      complete_tile_row(pair);
      if (tile_rows - 1 - pair != pair) complete_tile_row(tile_rows - 1 - pair);
    }
  });
}

namespace {

absl::Status NotPositiveDefinite(int64_t minor) {
  return absl::FailedPreconditionError(StrCat("Hessian is not positive definite (leading minor ", minor, ")"));
}

}  // namespace

#ifdef QUARK_HAVE_LAPACK
namespace {

// a [n, n] row-major: zeros above the diagonal.
void ZeroStrictUpper(at::Tensor& a) {
  const int64_t n = a.size(0);
  float* p = a.data_ptr<float>();
  at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) std::memset(p + r * n + r + 1, 0, sizeof(float) * (n - r - 1));
  });
}

// a [n, n] row-major, reversed element by element in place: the matrix J a J.
void ReverseInPlace(at::Tensor& a) {
  float* p = a.data_ptr<float>();
  const int64_t total = a.numel();
  at::parallel_for(0, total / 2, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::swap(p[i], p[total - 1 - i]);
  });
}

int Size(const at::Tensor& a) { return static_cast<int>(a.size(0)); }

}  // namespace
#endif

// With LAPACK, both ways hand LAPACK the row-major array of a symmetric matrix as its column-major self and return
// U as the transpose view of an array whose row-major lower triangle holds U^T (upper above the diagonal is zero).
// Everything happens in h's own memory (K x K: 0.5 GB for an 11008-wide input).
absl::StatusOr<at::Tensor> CholeskyStep(at::Tensor& h, bool fast) {
#ifdef QUARK_HAVE_LAPACK
  if (!h.is_contiguous() || h.scalar_type() != at::kFloat) h = h.to(at::kFloat).contiguous();
  // LibTorch's cholesky reads the lower triangle; LAPACK, given the row-major array, reads the upper one. The same
  // numbers once the matrix is symmetric to the bit (ours are: every Hessian here is completed from one triangle).
  CompleteSymmetric(h, Triangle::kLower);
  const at::Tensor diagonal = h.diagonal().clone();
  // The reversed matrix J h J: reversing the whole row-major array reverses both axes.
  if (fast) ReverseInPlace(h);
  // spotrf('L') writes L over the column-major lower triangle (the row-major upper one) and leaves the rest: that
  // rest and the saved diagonal give h back when it is not positive definite.
  const int n = Size(h);
  int info = 0;
  if (n > 0) spotrf_("L", &n, h.data_ptr<float>(), &n, &info, 1);
  if (info != 0) {
    if (fast) {
      ReverseInPlace(h);
      CompleteSymmetric(h, Triangle::kUpper);
    } else {
      CompleteSymmetric(h, Triangle::kLower, Writes::kAll);
    }
    h.diagonal().copy_(diagonal);
    return NotPositiveDefinite(info);
  }
  return std::exchange(h, at::Tensor());
#else
  auto [lower, info] = at::linalg_cholesky_ex(fast ? h.flip({0, 1}).contiguous() : h);
  if (info.item<int>() != 0) return NotPositiveDefinite(info.item<int>());
  h = at::Tensor();
  return lower;
#endif
}

absl::StatusOr<at::Tensor> InverseFactorStep(at::Tensor factor, bool fast) {
  if (fast) {
#ifdef QUARK_HAVE_LAPACK
    // strtri('L') turns the column-major lower L (of J h J) into L^-1; U = J L^-1 J, which reversing the array gives
    // in the column-major upper triangle.
    const int n = Size(factor);
    int info = 0;
    if (n > 0) strtri_("L", "N", &n, factor.data_ptr<float>(), &n, &info, 1, 1);
    if (info != 0) return absl::FailedPreconditionError(StrCat("Cholesky factor is singular at ", info));
    ReverseInPlace(factor);
    ZeroStrictUpper(factor);
    return factor.t();
#else
    const at::Tensor identity = at::eye(factor.size(0), factor.options());
    const at::Tensor inverse = at::linalg_solve_triangular(factor, identity, /*upper=*/false);
    return inverse.flip({0, 1}).contiguous();
#endif
  }
  // Quark's cholesky_inverse then cholesky(upper), each in the memory the step before it leaves.
  QUARK_ASSIGN_OR_RETURN(at::Tensor inverse, CholeskyInverseStep(std::move(factor)));
  return UpperCholeskyStep(std::move(inverse), "inverse Hessian");
}

absl::StatusOr<at::Tensor> CholeskyInverseStep(at::Tensor factor) {
#ifdef QUARK_HAVE_LAPACK
  // spotri('L') on the factor's column-major lower triangle, then the symmetric completion LibTorch makes.
  const int n = Size(factor);
  int info = 0;
  if (n > 0) spotri_("L", &n, factor.data_ptr<float>(), &n, &info, 1);
  if (info != 0) return absl::FailedPreconditionError(StrCat("Cholesky factor is singular at ", info));
  CompleteSymmetric(factor, Triangle::kUpper, Writes::kAll);
  return factor.t();
#else
  return at::cholesky_inverse(factor);
#endif
}

absl::StatusOr<at::Tensor> UpperCholeskyStep(at::Tensor m, const char* what) {
#ifdef QUARK_HAVE_LAPACK
  // LAPACK reads the column-major upper triangle of the array: m's upper triangle when m is a transposed view, its
  // lower one when m is contiguous, which then first takes the upper one's values (LibTorch reads the upper one).
  const bool transposed = !m.is_contiguous();
  at::Tensor a = transposed ? m.t() : m;
  m = at::Tensor();
  if (!a.is_contiguous() || a.scalar_type() != at::kFloat) {
    a = (transposed ? a.t() : a).to(at::kFloat).contiguous();
  } else if (!transposed) {
    CompleteSymmetric(a, Triangle::kUpper);
  }
  // A transposed view's array holds m^T: its column-major upper triangle is m's upper triangle already.
  const int n = Size(a);
  int info = 0;
  if (n > 0) spotrf_("U", &n, a.data_ptr<float>(), &n, &info, 1);
  if (info != 0) {
    return absl::FailedPreconditionError(StrCat(what, " is not positive definite (leading minor ", info, ")"));
  }
  ZeroStrictUpper(a);
  return a.t();
#else
  auto [upper, info] = at::linalg_cholesky_ex(m, /*upper=*/true);
  if (info.item<int>() != 0) {
    return absl::FailedPreconditionError(StrCat(what, " is not positive definite (leading minor ", info.item<int>(),
                                                ")"));
  }
  return upper;
#endif
}

SingleThreadedBlas::SingleThreadedBlas() : previous_(BlasThreads()) {
  if (previous_ > 1) SetBlasThreads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ > 1) SetBlasThreads(previous_);
}

void PermuteSymmetricInPlace(at::Tensor& h, const at::Tensor& perm) {
  PermuteColumnsInPlace(h, perm);
  // Then the rows, along the permutation's cycles: row j takes row perm[j] before that one is overwritten in turn,
  // and the cycle's last row takes the first one's, set aside. Each row moves once.
  const int64_t n = h.size(0);
  const int64_t* p = perm.data_ptr<int64_t>();
  float* a = h.data_ptr<float>();
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(n);
  std::vector<float> first(static_cast<size_t>(n));
  std::vector<bool> placed(static_cast<size_t>(n), false);
  for (int64_t start = 0; start < n; ++start) {
    if (placed[static_cast<size_t>(start)]) continue;
    std::memcpy(first.data(), a + start * n, row_bytes);
    for (int64_t j = start;;) {
      placed[static_cast<size_t>(j)] = true;
      const int64_t from = p[j];
      if (from == start) {
        std::memcpy(a + j * n, first.data(), row_bytes);
        break;
      }
      std::memcpy(a + j * n, a + from * n, row_bytes);
      j = from;
    }
  }
}

void RowMajorInPlace(at::Tensor& a) {
  if (a.is_contiguous()) return;
  at::Tensor array = a.t();  // the row-major array a is the transpose of
  TORCH_CHECK(array.is_contiguous() && array.dim() == 2 && array.size(0) == array.size(1) &&
                  array.scalar_type() == at::kFloat,
              "RowMajorInPlace: expected a square float32 matrix, row-major or a transposed view of one");
  const int64_t n = array.size(0);
  float* p = array.data_ptr<float>();
  // Tile row t swaps its tiles right of the diagonal with their mirrors in tile column t (through one tile's
  // buffer) and transposes its diagonal tile: the tile rows touch disjoint pairs, so they run in parallel.
  const int64_t tiles = (n + kTile - 1) / kTile;
  at::parallel_for(0, tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buffer(static_cast<size_t>(kTile * kTile));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r0 = t * kTile, rows = std::min(kTile, n - r0);
      for (int64_t u = t; u < tiles; ++u) {
        const int64_t c0 = u * kTile, columns = std::min(kTile, n - c0);
        float* upper = p + r0 * n + c0;  // tile (t, u): rows x columns
        float* lower = p + c0 * n + r0;  // tile (u, t): columns x rows
        TransposeBlock(upper, n, rows, columns, buffer.data(), rows);  // (t, u)^T: columns x rows
        if (u != t) TransposeBlock(lower, n, columns, rows, upper, n);
        for (int64_t c = 0; c < columns; ++c) {
          std::memcpy(lower + c * n, buffer.data() + c * rows, sizeof(float) * rows);
        }
      }
    }
  });
  a = array;
}

absl::StatusOr<at::Tensor> UpperCholeskyOfInverse(const at::Tensor& h, bool fast) {
  at::Tensor work = h.to(at::kFloat).clone(at::MemoryFormat::Contiguous);
  auto factor = CholeskyStep(work, fast);
  if (!factor.ok()) return factor.status();
  return InverseFactorStep(*std::move(factor), fast);
}

}  // namespace quark::algorithms

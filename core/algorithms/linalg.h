// The dense linear algebra of the Hessian-based algorithms (GPTQ): Gram-matrix accumulation and the upper Cholesky
// factor of an inverse, on the system LAPACK/BLAS where the build found them (OpenBLAS on Debian), else on
// LibTorch's generic ops. float32 throughout, as Quark computes them.
#pragma once

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace quark::algorithms {

/// sum = beta * sum + x^T x for x [T, K] (float32, any strides), sum [K, K] float32 contiguous; beta 0 ignores what
/// sum held. Only the LOWER triangle of `sum` is maintained (a symmetric rank-k update does half the work of a GEMM);
/// CompleteSymmetric completes it.
void AddGram(at::Tensor& sum, const at::Tensor& x, double beta = 1.0);

/// Whether AddGram's x^T x for x [tokens, k] has, with the BLAS as it is set now, the bits of the GEMM
/// x^T.matmul(x) (Quark's), in half its flops. OpenBLAS's symmetric rank-k update splits the shared dimension into
/// blocks as its threaded GEMM does, whatever its thread count, and both run the same kernel; its single-threaded
/// GEMM (one BLAS thread) splits a remainder of tokens differently, and GEMMs of at most 100^3 multiply-adds take
/// another kernel. False without a system BLAS.
bool GramHasThreadedGemmBits(int64_t k, int64_t tokens);

/// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < columns: one block transposed on the calling
/// thread (8 x 8 pieces through vector registers), bits as they are.
void TransposeBlock(const float* src, int64_t src_stride, int64_t rows, int64_t columns, float* dst,
                    int64_t dst_stride);

/// a[:, index] for a [R, C] float32 and index [C'] int64 (each in [0, C)), rows gathered in parallel.
at::Tensor GatheredColumns(const at::Tensor& a, const at::Tensor& index);
/// a = a[:, perm] in a's own memory, for a [R, C] float32 contiguous and perm [C] int64 a permutation of 0..C-1
/// (each row goes through a buffer of one row): no second R x C array, nor its page faults.
void PermuteColumnsInPlace(at::Tensor& a, const at::Tensor& perm);

enum class Triangle { kLower, kUpper };
/// What the completion writes: every mirrored element (the other triangle was never written, or holds something
/// else), or only those that differ from their mirror (a matrix that is usually symmetric already is only read).
enum class Writes { kAll, kOnlyDiffering };

/// a [K, K] float32 row-major, made symmetric in place from the given triangle (copies only, no arithmetic).
void CompleteSymmetric(at::Tensor& a, Triangle from, Writes writes = Writes::kOnlyDiffering);

/// The upper Cholesky factor of an inverse, U^T U = h^-1 for a symmetric positive definite h [K, K] float32, in two
/// steps so that the caller can release h (or keep it to retry with more damping) between them:
///   CholeskyStep: factors h in its own memory and takes it (h is left undefined); FAILED_PRECONDITION when h is
///   not positive definite, with h left as it was, bit for bit (symmetric; the caller may damp it more and retry).
///   InverseFactorStep: consumes the first step's factor; returns U (zero below the diagonal; with LAPACK a
///   transposed view, U's columns contiguous), or FAILED_PRECONDITION when the inverse is not positive definite
///   either (a NaN the first step let through).
/// Quark's way (fast = false) is what its three LibTorch calls compute, bit for bit on the same BLAS/LAPACK:
/// cholesky(h) -> cholesky_inverse -> cholesky(upper), i.e. spotrf('L'), spotri('L'), the symmetric completion and
/// spotrf('U'), called here directly (LibTorch's copies and masks around them cost more than the factorisations).
/// The fast way is one factorisation and one triangular inverse of the reversed matrix (half the flops, equal up to
/// rounding):
///   J h J = L L^T  =>  h^-1 = (J L^-T J)(J L^-1 J), and J L^-1 J is upper.
absl::StatusOr<at::Tensor> CholeskyStep(at::Tensor& h, bool fast);
absl::StatusOr<at::Tensor> InverseFactorStep(at::Tensor factor, bool fast);

/// Quark's way's two halves of InverseFactorStep, for algorithms that use the inverse itself between them (Qronos):
///   CholeskyInverseStep: LibTorch's cholesky_inverse of CholeskyStep's factor (fast = false) in the factor's own
///   memory: h^-1, symmetric to the bit, as a transposed view (LibTorch's column-major layout, so that every later
///   GEMM is called with the same operands); FAILED_PRECONDITION when the factor is singular.
///   UpperCholeskyStep: LibTorch's cholesky(m, upper=True) in m's own memory, for m [K, K] float32 contiguous or a
///   transposed view of a contiguous array (what CholeskyInverseStep returns, or an elementwise result of it): U, zero
///   below the diagonal, as a transposed view (LibTorch's layout); only m's upper triangle is read, as LibTorch reads
///   it. FAILED_PRECONDITION "`what` is not positive definite (leading minor i)".
absl::StatusOr<at::Tensor> CholeskyInverseStep(at::Tensor factor);
absl::StatusOr<at::Tensor> UpperCholeskyStep(at::Tensor m, const char* what);

/// While alive, OpenBLAS runs each call on the calling thread (its own pool is put back as it was on destruction):
/// for BLAS calls made from several threads at once, each on its own share of the work. No-op with another BLAS.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int previous_ = 0;  // 0: nothing to restore
};

/// h = h[perm][:, perm] in h's own memory, for h [K, K] float32 contiguous and perm [K] int64 a permutation of
/// 0..K-1: no second K x K matrix (0.5 GB for an 11008-wide input), bits as they are.
void PermuteSymmetricInPlace(at::Tensor& h, const at::Tensor& perm);

/// a [K, K] float32, row-major or the transposed view of a row-major array (what the in-place factorisations return),
/// made row-major in its own memory: the array is transposed tile by tile and `a` becomes its row-major view, with the
/// same values, bits as they are. No second K x K array, where `a.contiguous()` would copy (0.5 GB at K = 11008).
void RowMajorInPlace(at::Tensor& a);

/// Both steps on a copy of h (tests and benchmarks).
absl::StatusOr<at::Tensor> UpperCholeskyOfInverse(const at::Tensor& h, bool fast = false);

}  // namespace quark::algorithms

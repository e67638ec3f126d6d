// Hadamard and random orthogonal matrices for the rotation algorithm (R1/R2 of QuaRot and SpinQuant, Quark's
// RotationConfig): every matrix in float64, as Quark computes rotations.
//
// An order n is decomposed as n = k * 2^m with the smallest base order k that one of these constructions gives:
//   - k = 1: Sylvester, H[i][j] = (-1)^popcount(i & j) (n a power of two);
//   - Paley I: k = q + 1, q an odd prime power with q = 3 (mod 4);
//   - Paley II: k = 2 (q + 1), q an odd prime power with q = 1 (mod 4);
//   - tabulated: k = 156 and k = 172, which no Paley construction reaches, by the Goethals-Seidel array on four
//     circulant +-1 sequences of length 39 and 43 (found once by a search over sequences constant on the orbits of
//     a multiplier group; the tests verify them).
// and H = kron(H_k, Sylvester(2^m)). This covers every hidden and intermediate size of current models, e.g. 3584 = 28
// * 128, 5120 = 20 * 256, 11008 = 172 * 64, 13824 = 108 * 128, 18944 = 148 * 128 and 4864 = 76 * 64. The base matrices
// are not Quark's (it tabulates Sloane's), so a rotation equals Quark's only where n is a power of two.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace quark::algorithms {

/// The largest order HadamardMatrix and RotationMatrix build (a float64 matrix of 32 GiB); HasHadamard has no limit.
inline constexpr int64_t kMaxRotationOrder = int64_t{1} << 16;

enum class HadamardConstruction { kSylvester, kPaleyI, kPaleyII, kTabulated };

/// n = base_order * 2^power_of_two; q is the prime power of a Paley construction (0 otherwise).
struct HadamardDecomposition {
  int64_t base_order = 1;
  int power_of_two = 0;
  HadamardConstruction construction = HadamardConstruction::kSylvester;
  int64_t q = 0;
};

/// The decomposition HadamardMatrix(n) uses (the smallest constructible k). INVALID_ARGUMENT when n < 1 or when no
/// Hadamard matrix of order n can exist (n > 2 and not a multiple of 4); NOT_FOUND when n is a multiple of 4 that none
/// of the constructions above reaches (e.g. 92). Both messages name n. Arithmetic only: no matrix is built.
absl::StatusOr<HadamardDecomposition> FindHadamardDecomposition(int64_t n);

/// Whether FindHadamardDecomposition(n) succeeds. Cheap (trial divisions), no matrix built.
bool HasHadamard(int64_t n);

/// The base matrix of order k of a decomposition ([k, k], float64, entries +-1, H H^T = k I). INVALID_ARGUMENT when k
/// is not a base order (1, q + 1, 2 (q + 1), 156 or 172 as above).
absl::StatusOr<at::Tensor> HadamardBaseMatrix(int64_t k);

/// An n x n Hadamard matrix ([n, n], float64, entries +-1, H H^T = n I exactly): kron(base, Sylvester(2^m)). The
/// errors of FindHadamardDecomposition, and INVALID_ARGUMENT naming n above kMaxRotationOrder.
absl::StatusOr<at::Tensor> HadamardMatrix(int64_t n);

/// A seeded random orthogonal matrix ([n, n], float64): Q of the QR decomposition of a standard normal matrix drawn
/// from a CPU generator seeded with `seed`, with the sign fix Q * sign(diag(R)) (as QuaRot/Quark's
/// random_orthogonal_matrix). The same seed gives the same matrix. n <= 0 gives an empty [0, 0] tensor; callers that
/// take n from a request validate it first (RotationMatrix does).
at::Tensor RandomOrthogonal(int64_t n, uint64_t seed);

enum class RotationKind { kHadamard, kRandom };

/// An orthonormal rotation R ([n, n], float64, R R^T = I to rounding):
///   kHadamard, random_signs = false: H / sqrt(n) (Quark's get_rotation_matrix(random=False));
///   kHadamard, random_signs = true: diag(s) H^T / sqrt(n) with s = 2 * randint(0, 2, {n}) - 1 drawn from a CPU
///     generator seeded with `seed` (Quark's random_hadamard_matrix: the Hadamard transform of diag(s));
///   kRandom: RandomOrthogonal(n, seed).
/// INVALID_ARGUMENT naming n when n < 1 or n > kMaxRotationOrder; kHadamard has HadamardMatrix's errors (NOT_FOUND
/// for an order without a construction: use kRandom there).
absl::StatusOr<at::Tensor> RotationMatrix(int64_t n, RotationKind kind, uint64_t seed, bool random_signs = true);

}  // namespace quark::algorithms

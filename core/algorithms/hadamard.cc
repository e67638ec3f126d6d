#include "core/algorithms/hadamard.h"

#include <ATen/CPUGeneratorImpl.h>

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/runtime/layer_streamer.h"

namespace quark::algorithms {
namespace {

// Four +-1 sequences of length v whose periodic autocorrelations sum to zero at every nonzero shift, so that the
// Goethals-Seidel array on their circulant matrices is a Hadamard matrix of order 4v. Computed for this project by an
// exhaustive search over sequences constant on the orbits of a multiplier subgroup H of the units mod v: H = {1, 5, 8,
// 25} for v = 39, H = {1, 6, 7, 36, 37, 42} for v = 43 (symmetric sequences: Williamson matrices).
struct TabulatedBase {
  int64_t v;
  std::array<const char*, 4> rows;
};
constexpr std::array<TabulatedBase, 2> kTabulated = {{
    {39,
     {"+------+----+++--+++-+-+--++++-+--++-++", "+-++---+--+++-++++++-+-++--+++-+--+++++",
      "+---+-+--+--+-----+-++++---++++-++---+-", "+--++-++-+-----+-+-++-+++---+++-++-+++-"}},
    {43,
     {"++-++-++-+-+---+--++++++++--+---+-+-++-++-+", "+-+-+----+-++-++---++--++---++-++-+----+-+-",
      "+++---++-++++-+-++--+--+--++-+-++++-++---++", "+++-+++++---++++---+----+---++++---+++++-++"}},
}};

const TabulatedBase* FindTabulated(int64_t k) {
  for (const TabulatedBase& base : kTabulated) {
    if (4 * base.v == k) return &base;
  }
  return nullptr;
}

// q = p^e with p an odd prime.
struct PrimePower {
  int64_t p = 0;
  int e = 0;
};

std::optional<PrimePower> OddPrimePower(int64_t q) {
  if (q < 3 || q % 2 == 0) return std::nullopt;
  int64_t p = q;
  for (int64_t d = 3; d * d <= q; d += 2) {
    if (q % d == 0) {
      p = d;
      break;
    }
  }
  PrimePower result{p, 0};
  while (q % p == 0) {
    q /= p;
    ++result.e;
  }
  if (q != 1) return std::nullopt;
  return result;
}

struct BaseConstruction {
  HadamardConstruction construction;
  int64_t q = 0;
};

std::optional<BaseConstruction> FindBase(int64_t k) {
  if (k == 1) return BaseConstruction{HadamardConstruction::kSylvester, 0};
  if (k % 4 != 0) return std::nullopt;
  if (OddPrimePower(k - 1) && (k - 1) % 4 == 3) return BaseConstruction{HadamardConstruction::kPaleyI, k - 1};
  const int64_t q2 = k / 2 - 1;
  if (OddPrimePower(q2) && q2 % 4 == 1) return BaseConstruction{HadamardConstruction::kPaleyII, q2};
  if (FindTabulated(k) != nullptr) return BaseConstruction{HadamardConstruction::kTabulated, 0};
  return std::nullopt;
}

// GF(p^e): an element is the integer whose base-p digits are its coefficients over GF(p) (digit i: x^i), reduced
// modulo a monic irreducible polynomial of degree e.
class FiniteField {
 public:
  explicit FiniteField(PrimePower pp) : p_(pp.p), e_(pp.e), q_(1) {
    for (int i = 0; i < e_; ++i) q_ *= p_;
    if (e_ > 1) FindModulus();
  }

  int64_t size() const { return q_; }

  int64_t Sub(int64_t a, int64_t b) const {
    if (e_ == 1) return ((a - b) % p_ + p_) % p_;
    int64_t out = 0, place = 1;
    for (int i = 0; i < e_; ++i, a /= p_, b /= p_, place *= p_) out += (((a % p_) - (b % p_) + p_) % p_) * place;
    return out;
  }

  // chi[x] = 1 for a nonzero square, -1 for a non-square, 0 for 0.
  std::vector<int8_t> QuadraticCharacter() const {
    std::vector<int8_t> chi(q_, -1);
    chi[0] = 0;
    for (int64_t x = 1; x < q_; ++x) chi[Square(x)] = 1;
    return chi;
  }

 private:
  std::vector<int64_t> Digits(int64_t a) const {
    std::vector<int64_t> d(e_);
    for (int i = 0; i < e_; ++i, a /= p_) d[i] = a % p_;
    return d;
  }

  // Remainder of the polynomial `num` (coefficients low to high) by the monic `den`.
  std::vector<int64_t> PolyMod(std::vector<int64_t> num, const std::vector<int64_t>& den) const {
    const size_t dd = den.size() - 1;
    for (size_t top = num.size(); top-- > dd;) {
      const int64_t c = num[top] % p_;
      if (c == 0) continue;
      for (size_t i = 0; i <= dd; ++i) num[top - dd + i] = ((num[top - dd + i] - c * den[i]) % p_ + p_) % p_;
    }
    num.resize(dd);
    return num;
  }

  int64_t Square(int64_t a) const {
    if (e_ == 1) return a * a % p_;
    const std::vector<int64_t> d = Digits(a);
    std::vector<int64_t> product(2 * e_ - 1, 0);
    for (int i = 0; i < e_; ++i) {
      for (int j = 0; j < e_; ++j) product[i + j] = (product[i + j] + d[i] * d[j]) % p_;
    }
    const std::vector<int64_t> r = PolyMod(std::move(product), modulus_);
    int64_t out = 0;
    for (int i = e_; i-- > 0;) out = out * p_ + r[i];
    return out;
  }

  // A monic polynomial of degree e is irreducible when no monic polynomial of degree 1..e/2 divides it.
  bool Irreducible(const std::vector<int64_t>& f) const {
    for (int d = 1; d <= e_ / 2; ++d) {
      int64_t count = 1;
      for (int i = 0; i < d; ++i) count *= p_;
      for (int64_t low = 0; low < count; ++low) {
        std::vector<int64_t> g(d + 1, 1);
        for (int i = 0, x = static_cast<int>(low); i < d; ++i, x /= static_cast<int>(p_)) g[i] = x % p_;
        const std::vector<int64_t> r = PolyMod(f, g);
        bool zero = true;
        for (int64_t c : r) zero = zero && c == 0;
        if (zero) return false;
      }
    }
    return true;
  }

  void FindModulus() {
    for (int64_t low = 1; low < q_; ++low) {
      std::vector<int64_t> f = Digits(low);
      f.push_back(1);
      if (f[0] != 0 && Irreducible(f)) {
        modulus_ = std::move(f);
        return;
      }
    }
  }

  int64_t p_;
  int e_;
  int64_t q_;
  std::vector<int64_t> modulus_;  // monic, coefficients low to high
};

// Q[i][j] = chi(x_j - x_i) over the q field elements (entries computed when asked: no q x q table).
class Jacobsthal {
 public:
  explicit Jacobsthal(int64_t q) : field_(*OddPrimePower(q)), chi_(field_.QuadraticCharacter()) {}
  int operator()(int64_t i, int64_t j) const { return chi_[field_.Sub(j, i)]; }

 private:
  FiniteField field_;
  std::vector<int8_t> chi_;
};

// Paley I, order q + 1 (q = 3 mod 4, Q skew): H = I + [[0, 1^T], [-1, Q]].
at::Tensor PaleyI(int64_t q) {
  const Jacobsthal jacobsthal(q);
  const int64_t k = q + 1;
  at::Tensor h = at::empty({k, k}, at::kDouble);
  double* out = h.data_ptr<double>();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double v;
      if (i == 0) v = 1;
      else if (j == 0) v = -1;
      else v = jacobsthal(i - 1, j - 1) + (i == j ? 1 : 0);
      out[i * k + j] = v;
    }
  }
  return h;
}

// Paley II, order 2 (q + 1) (q = 1 mod 4): the symmetric conference matrix C = [[0, 1^T], [1, Q]] with each 0 replaced
// by [[1, -1], [-1, -1]] and each +-1 by +-[[1, 1], [1, -1]].
at::Tensor PaleyII(int64_t q) {
  const Jacobsthal jacobsthal(q);
  const int64_t c = q + 1, k = 2 * c;
  at::Tensor h = at::empty({k, k}, at::kDouble);
  double* out = h.data_ptr<double>();
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const int v = (i == 0 && j == 0) ? 0 : (i == 0 || j == 0) ? 1 : jacobsthal(i - 1, j - 1);
      const std::array<int, 4> block = v == 0 ? std::array<int, 4>{1, -1, -1, -1} : std::array<int, 4>{v, v, v, -v};
      out[(2 * i) * k + 2 * j] = block[0];
      out[(2 * i) * k + 2 * j + 1] = block[1];
      out[(2 * i + 1) * k + 2 * j] = block[2];
      out[(2 * i + 1) * k + 2 * j + 1] = block[3];
    }
  }
  return h;
}

// The Goethals-Seidel array, order 4v, on circulants A..D (X[i][j] = x[(j - i) mod v]) and the back-diagonal R:
//   [  A     BR     CR     DR  ]
//   [ -BR    A     D^TR  -C^TR ]
//   [ -CR  -D^TR    A     B^TR ]
//   [ -DR   C^TR  -B^TR    A   ]
at::Tensor GoethalsSeidel(const TabulatedBase& base) {
  struct Block {
    int seq;
    bool transposed;
    bool reversed;
    int sign;
  };
  constexpr Block kArray[4][4] = {
      {{0, false, false, 1}, {1, false, true, 1}, {2, false, true, 1}, {3, false, true, 1}},
      {{1, false, true, -1}, {0, false, false, 1}, {3, true, true, 1}, {2, true, true, -1}},
      {{2, false, true, -1}, {3, true, true, -1}, {0, false, false, 1}, {1, true, true, 1}},
      {{3, false, true, -1}, {2, true, true, 1}, {1, true, true, -1}, {0, false, false, 1}},
  };
  const int64_t v = base.v, k = 4 * v;
  at::Tensor h = at::empty({k, k}, at::kDouble);
  double* out = h.data_ptr<double>();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const Block& b = kArray[i / v][j / v];
      const int64_t r = i % v, c = b.reversed ? v - 1 - j % v : j % v;
      const int64_t shift = b.transposed ? r - c : c - r;
      const char entry = base.rows[b.seq][((shift % v) + v) % v];
      out[i * k + j] = b.sign * (entry == '+' ? 1.0 : -1.0);
    }
  }
  return h;
}

// H[i][j] = (-1)^popcount(i & j).
at::Tensor Sylvester(int64_t size) {
  at::Tensor h = at::empty({size, size}, at::kDouble);
  double* out = h.data_ptr<double>();
  for (int64_t i = 0; i < size; ++i) {
    for (int64_t j = 0; j < size; ++j) out[i * size + j] = __builtin_parityll(i & j) ? -1.0 : 1.0;
  }
  return h;
}

absl::Status CheckRotationOrder(int64_t n) {
  if (n < 1 || n > kMaxRotationOrder) {
    return absl::InvalidArgumentError(StrCat("rotation order n = ", n, " must be in [1, ", kMaxRotationOrder, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HadamardDecomposition> FindHadamardDecomposition(int64_t n) {
  if (n < 1) return absl::InvalidArgumentError(StrCat("Hadamard order n = ", n, " must be positive"));
  if (n > 2 && n % 4 != 0) {
    return absl::InvalidArgumentError(
        StrCat("no Hadamard matrix of order n = ", n, " exists: orders above 2 are multiples of 4"));
  }
  const int max_power = __builtin_ctzll(static_cast<unsigned long long>(n));
  // The base order k = n / 2^m grows as m falls: the first constructible one is the smallest.
  for (int m = max_power; m >= 0; --m) {
    const int64_t k = n >> m;
    if (const std::optional<BaseConstruction> base = FindBase(k)) {
      return HadamardDecomposition{k, m, base->construction, base->q};
    }
  }
  return absl::NotFoundError(StrCat("no Hadamard construction for order n = ", n, " (", n >> max_power, " * 2^",
                                    max_power, "): base orders are 1, q + 1 (q = 3 mod 4) and 2 (q + 1) (q = 1 mod 4) ",
                                    "for odd prime powers q, 156 and 172; use a random rotation"));
}

bool HasHadamard(int64_t n) { return FindHadamardDecomposition(n).ok(); }

absl::StatusOr<at::Tensor> HadamardBaseMatrix(int64_t k) {
  const std::optional<BaseConstruction> base = k >= 1 ? FindBase(k) : std::nullopt;
  if (!base) return absl::InvalidArgumentError(StrCat("k = ", k, " is not a Hadamard base order"));
  if (k > kMaxRotationOrder) {
    return absl::InvalidArgumentError(StrCat("Hadamard base order k = ", k, " exceeds ", kMaxRotationOrder));
  }
  try {
    switch (base->construction) {
      case HadamardConstruction::kSylvester: return at::ones({1, 1}, at::kDouble);
      case HadamardConstruction::kPaleyI: return PaleyI(base->q);
      case HadamardConstruction::kPaleyII: return PaleyII(base->q);
      case HadamardConstruction::kTabulated: return GoethalsSeidel(*FindTabulated(k));
    }
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, StrCat("Hadamard base matrix of order ", k));
  }
  return absl::InternalError(StrCat("unknown construction for k = ", k));
}

absl::StatusOr<at::Tensor> HadamardMatrix(int64_t n) {
  absl::StatusOr<HadamardDecomposition> decomposition = FindHadamardDecomposition(n);
  if (!decomposition.ok()) return decomposition.status();
  if (absl::Status status = CheckRotationOrder(n); !status.ok()) return status;
  absl::StatusOr<at::Tensor> base = HadamardBaseMatrix(decomposition->base_order);
  if (!base.ok() || decomposition->power_of_two == 0) return base;
  try {
    const int64_t size = int64_t{1} << decomposition->power_of_two;
    if (decomposition->base_order == 1) return Sylvester(size);
    return at::kron(*base, Sylvester(size));
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, StrCat("Hadamard matrix of order ", n));
  }
}

at::Tensor RandomOrthogonal(int64_t n, uint64_t seed) {
  if (n <= 0) return at::empty({0, 0}, at::kDouble);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const at::Tensor gaussian = at::randn({n, n}, generator, at::TensorOptions().dtype(at::kDouble));
  auto [q, r] = at::linalg_qr(gaussian);
  // Q * sign(diag(R)) makes the factorisation unique (diag(R) > 0), so Q is Haar-distributed.
  const at::Tensor signs = 1.0 - 2.0 * (r.diagonal() < 0).to(at::kDouble);
  return (q * signs.unsqueeze(0)).contiguous();
}

absl::StatusOr<at::Tensor> RotationMatrix(int64_t n, RotationKind kind, uint64_t seed, bool random_signs) {
  if (absl::Status status = CheckRotationOrder(n); !status.ok()) return status;
  try {
    if (kind == RotationKind::kRandom) return RandomOrthogonal(n, seed);
    absl::StatusOr<at::Tensor> h = HadamardMatrix(n);
    if (!h.ok()) return h.status();
    const double scale = 1.0 / std::sqrt(static_cast<double>(n));
    if (!random_signs) return h->mul_(scale);
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    const at::Tensor bits = at::randint(0, 2, {n}, generator, at::TensorOptions().dtype(at::kLong));
    const at::Tensor signs = bits.to(at::kDouble) * 2 - 1;
    // diag(s) H^T: the Hadamard transform of diag(s), as Quark's random_hadamard_matrix computes it.
    return (h->t() * signs.unsqueeze(1)).mul_(scale).contiguous();
  } catch (const std::exception& error) {
    return runtime::TorchErrorToStatus(error, StrCat("rotation matrix of order ", n));
  }
}

}  // namespace quark::algorithms

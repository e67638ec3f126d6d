#include "core/algorithms/gptaq_products.h"

#include <algorithm>

#include "core/config/asymmetric_gptq_cost.h"

namespace quark::algorithms {

void GptaqPInPlace(at::Tensor& cross, const at::Tensor& upper, double alpha) {
  const int64_t k = cross.size(0), block = kTriangularProductBlock;
  const at::Tensor lower = upper.t();
  // T = alpha * triu_1(dXX L), block column by block column. L[r, c] = 0 for r < c, so column block [j1, j2) of
  // dXX L takes dXX's columns from j1 on; triu_1 keeps rows r < c < j2. Column blocks to the right read only dXX's
  // columns from their own start, so each block of T is written over the dXX columns just read (through one
  // [j2, j2 - j1] temporary, as the product still reads them).
  for (int64_t j1 = 0; j1 < k; j1 += block) {
    const int64_t j2 = std::min(j1 + block, k);
    at::Tensor part = at::mm(cross.slice(0, 0, j2).slice(1, j1), lower.slice(0, j1).slice(1, j1, j2));
    part.triu_(1 - j1).mul_(alpha);  // column c of the part is column j1 + c of T
    cross.slice(0, 0, j2).slice(1, j1, j2).copy_(part);
    if (j2 < k) cross.slice(0, j2).slice(1, j1, j2).zero_();
  }
  // P = T L^T, block row by block row: T[r, s] = 0 for s <= r and L^T[s, c] = 0 for s > c, so block (I, J), J >= I,
  // sums over s in [i1, j2), and P is zero left of row block I's diagonal block. Row block I of P needs only row block
  // I of T: it is formed in a [rows, K - i1] temporary and written over it.
  for (int64_t i1 = 0; i1 < k; i1 += block) {
    const int64_t i2 = std::min(i1 + block, k);
    const at::Tensor t_rows = cross.slice(0, i1, i2);
    at::Tensor p_rows = at::empty({i2 - i1, k - i1}, cross.options());
    for (int64_t j1 = i1; j1 < k; j1 += block) {
      const int64_t j2 = std::min(j1 + block, k);
      at::Tensor out = p_rows.slice(1, j1 - i1, j2 - i1);
      at::mm_out(out, t_rows.slice(1, i1, j2), upper.slice(0, i1, j2).slice(1, j1, j2));
    }
    t_rows.slice(1, i1).copy_(p_rows);
  }
}

}  // namespace quark::algorithms

// float32 outputs of at least kStreamOutputBytes are written with non-temporal stores (kernels/cpu/lane_table.h),
// and large bfloat16 tensors run the fused loops over many chunks in parallel. Each result must equal, bit for bit,
// the same fake quantization done on small slices: per-row and per-group parameters make slices independent.
#include <gtest/gtest.h>

#include <vector>

#include "core/numerics/fake_quant.h"
#include "kernels/cpu/lane_table.h"
#include "tests/numerics/test_util.h"

namespace quark {
namespace {

using testing::BitEqual;
using testing::RandomTensor;
using testing::Spec;

QuantSpec Grouped(DType dtype, int group, bool mx) {
  QuantSpec s = Spec(dtype, QScheme::kPerGroup, dtype == DType::kUInt4 ? false : true);
  s.group_size = group;
  if (mx) s.scale_format = ScaleFormat::kE8M0;
  return s;
}

void ExpectStreamedEqualsSliced(const at::Tensor& x, const QuantSpec& spec, const char* what) {
  ASSERT_GE(x.numel() * x.element_size(), kernels::kStreamOutputBytes) << what;
  auto params = ParamsOf(x, spec, TensorRole::kWeight);
  ASSERT_TRUE(params.ok()) << what << ": " << params.status();
  at::Tensor whole = at::empty_like(x);
  ASSERT_TRUE(FakeQuantizeInto(x, spec, *params, whole).ok()) << what;
  const int64_t rows_per_slice = 8;  // a few hundred KiB: below the streaming threshold
  for (int64_t r = 0; r < x.size(0); r += rows_per_slice) {
    const at::Tensor rows = x.narrow(0, r, rows_per_slice).contiguous();
    auto slice_params = ParamsOf(rows, spec, TensorRole::kWeight);
    ASSERT_TRUE(slice_params.ok()) << what;
    auto sliced = FakeQuantize(rows, spec, *slice_params);
    ASSERT_TRUE(sliced.ok()) << what;
    ASSERT_TRUE(BitEqual(*sliced, whole.narrow(0, r, rows_per_slice).contiguous())) << what << " rows " << r;
  }
}

TEST(StreamedOutputTest, LargeOutputsEqualTheirSmallSlices) {
  const at::Tensor f32 = RandomTensor({2048, 2080}, 11);  // 17 MiB float32
  const at::Tensor bf16 = RandomTensor({4096, 2080}, 12, at::kBFloat16);
  for (const at::Tensor& x : {f32, bf16}) {
    ExpectStreamedEqualsSliced(x, Spec(DType::kInt8, QScheme::kPerChannel), "int8 per_channel");
    ExpectStreamedEqualsSliced(x, Spec(DType::kFp8E4M3, QScheme::kPerChannel), "fp8 per_channel");
    ExpectStreamedEqualsSliced(x, Grouped(DType::kUInt4, 32, false), "uint4 per_group 32");
    ExpectStreamedEqualsSliced(x, Grouped(DType::kFp4, 32, true), "mxfp4");
  }
}

}  // namespace
}  // namespace quark

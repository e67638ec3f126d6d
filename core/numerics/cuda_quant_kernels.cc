#include "core/numerics/cuda_quant_kernels.h"

#include <stdexcept>
#include <string>

#include "core/numerics/quant_kernels.h"
#include "kernels/cpu/float_grid.h"
#include "kernels/cuda/gptq_cuda.h"
#include "kernels/cuda/nvfp4_cuda.h"
#include "kernels/cuda/quant_cuda.h"

namespace quark {
namespace {

namespace cuda = kernels::cuda;

cuda::CudaElem ElemOf(const at::Tensor& t) {
  if (t.scalar_type() == at::kBFloat16) return cuda::CudaElem::kBF16;
  if (t.scalar_type() == at::kHalf) return cuda::CudaElem::kF16;
  return cuda::CudaElem::kF32;
}

// A launch error becomes the c10::Error LibTorch itself would throw (the engine's edges turn it into a Status).
void Check(int code, const char* kernel) {
  if (code != 0) TORCH_CHECK(false, kernel, ": CUDA error ", cuda::CudaErrorName(code));
}

cuda::CudaAffineArgs ArgsOf(const kernels::ChannelLayout& l, const at::Tensor& scale, const at::Tensor& inv,
                            const at::Tensor* zero_point) {
  cuda::CudaAffineArgs a;
  a.outer = l.outer;
  a.channels = l.channels;
  a.inner = l.inner;
  a.scale = scale.data_ptr<float>();
  a.inv_scale = inv.data_ptr<float>();
  a.zero_point = zero_point ? zero_point->data_ptr<float>() : nullptr;
  return a;
}

class CudaKernels final : public QuantKernels {
 public:
  std::string_view name() const override { return "cuda"; }

  void FakeAffine(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& l,
                  const AffineKernelArgs& args) const override {
    const at::Tensor scale = args.scale.to(in.device(), at::kFloat).contiguous();
    const at::Tensor inv = at::full_like(scale, 1.0f).div_(scale);  // 1.0f / s in float32, as the CPU kernels
    const at::Tensor zero = args.zero_point.to(in.device(), at::kFloat).contiguous();
    cuda::CudaAffineArgs a = ArgsOf(l, scale, inv, &zero);
    a.qmin = args.qmin;
    a.qmax = args.qmax;
    a.round_mode = static_cast<int>(args.round);
    a.float_zero_point = args.float_zero_point;
    Check(cuda::FakeQuantAffineCuda(in.data_ptr(), out.data_ptr(), ElemOf(in), a, nullptr), "FakeQuantAffineCuda");
  }

  void FakeFloat(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& l, const at::Tensor& scale,
                 kernels::ElemFormat format) const override {
    const at::Tensor s = scale.to(in.device(), at::kFloat).contiguous();
    const kernels::FormatTraits& t = kernels::Traits(format);
    Check(cuda::FakeQuantFloatCuda(in.data_ptr(), out.data_ptr(), ElemOf(in), ArgsOf(l, s, s, nullptr),
                                   kernels::GridArgsOf(t), nullptr),
          "FakeQuantFloatCuda");
  }

  void FakeMx(const at::Tensor& in, at::Tensor& out, int64_t rows, int64_t len, const kernels::MxArgs& args,
              const at::Tensor& exps) const override {
    // Static exponents (calibrated MX scales) have no CUDA kernel: tensor ops on the device.
    if (exps.defined()) return TensorOpQuantKernels().FakeMx(in, out, rows, len, args, exps);
    const bool is_int = args.element == kernels::ElemFormat::kInt8;
    const kernels::FormatTraits& t = kernels::Traits(is_int ? kernels::ElemFormat::kFp8E4M3 : args.element);
    cuda::CudaMxArgs a;
    a.rows = rows;
    a.len = len;
    a.grid = kernels::GridArgsOf(t);
    a.elem_mbits = is_int ? 6 : t.mbits;
    a.emax = is_int ? 0 : t.emax;
    a.mode = static_cast<int>(args.mode);
    a.is_int = is_int;
    a.round_mode = static_cast<int>(args.round);
    Check(cuda::FakeQuantMxCuda(in.data_ptr(), out.data_ptr(), ElemOf(in), a, nullptr), "FakeQuantMxCuda");
  }

  void ChannelMinMax(const at::Tensor& in, const kernels::ChannelLayout& l, at::Tensor& min,
                     at::Tensor& max) const override {
    TensorOpQuantKernels().ChannelMinMax(in, l, min, max);
  }

  void MxBlockAmax(const at::Tensor& in, int64_t rows, int64_t len, at::Tensor& amax) const override {
    TensorOpQuantKernels().MxBlockAmax(in, rows, len, amax);
  }

  bool GptqBlock(const kernels::element::GptqBlockArgs& args) const override {
    Check(cuda::GptqBlockCuda(args, nullptr), "GptqBlockCuda");
    return true;
  }

  bool FakeNvfp4(const at::Tensor& in, at::Tensor& out, int64_t rows, int64_t len, float global,
                 const at::Tensor& blk) const override {
    Check(cuda::Nvfp4FakeQuantCuda(in.data_ptr(), out.data_ptr(), ElemOf(in), rows, len, global,
                                   blk.defined() ? blk.data_ptr<float>() : nullptr, nullptr),
          "Nvfp4FakeQuantCuda");
    return true;
  }
};

}  // namespace

void RegisterCudaQuantKernels() {
  static const CudaKernels kernels;
  RegisterQuantKernels(c10::DeviceType::CUDA, &kernels);
}

}  // namespace quark

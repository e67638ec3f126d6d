#include "core/numerics/quant_kernels.h"

#include <array>
#include <atomic>

#include "core/numerics/dispatch.h"
#if defined(QUARK_HAVE_CUDA_KERNELS)
#include "core/numerics/cuda_quant_kernels.h"
#endif
#include "kernels/cpu/float_kernels.h"
#include "kernels/cpu/gptq_block_cpu.h"
#include "kernels/cpu/nvfp4_kernels.h"
#include "kernels/cpu/reduce_kernels.h"

namespace quark {
namespace {

class CpuKernels final : public QuantKernels {
 public:
  std::string_view name() const override { return "cpu"; }

  void FakeAffine(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& layout,
                  const AffineKernelArgs& a) const override {
    const at::Tensor scale = a.scale.to(at::kFloat).contiguous();
    const at::Tensor zero_point = a.zero_point.to(at::kFloat).contiguous();
    kernels::AffineArgs args;
    args.scale = scale.data_ptr<float>();
    args.zero_point = zero_point.data_ptr<float>();
    args.qmin = a.qmin;
    args.qmax = a.qmax;
    args.round = a.round;
    args.float_zero_point = a.float_zero_point;
    DispatchFloating(in.scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::FakeQuantAffine<T>(in.data_ptr<T>(), out.data_ptr<T>(), layout, args);
    });
  }

  void FakeFloat(const at::Tensor& in, at::Tensor& out, const kernels::ChannelLayout& layout, const at::Tensor& scale,
                 kernels::ElemFormat format) const override {
    const at::Tensor s = scale.to(at::kFloat).contiguous();
    DispatchFloating(in.scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::FakeQuantFloat<T>(in.data_ptr<T>(), out.data_ptr<T>(), layout, s.data_ptr<float>(), format);
    });
  }

  void FakeMx(const at::Tensor& in, at::Tensor& out, int64_t rows, int64_t len, const kernels::MxArgs& args,
              const at::Tensor& exps) const override {
    const at::Tensor e = exps.defined() ? exps.contiguous() : at::Tensor();
    DispatchFloating(in.scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::MxFakeQuant<T>(in.data_ptr<T>(), out.data_ptr<T>(), rows, len, args,
                              e.defined() ? e.data_ptr<int8_t>() : nullptr);
    });
  }

  void ChannelMinMax(const at::Tensor& in, const kernels::ChannelLayout& layout, at::Tensor& min,
                     at::Tensor& max) const override {
    min = at::empty({layout.channels}, at::kFloat);
    max = at::empty({layout.channels}, at::kFloat);
    DispatchFloating(in.scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::ChannelMinMax<T>(in.data_ptr<T>(), layout, min.data_ptr<float>(), max.data_ptr<float>());
    });
  }

  void MxBlockAmax(const at::Tensor& in, int64_t rows, int64_t len, at::Tensor& amax) const override {
    amax = at::empty({rows * kernels::MxBlocksPerRow(len)}, at::kFloat);
    DispatchFloating(in.scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::MxBlockAmax<T>(in.data_ptr<T>(), rows, len, amax.data_ptr<float>());
    });
  }

  bool GptqBlock(const kernels::element::GptqBlockArgs& args) const override {
    kernels::GptqBlockCpu(args);
    return true;
  }

  bool FakeNvfp4(const at::Tensor& in, at::Tensor& out, int64_t rows, int64_t len, float global,
                 const at::Tensor& blk) const override {
    DispatchFloating(in.scalar_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::Nvfp4FakeQuant<T>(in.data_ptr<T>(), out.data_ptr<T>(), rows, len, global,
                                 blk.defined() ? blk.data_ptr<float>() : nullptr);
    });
    return true;
  }
};

std::array<std::atomic<const QuantKernels*>, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>&
Registry() {
  static std::array<std::atomic<const QuantKernels*>,
                    static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
      registry{};
  return registry;
}

}  // namespace

const QuantKernels& CpuQuantKernels() {
  static const CpuKernels kernels;
  return kernels;
}

void RegisterQuantKernels(c10::DeviceType type, const QuantKernels* kernels) {
  Registry()[static_cast<size_t>(type)].store(kernels);
}

const QuantKernels& QuantKernelsFor(const at::Device& device) {
  if (device.is_cpu()) return CpuQuantKernels();
#if defined(QUARK_HAVE_CUDA_KERNELS)
  // This build has CUDA kernels (nvcc found): CUDA tensors get them unless something else was registered since.
  static const bool cuda_registered = (RegisterCudaQuantKernels(), true);
  (void)cuda_registered;
#endif
  if (const QuantKernels* registered = Registry()[static_cast<size_t>(device.type())].load()) return *registered;
  return TensorOpQuantKernels();
}

}  // namespace quark

#include "tests/kernels/cuda_test_inputs.h"

#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "kernels/element/element_ops.h"

namespace quark::testing {

std::vector<float> KernelInputs(int64_t n, uint64_t seed, float unit) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-12, 12);
  std::uniform_int_distribution<int> ties(-300, 300);
  const float specials[] = {0.0f,  -0.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            1e-40f, -1e-40f, 3.0e38f, -3.0e38f, 1e-30f};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (i % 7) {
      case 0:
        v[i] = specials[(i / 7) % (sizeof(specials) / sizeof(float))];
        break;
      case 1:
      case 2:
        v[i] = 0.5f * static_cast<float>(ties(rng)) * unit;  // exact ties of every rounding mode
        break;
      default:
        v[i] = std::ldexp(uni(rng), exp(rng)) * unit * 64.0f;
    }
  }
  return v;
}

int64_t ElemBytes(kernels::cuda::CudaElem elem) { return elem == kernels::cuda::CudaElem::kF32 ? 4 : 2; }

std::string ElemName(kernels::cuda::CudaElem elem) {
  switch (elem) {
    case kernels::cuda::CudaElem::kBF16:
      return "bf16";
    case kernels::cuda::CudaElem::kF16:
      return "f16";
    case kernels::cuda::CudaElem::kF32:
      break;
  }
  return "f32";
}

std::vector<uint8_t> StoreAs(const std::vector<float>& values, kernels::cuda::CudaElem elem) {
  std::vector<uint8_t> out(values.size() * static_cast<size_t>(ElemBytes(elem)));
  for (size_t i = 0; i < values.size(); ++i) {
    if (elem == kernels::cuda::CudaElem::kF32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t b = elem == kernels::cuda::CudaElem::kBF16 ? kernels::element::Bf16Bits(values[i])
                                                                : kernels::element::HalfBits(values[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
}

DeviceBuffer::~DeviceBuffer() { (void)cudaFree(ptr_); }  // a destructor cannot report it

void DeviceBuffer::Upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_ || cudaMemcpy(at(offset), host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    throw std::runtime_error("cudaMemcpy to device failed");
  }
}

void DeviceBuffer::Download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_ || cudaMemcpy(host, at(offset), bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    throw std::runtime_error("cudaMemcpy to host failed");
  }
}

}  // namespace quark::testing

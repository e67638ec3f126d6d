// Inputs of the CUDA-vs-CPU kernel tests: values that reach every branch of the element math (ties of each rounding
// mode, saturation, NaN, +-Inf, -0, subnormals, tiny MX blocks), in every storage type, and device buffers.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/quant_cuda.h"

namespace quark::testing {

/// `n` float32 values with a seeded spread of magnitudes, ties at multiples of 0.5 * `unit`, and the special values.
std::vector<float> KernelInputs(int64_t n, uint64_t seed, float unit);

/// The values stored as `elem` (float32 bits, or bfloat16 / half bits rounded as the CPU does), as raw bytes.
std::vector<uint8_t> StoreAs(const std::vector<float>& values, kernels::cuda::CudaElem elem);

int64_t ElemBytes(kernels::cuda::CudaElem elem);
std::string ElemName(kernels::cuda::CudaElem elem);

/// Device memory of a fixed size, freed on destruction; copies to and from host vectors.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // Movable, so that From() can return one (returning a named local needs a move constructor).
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  template <typename T>
  static DeviceBuffer From(const std::vector<T>& host) {
    DeviceBuffer b(host.size() * sizeof(T));
    b.Upload(host.data(), host.size() * sizeof(T));
    return b;
  }
  /// Copies `bytes` to / from `offset` bytes into the buffer (an offset makes a pointer misaligned on purpose).
  void Upload(const void* host, size_t bytes, size_t offset = 0);
  void Download(void* host, size_t bytes, size_t offset = 0) const;
  template <typename T>
  std::vector<T> Read(size_t count, size_t offset = 0) const {
    std::vector<T> out(count);
    Download(out.data(), count * sizeof(T), offset);
    return out;
  }
  /// The device address `offset` bytes in.
  void* at(size_t offset) const { return static_cast<char*>(ptr_) + offset; }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace quark::testing

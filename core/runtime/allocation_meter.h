// Counts the bytes of the tensors LibTorch allocates on the CPU: live now and at the peak since the last reset. A pass
// run on the CPU allocates the tensors it would allocate on a GPU, so the CPU's peak is the device's peak minus the
// caching allocator's rounding, which is what the streamer's device budget formula (StreamerOptions) must bound.
// This machine has no GPU: the formula is checked here against what the passes really hold
// (tests/runtime/pass_memory_test.cc, bench/runtime/pass_memory_bench.cc).
//
// Only allocations through c10's CPU allocator are counted (every at::empty / operator output); memory mapped files,
// from_blob views and BLAS / oneDNN scratch buffers are not, as they would not be device tensors either.
//
// On a GPU the meter also keeps the device allocator's own figures: CUDA's caching allocator reports every block it
// hands out or takes back, with the bytes it has allocated for tensors and reserved from the device, to LibTorch's
// thread-local memory reporting (the profiler's hook). The two tell the formula's error (allocated) from the
// allocator's caching and fragmentation (reserved) on the next GPU run (bench/quantize/pass_memory_bench).
#pragma once

#include <cstdint>
#include <memory>

namespace c10 {
struct Allocator;
class DebugInfoGuard;
}  // namespace c10

namespace quark::runtime {

/// A device allocator's figures, as it reports them: the bytes allocated for tensors and reserved from the device,
/// now and at their peaks since the meter was installed or ResetPeak() ran.
struct DeviceAllocatorBytes {
  int64_t allocated = 0;
  int64_t reserved = 0;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  bool reported = false;  // whether any non-CPU allocator reported at all
};

/// Installs a counting allocator in front of LibTorch's CPU allocator for its lifetime (one at a time: a second
/// meter while one is installed aborts), and with `device_reports` listens to the device allocators' reports on the
/// installing thread (that hook also makes LibTorch's CPU allocator report, and warn once about blocks older than the
/// meter: off unless a device is metered).
/// Tensors allocated while it is installed are counted until they are freed, even after it is gone. Install, use and
/// destroy it on one thread (the thread-local report hook is restored when it goes).
class AllocationMeter {
 public:
  explicit AllocationMeter(bool device_reports = false);
  ~AllocationMeter();
  AllocationMeter(const AllocationMeter&) = delete;
  AllocationMeter& operator=(const AllocationMeter&) = delete;

  /// Bytes of counted tensors alive now.
  int64_t live_bytes() const;
  /// The most live_bytes() has been since the meter was installed or ResetPeak() last ran.
  int64_t peak_bytes() const;
  /// Starts new peaks at the bytes alive now (CPU and device).
  void ResetPeak();
  /// The device allocators' reports since install (all non-CPU devices summed: one GPU a run).
  DeviceAllocatorBytes device() const;

 private:
  c10::Allocator* previous_ = nullptr;
  std::unique_ptr<c10::DebugInfoGuard> reports_;
};

}  // namespace quark::runtime

#include "core/runtime/device_memory.h"

#include <array>
#include <mutex>

#include "absl/strings/str_cat.h"

#if defined(QUARK_HAVE_CUDA_KERNELS)
#include "kernels/cuda/device_memory_cuda.h"
#endif

namespace quark::runtime {
namespace {

struct Probes {
  std::mutex mu;
  std::array<FreeMemoryProbe, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)> by_type;
};

Probes& Registered() {
  static Probes* probes = [] {
    auto* p = new Probes;  // never destroyed: probes may be asked from other static destructors' threads
#if defined(QUARK_HAVE_CUDA_KERNELS)
    p->by_type[static_cast<size_t>(c10::DeviceType::CUDA)] = [](c10::DeviceIndex index) -> std::optional<int64_t> {
      int64_t free_bytes = 0;
      if (!kernels::cuda::FreeMemoryBytes(index < 0 ? 0 : index, &free_bytes)) return std::nullopt;
      return free_bytes;
    };
#endif
    return p;
  }();
  return *probes;
}

}  // namespace

void RegisterFreeMemoryProbe(c10::DeviceType type, FreeMemoryProbe probe) {
  Probes& probes = Registered();
  std::lock_guard<std::mutex> lock(probes.mu);
  probes.by_type[static_cast<size_t>(type)] = std::move(probe);
}

std::optional<int64_t> FreeDeviceMemory(const ComputeDevice& device) {
  if (device.is_cpu()) return std::nullopt;
  FreeMemoryProbe probe;
  {
    Probes& probes = Registered();
    std::lock_guard<std::mutex> lock(probes.mu);
    probe = probes.by_type[static_cast<size_t>(device.device().type())];
  }
  if (!probe) return std::nullopt;
  return probe(device.device().index());
}

absl::StatusOr<int64_t> DeviceMemoryBudget(const ComputeDevice& device, int64_t requested, const std::string& what) {
  if (requested < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", requested, " bytes is negative (0 = the default: ",
                                                   kDefaultBudgetShareOfFree * 100, "% of the device's free memory)"));
  }
  if (requested > 0) return requested;
  const std::optional<int64_t> free_bytes = FreeDeviceMemory(device);
  if (!free_bytes || *free_bytes <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(*free_bytes) * kDefaultBudgetShareOfFree);
}

}  // namespace quark::runtime

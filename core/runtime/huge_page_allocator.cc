#include "core/runtime/huge_page_allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace quark::runtime {
namespace {

// Above the default CPU allocator's registration (0) and below the allocation meter's (200): a meter installed later
// counts in front of this allocator and puts it back when it goes.
constexpr uint8_t kHugePagePriority = 100;
constexpr std::size_t kSmallPageBytes = 4096;

class HugePageAllocator final : public c10::Allocator {
 public:
  // LibTorch 1.13 declares allocate const, 2.x (2.3 on) not: each version overrides the one it declares, and the other
  // is a plain overload (so no `override` on either).
  c10::DataPtr allocate(size_t n) const { return Allocate(n); }
  c10::DataPtr allocate(size_t n) { return Allocate(n); }
  // Memory from both paths is freed by its pointer with free: the default allocator's raw deleter tells its memory
  // profiler and frees (c10::free_cpu), and for a huge-page tensor, which the profiler never saw, only frees.
  c10::DeleterFnPtr raw_deleter() const override { return c10::GetDefaultCPUAllocator()->raw_deleter(); }
  // LibTorch 2.x's Allocator declares it (pure virtual); 1.13's does not.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }

 private:
  c10::DataPtr Allocate(size_t n) const {
    if (n < kHugePageThresholdBytes) return c10::GetDefaultCPUAllocator()->allocate(n);
    void* data = nullptr;
    // Refused as LibTorch's allocator refuses (a c10::Error saying "not enough memory"), which the engine turns into
    // RESOURCE_EXHAUSTED naming the layer (runtime::TorchErrorToStatus).
    TORCH_CHECK(posix_memalign(&data, kHugePageBytes, n) == 0 && data != nullptr,
                "HugePageCpuAllocator: not enough memory: you tried to allocate ", n, " bytes.");
    // The advice covers exactly the tensor's pages: a huge page is used where a whole aligned 2 MiB lies inside,
    // so the tail of an odd size stays on small pages and nothing beyond the tensor becomes resident. A kernel
    // without transparent huge pages refuses the advice (EINVAL): the memory is as good, on small pages.
    const std::size_t advised = (n + kSmallPageBytes - 1) / kSmallPageBytes * kSmallPageBytes;
    (void)::madvise(data, advised, MADV_HUGEPAGE);
    return c10::DataPtr(data, data, &std::free, c10::Device(c10::DeviceType::CPU));
  }
};

HugePageAllocator& Allocator() {
  static auto* allocator = new HugePageAllocator();  // never destroyed: its tensors may outlive every static
  return *allocator;
}

bool DisabledByEnvironment() {
  const char* value = std::getenv("QUARK_HUGE_PAGES");
  return value != nullptr && std::string_view(value) == "0";
}

std::mutex install_mutex;
bool installed = false;

}  // namespace

bool InstallHugePageCpuAllocator() {
  std::lock_guard<std::mutex> lock(install_mutex);
  if (installed || DisabledByEnvironment()) return installed;
  c10::SetAllocator(c10::DeviceType::CPU, &Allocator(), kHugePagePriority);
  // An allocator of a higher priority already in place (an allocation meter) keeps its place: not installed.
  installed = c10::GetAllocator(c10::DeviceType::CPU) == &Allocator();
  return installed;
}

bool HugePageCpuAllocatorInstalled() {
  std::lock_guard<std::mutex> lock(install_mutex);
  return installed;
}

}  // namespace quark::runtime

#include "core/runtime/allocation_meter.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

namespace quark::runtime {
namespace {

// Above the default CPU allocator's registration (0), so that ours is taken, and restoring the previous one at the
// same priority is allowed (SetAllocator keeps the higher priority).
constexpr uint8_t kMeterPriority = 200;

std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

void Count(int64_t bytes) {
  const int64_t now = live.fetch_add(bytes) + bytes;
  int64_t seen = peak.load();
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

// Each counted allocation's bytes and the inner allocator's deleter, by data pointer. The DataPtr handed out keeps
// the data pointer as its context: LibTorch's raw_allocate (oneDNN's bfloat16 kernels use it) insists on that.
struct Counted {
  int64_t bytes;
  c10::DeleterFnPtr deleter;
};
std::mutex counted_mutex;
std::unordered_map<void*, Counted>& CountedAllocations() {
  static auto* counted = new std::unordered_map<void*, Counted>();
  return *counted;
}

void DeleteCounted(void* data) {
  Counted counted{};
  {
    std::lock_guard<std::mutex> lock(counted_mutex);
    auto it = CountedAllocations().find(data);
    if (it == CountedAllocations().end()) std::abort();  // never handed out by this allocator
    counted = it->second;
    CountedAllocations().erase(it);
  }
  live.fetch_sub(counted.bytes);
  counted.deleter(data);
}

class CountingAllocator final : public c10::Allocator {
 public:
  // LibTorch 1.13 declares allocate const, 2.x (2.3 on) not: each version overrides the one it declares, and the other
  // is a plain overload (so no `override` on either).
  c10::DataPtr allocate(size_t n) const { return Allocate(n); }
  c10::DataPtr allocate(size_t n) { return Allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &DeleteCounted; }
  // LibTorch 2.x's Allocator declares it (pure virtual); 1.13's does not.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }
  void set_inner(c10::Allocator* inner) { inner_ = inner; }

 private:
  c10::DataPtr Allocate(size_t n) const {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    // Only what can be freed by its pointer alone is counted (the CPU allocator's own memory always can).
    if (data == nullptr || inner.get_context() != data || inner.get_deleter() == nullptr) return inner;
    const c10::DeleterFnPtr deleter = inner.get_deleter();
    const c10::Device device = inner.device();
    (void)inner.release_context();
    {
      std::lock_guard<std::mutex> lock(counted_mutex);
      CountedAllocations()[data] = Counted{static_cast<int64_t>(n), deleter};
    }
    Count(static_cast<int64_t>(n));
    return c10::DataPtr(data, data, &DeleteCounted, device);
  }

  c10::Allocator* inner_ = nullptr;
};

// Never destroyed: tensors it counted may outlive every meter.
CountingAllocator& Counting() {
  static auto* allocator = new CountingAllocator();
  return *allocator;
}

std::atomic<bool> installed{false};

// The totals' type of MemoryReportingInfoBase::reportMemoryUsage: int64_t in LibTorch 1.13, size_t in 2.x.
template <typename>
struct ReportTotals;
template <typename C, typename R, typename P, typename A, typename T, typename U, typename D>
struct ReportTotals<R (C::*)(P, A, T, U, D)> {
  using Type = T;
};
using Total = ReportTotals<decltype(&c10::MemoryReportingInfoBase::reportMemoryUsage)>::Type;

// What a device allocator last reported, and the peaks since the last reset.
std::mutex device_mutex;
DeviceAllocatorBytes device_bytes;

class DeviceReports final : public c10::MemoryReportingInfoBase {
 public:
  bool memoryProfilingEnabled() const override { return true; }
  void reportMemoryUsage(void* /*ptr*/, int64_t /*alloc_size*/, Total total_allocated, Total total_reserved,
                         c10::Device device) override {
    if (device.is_cpu()) return;  // the counting allocator has those
    std::lock_guard<std::mutex> lock(device_mutex);
    device_bytes.reported = true;
    device_bytes.allocated = static_cast<int64_t>(total_allocated);
    device_bytes.reserved = static_cast<int64_t>(total_reserved);
    device_bytes.peak_allocated = std::max(device_bytes.peak_allocated, device_bytes.allocated);
    device_bytes.peak_reserved = std::max(device_bytes.peak_reserved, device_bytes.reserved);
  }
};

}  // namespace

AllocationMeter::AllocationMeter(bool device_reports) {
  if (installed.exchange(true)) std::abort();  // two meters would count each other's tensors
  previous_ = c10::GetAllocator(c10::DeviceType::CPU);
  Counting().set_inner(previous_);
  peak.store(live.load());  // tensors an earlier meter counted are still uncounted as they are freed
  c10::SetAllocator(c10::DeviceType::CPU, &Counting(), kMeterPriority);
  {
    std::lock_guard<std::mutex> lock(device_mutex);
    device_bytes = DeviceAllocatorBytes{};
  }
  if (device_reports) {
    reports_ =
        std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, std::make_shared<DeviceReports>());
  }
}

AllocationMeter::~AllocationMeter() {
  reports_.reset();
  c10::SetAllocator(c10::DeviceType::CPU, previous_, kMeterPriority);
  installed.store(false);
}

int64_t AllocationMeter::live_bytes() const { return live.load(); }

int64_t AllocationMeter::peak_bytes() const { return peak.load(); }

void AllocationMeter::ResetPeak() {
  peak.store(live.load());
  std::lock_guard<std::mutex> lock(device_mutex);
  device_bytes.peak_allocated = device_bytes.allocated;
  device_bytes.peak_reserved = device_bytes.reserved;
}

DeviceAllocatorBytes AllocationMeter::device() const {
  std::lock_guard<std::mutex> lock(device_mutex);
  return device_bytes;
}

}  // namespace quark::runtime

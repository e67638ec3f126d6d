#include "core/engine/large_tensors.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>

namespace quark {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The mappings handed out, by address: LibTorch's raw_deallocate gives a deleter only the pointer.
class Mappings {
 public:
  void Add(void* p, size_t length) {
    std::lock_guard<std::mutex> lock(mutex_);
    lengths_[p] = length;
  }
  // The length of p's mapping, forgotten; 0 when p is not one of them.
  size_t Take(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = lengths_.find(p);
    if (it == lengths_.end()) return 0;
    const size_t length = it->second;
    lengths_.erase(it);
    return length;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> lengths_;
};

Mappings& TheMappings() {
  static auto* mappings = new Mappings();  // never destroyed: tensors may outlive static destruction
  return *mappings;
}

c10::DeleterFnPtr g_small_deleter = nullptr;  // LibTorch's own raw deleter, for what it allocated

void Release(void* p) {
  if (p == nullptr) return;
  if (const size_t length = TheMappings().Take(p); length != 0) {
    munmap(p, length);
  } else {
    g_small_deleter(p);
  }
}

// A 2 MiB-aligned anonymous mapping of at least n bytes, advised for huge pages; nullptr when none can be made.
void* MapAligned(size_t n, size_t& length) {
  length = RoundUp(n, kHugePage);
  const size_t span = length + kHugePage;
  void* base = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = RoundUp(start, kHugePage);
  // Give back the slack on both sides, so that only the aligned mapping remains.
  if (aligned > start) munmap(base, aligned - start);
  if (const uintptr_t tail = start + span - (aligned + length); tail > 0) {
    munmap(reinterpret_cast<void*>(aligned + length), tail);
  }
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, length, MADV_HUGEPAGE);  // advice: an error (no THP in this kernel) changes nothing
  return p;
}

class LargeTensorAllocator final : public c10::Allocator {
 public:
  explicit LargeTensorAllocator(c10::Allocator* small) : small_(small) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n >= kLargeTensorBytes) {
      size_t length = 0;
      if (void* p = MapAligned(n, length)) {
        TheMappings().Add(p, length);
        return {p, p, &Release, c10::Device(c10::DeviceType::CPU)};
      }
      // No mapping: LibTorch's allocator tries, and reports the failure in its words when it fails too.
    }
    return small_->allocate(n);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Release; }

 private:
  c10::Allocator* small_;
};

}  // namespace

void UseHugePagesForLargeTensors() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* setting = std::getenv("QUARK_HUGE_PAGES");
    if (setting != nullptr && std::strcmp(setting, "0") == 0) return;
    c10::Allocator* small = c10::GetDefaultCPUAllocator();
    g_small_deleter = small->raw_deleter();
    if (g_small_deleter == nullptr) return;  // Release could not hand LibTorch's blocks back
    // SetCPUAllocator takes ownership; the allocator lives as long as the process.
    c10::SetCPUAllocator(new LargeTensorAllocator(small), /*priority=*/0);
  });
}

}  // namespace quark

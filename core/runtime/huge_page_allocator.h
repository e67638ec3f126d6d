// LibTorch's CPU tensors on transparent huge pages.
//
// Why: a pass's large temporaries (a weight's fake-quantized copy, the clip search's products, GPTQ's blocks) are
// fresh memory each time, and glibc maps an allocation over 32 MiB (and many smaller ones) anew and unmaps it when
// freed, so every such tensor is first touched one 4 KiB page fault at a time. On this project's VMs that first touch
// runs at 0.3 GB/s where writing the same memory again runs at 3 GB/s; on 2 MiB pages it runs at 3.8 GB/s, and
// later passes over it gain from the fewer TLB misses (docs/results/engine.md, "Huge pages for the CPU's tensors").
// Debian's kernels leave huge pages to madvise, and LibTorch 1.13's allocator does not ask for them.
//
// Tensors of kHugePageThresholdBytes or more are aligned to 2 MiB and advised MADV_HUGEPAGE; smaller ones, and every
// tensor when QUARK_HUGE_PAGES=0, come from LibTorch's own CPU allocator. Memory is freed by its pointer alone, as
// the allocation meter (allocation_meter.h) requires of what it counts.
#pragma once

#include <cstddef>

namespace quark::runtime {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;
inline constexpr std::size_t kHugePageThresholdBytes = kHugePageBytes;

/// Puts the huge-page allocator in front of LibTorch's CPU allocator for the rest of the process, unless the
/// environment says QUARK_HUGE_PAGES=0. Idempotent; returns whether it is installed. InitEngine calls it.
bool InstallHugePageCpuAllocator();

/// Whether InstallHugePageCpuAllocator installed it.
bool HugePageCpuAllocatorInstalled();

}  // namespace quark::runtime

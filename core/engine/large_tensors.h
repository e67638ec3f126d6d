// Where LibTorch's CPU tensors of tens of megabytes come from.
#pragma once

#include <cstddef>

namespace quark {

/// Tensors from this size up get mappings of their own (see UseHugePagesForLargeTensors).
inline constexpr size_t kLargeTensorBytes = size_t{32} << 20;

/// Makes LibTorch's CPU allocator give every tensor of kLargeTensorBytes or more a mapping of its own, aligned to
/// 2 MiB and advised for transparent huge pages; smaller ones still come from LibTorch's allocator. Large tensors
/// (K x K Hessians, weights, a layer's activations) are mapped fresh by malloc anyway, and their first touch then
/// faults in 4 KiB pages: about 27 ms for 64 MiB on a 2-core VM against 10 ms in 2 MiB pages (bench/algorithms,
/// docs/results.md). Where the kernel's THP mode is "never" the advice does nothing. Idempotent; QUARK_HUGE_PAGES=0
/// leaves LibTorch's allocator alone.
void UseHugePagesForLargeTensors();

}  // namespace quark

// How much memory a compute device has free, for the default of the streamer's device budget
// (StreamerOptions::device_memory_budget): a run on a GPU is bounded by what the device has when it starts, without
// anyone having to say so, and fails naming the layer and the bytes instead of dying in the allocator.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/runtime/compute_device.h"

namespace quark::runtime {

/// Free bytes of `device`'s memory now, where this build can ask: a CUDA device when the CUDA kernels were built
/// (cudaMemGetInfo), or a device type a probe was registered for. nullopt for the CPU (no device budget applies: the
/// host's own limits guard it) and for devices nothing can ask.
std::optional<int64_t> FreeDeviceMemory(const ComputeDevice& device);

using FreeMemoryProbe = std::function<std::optional<int64_t>(c10::DeviceIndex index)>;
/// Makes `probe` answer FreeDeviceMemory for devices of `type` (an empty probe removes it). Builds with another
/// backend register theirs; tests register one for LibTorch's lazy device.
void RegisterFreeMemoryProbe(c10::DeviceType type, FreeMemoryProbe probe);

/// The share of the free memory a run budgets when none is given. The rest is for what the streamer's formula does
/// not count: the CUDA context's and cuBLAS's workspaces and the caching allocator's rounding and fragmentation.
inline constexpr double kDefaultBudgetShareOfFree = 0.9;

/// The budget a run on `device` holds to: `requested` when positive; else kDefaultBudgetShareOfFree of
/// FreeDeviceMemory(device) where the device reports it; else 0 (no budget). INVALID_ARGUMENT naming `what` for a
/// negative request.
absl::StatusOr<int64_t> DeviceMemoryBudget(const ComputeDevice& device, int64_t requested, const std::string& what);

}  // namespace quark::runtime

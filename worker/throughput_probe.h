// The microbenchmarks a worker runs once at start (a few seconds) so that quarkd can estimate jobs on it
// (core/estimate/job_estimate.h): float32 GEMM, GPTQ's Cholesky chain, per-group fake quantization and the disk of
// its data folder, all at the engine's thread count, plus its memory. Each measurement repeats its kernel until
// kMinProbeSeconds have passed and keeps the median repetition (the typical contention of a shared host).
#pragma once

#include <string>

#include "quark/v1/worker.pb.h"

namespace quark::worker {

inline constexpr double kMinProbeSeconds = 0.4;

/// Measures in `data_dir` (a scratch file is written and removed there). Never fails: a rate that cannot be
/// measured (an unwritable folder) is left 0, which quarkd replaces by its reference rate.
quark::v1::internal::WorkerThroughput MeasureThroughput(const std::string& data_dir);

/// Physical memory, bounded by the cgroup's memory.max when one is set.
int64_t HostMemoryBytes();

}  // namespace quark::worker

// Which queued jobs a worker may lease. A job that asks for GPUs (JobSpec.resources.gpus) goes only to a worker that
// announced at least that many GPU devices at registration ("cuda:0", "hip:1"; "cpu" is none): a CPU worker that
// leased a GPU job would run it on the CPU at a fraction of the speed it was sized for, or fail it. A job whose
// estimated peak memory (Job.needs_host_memory_bytes / needs_gpu_memory_bytes, recorded at SubmitJob) is above the
// memory a worker announced (RegisterRequest.throughput) is not that worker's either: it would die of OOM there, or
// swap for hours. 0 on either side is unknown and fits: a worker that measured nothing takes any job, as does a job
// quarkd could not estimate.
//
// The PostgreSQL claim spells the same rule in SQL (PgWorkerFitSql, postgres_job_store.h); a test holds the two
// to the same answers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/repeated_ptr_field.h>

#include "quark/v1/service.pb.h"
#include "quark/v1/worker.pb.h"

namespace quark::server {

/// What a worker announced at registration.
struct WorkerCapacity {
  int gpus = 0;                    // GPU devices among its devices
  int64_t host_memory_bytes = 0;   // 0 = unknown (not measured)
  int64_t gpu_memory_bytes = 0;    // 0 = unknown or none
};

/// What a queued job asks of its worker.
struct JobDemand {
  int gpus = 0;                    // spec.resources.gpus
  int64_t host_memory_bytes = 0;   // 0 = unknown
  int64_t gpu_memory_bytes = 0;    // 0 = unknown; only set for jobs asking for GPUs
};

/// Why a worker does not fit a job: the first resource short of the job's demand.
enum class Shortfall { kNone, kGpus, kHostMemory, kGpuMemory };

/// The GPU devices among a worker's announced devices.
int GpuDeviceCount(const google::protobuf::RepeatedPtrField<std::string>& devices);
int GpuDeviceCount(const std::vector<std::string>& devices);

WorkerCapacity CapacityOf(const quark::v1::internal::RegisterRequest& request);
JobDemand DemandOf(const quark::v1::Job& job);

/// kNone when a worker of `worker` may run a job of `job`; else the first resource it lacks (GPUs, then host
/// memory, then GPU memory).
Shortfall ShortfallOf(const WorkerCapacity& worker, const JobDemand& job);

/// Whether a worker of `worker` may run a job of `job` (ShortfallOf is kNone).
bool WorkerFitsJob(const WorkerCapacity& worker, const JobDemand& job);

/// "host" or "gpu" for a memory shortfall (the skip metric's label), "" otherwise.
const char* MemoryLabel(Shortfall shortfall);

/// "waiting for a worker with >= 60.0 GiB host memory (worker w-small has 24.0 GiB)": the line logged once per job
/// passed over for memory.
std::string MemoryWaitText(const JobDemand& job, const WorkerCapacity& worker, Shortfall shortfall,
                           const std::string& worker_id);

}  // namespace quark::server

#include "server/scheduler/worker_fit.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace quark::server {
namespace {

// 0 on either side is unknown, and unknown fits.
bool MemoryFits(int64_t need, int64_t have) { return need <= 0 || have <= 0 || need <= have; }

bool IsGpuDevice(const std::string& device) { return device.rfind("cuda", 0) == 0 || device.rfind("hip", 0) == 0; }

std::string Gib(int64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / double(int64_t{1} << 30)); }

}  // namespace

int GpuDeviceCount(const google::protobuf::RepeatedPtrField<std::string>& devices) {
  return static_cast<int>(std::count_if(devices.begin(), devices.end(), IsGpuDevice));
}

int GpuDeviceCount(const std::vector<std::string>& devices) {
  return static_cast<int>(std::count_if(devices.begin(), devices.end(), IsGpuDevice));
}

WorkerCapacity CapacityOf(const quark::v1::internal::RegisterRequest& request) {
  WorkerCapacity capacity;
  capacity.gpus = GpuDeviceCount(request.devices());
  capacity.host_memory_bytes = request.throughput().host_memory_bytes();
  capacity.gpu_memory_bytes = request.throughput().gpu_memory_bytes();
  return capacity;
}

JobDemand DemandOf(const quark::v1::Job& job) {
  JobDemand demand;
  demand.gpus = job.spec().resources().gpus();
  demand.host_memory_bytes = job.needs_host_memory_bytes();
  demand.gpu_memory_bytes = job.needs_gpu_memory_bytes();
  return demand;
}

Shortfall ShortfallOf(const WorkerCapacity& worker, const JobDemand& job) {
  if (job.gpus > worker.gpus) return Shortfall::kGpus;
  if (!MemoryFits(job.host_memory_bytes, worker.host_memory_bytes)) return Shortfall::kHostMemory;
  if (!MemoryFits(job.gpu_memory_bytes, worker.gpu_memory_bytes)) return Shortfall::kGpuMemory;
  return Shortfall::kNone;
}

bool WorkerFitsJob(const WorkerCapacity& worker, const JobDemand& job) {
  return ShortfallOf(worker, job) == Shortfall::kNone;
}

const char* MemoryLabel(Shortfall shortfall) {
  switch (shortfall) {
    case Shortfall::kHostMemory: return "host";
    case Shortfall::kGpuMemory: return "gpu";
    default: return "";
  }
}

std::string MemoryWaitText(const JobDemand& job, const WorkerCapacity& worker, Shortfall shortfall,
                           const std::string& worker_id) {
  const bool gpu = shortfall == Shortfall::kGpuMemory;
  return absl::StrFormat("waiting for a worker with >= %s %s memory (worker %s has %s)",
                         Gib(gpu ? job.gpu_memory_bytes : job.host_memory_bytes), gpu ? "GPU" : "host", worker_id,
                         Gib(gpu ? worker.gpu_memory_bytes : worker.host_memory_bytes));
}

}  // namespace quark::server

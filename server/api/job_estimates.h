// ValidateConfig's estimates and SubmitJob's fit check: core/estimate's model applied to every kind of worker
// this quarkd knows (worker_profiles.h). A kind is a device type with its measured rates and memory: identical
// hosts (rates equal to two significant digits, memory to 0.1 GiB) share one estimate.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/config/quant_spec.h"
#include "core/estimate/model_shape.h"
#include "quark/v1/service.pb.h"
#include "server/api/worker_profiles.h"

namespace quark::server {

/// Fills response->estimates for `config` (resolved, without the request's algo_config, which this appends) on
/// the model in `model_dir`, one per kind of `workers` (a reference one, with a warning, when there are none).
/// Problems with the request (an unknown algorithm, an unreadable model) go to response->errors.
/// The evaluation file's size (its token estimate) is read through the walk confined to `read_roots` (the
/// caller's tenant's roots): nothing outside them is measured.
void AddEstimates(const quark::v1::ValidateConfigRequest& request, const quark::Config& config,
                  const std::string& model_dir, const std::vector<std::string>& read_roots,
                  const std::vector<WorkerProfile>& workers, quark::v1::ValidateConfigResponse* response);

/// What a job needs of its worker's memory, recorded in the job (Job.needs_*_memory_bytes) and matched against
/// each worker's announced memory at lease time (worker_fit.h). 0 = unknown (any worker).
struct JobMemoryNeeds {
  int64_t host_bytes = 0;
  int64_t gpu_bytes = 0;   // only for jobs asking for GPUs
  std::string host_phase;  // where the peak is ("gptq"; "spec.resources.memory_mb" when the spec asks for more)
  std::string gpu_phase;
};

/// The job's estimated peak memory on the model in `model_dir` (core/estimate). Made on the reference rates, not
/// per registered kind: peak memory depends on the device only, not on any worker's speed, and a job queued before
/// any worker registered is matched as well as one queued after. Host memory is the estimate on a CPU kind, for
/// GPU jobs too: the engine is LibTorch's CPU build, so every worker today keeps the whole working set on the host
/// (a CUDA kind would keep two streamed layers there, and would under-state what a GPU job takes on today's
/// workers; on a future CUDA worker the CPU figure over-states it, which can only skip a worker, never OOM one).
/// GPU memory, for a job asking for GPUs, is the estimate on a CUDA kind. At least
/// spec.resources.memory_mb (the size a job asks a Slurm worker for). Zeros when the model cannot be inspected
/// here (`model` null: not file://, unreadable: the worker finds out) or the job is llama.cpp's own GGUF
/// quantization (not modelled).
/// The evaluation file is measured as in AddEstimates, inside `read_roots`.
JobMemoryNeeds EstimateJobNeeds(const quark::v1::JobSpec& spec, const estimate::ModelShape* model,
                                const std::vector<std::string>& read_roots);

/// What can bring a worker with GPUs besides the workers registered now. A job asking for GPUs that neither the
/// registered workers nor these can ever provide is refused at submit (CheckJobFits).
struct GpuSources {
  int local_gpus_per_worker = 0;  // the local pool gives each of its workers one visible GPU (1), or none (0)
  bool executor_starts_gpu_workers = false;  // --executor slurm: sbatch --gres=gpu:N starts one with N GPUs
  bool remote_gpu_workers = false;           // --expect-gpu-workers: GPU workers join from elsewhere (Kubernetes)
  std::string executor = "local";            // named in the refusal
};

/// FAILED_PRECONDITION naming spec.resources.gpus when the job asks for GPUs and no registered worker announced
/// that many GPU devices ("cuda:N", "hip:N") and nothing in `sources` can start one that has them. Else, among the
/// workers with the GPUs, RESOURCE_EXHAUSTED when at least one worker is known and none of them would be handed the
/// job at lease time (WorkerFitsJob): its estimated peak host memory is above every worker's announced memory
/// ("needs 31.2 GiB host memory at phase gptq; the largest worker has 24.0 GiB"). OK when it fits one, when no
/// worker is known and it asks for no GPU, when its needs are unknown (zeros) and it asks for no GPU, or when no
/// registered worker has its GPUs but `sources` can bring one (the job waits: GpuWaitText).
absl::Status CheckJobFits(const quark::v1::JobSpec& spec, const JobMemoryNeeds& needs,
                          const std::vector<WorkerProfile>& workers, const GpuSources& sources = {});

/// "waiting for a worker with 2 GPUs (...)" when the job asks for GPUs and no worker in `workers` has that many
/// (the event SubmitJob appends to such a job); "" otherwise.
std::string GpuWaitText(const quark::v1::JobSpec& spec, const std::vector<WorkerProfile>& workers,
                        const GpuSources& sources);

}  // namespace quark::server

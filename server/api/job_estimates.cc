#include "server/api/job_estimates.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/config/proto_convert.h"
#include "core/eval/evaluation_plan_proto.h"
#include "core/estimate/expert_group_choice.h"
#include "core/estimate/job_estimate.h"
#include "server/api/model_fit.h"
#include "server/api/model_view.h"
#include "server/api/spec_validation.h"
#include "server/api/uri_policy.h"
#include "server/scheduler/worker_fit.h"

namespace quark::server {
namespace {

constexpr int kDefaultSamples = 128;   // CalibrationSpec's defaults
constexpr int kDefaultSeqLen = 512;
constexpr int kDefaultEvalSeqLen = 2048;
constexpr int64_t kBytesPerToken = 4;  // BPE tokenizers average about four characters per token on English text

struct Kind {
  std::string label;
  std::vector<std::string> worker_ids;
  estimate::Throughput rates;
};

std::string Gib(uint64_t bytes) { return absl::StrFormat("%.1f GiB", bytes / double(1ull << 30)); }

std::string TwoDigits(double v) { return absl::StrFormat("%.2g", v); }

// Identical hosts share one kind (and one estimate).
std::vector<Kind> KindsOf(const std::vector<WorkerProfile>& workers) {
  std::map<std::string, Kind> kinds;
  for (const WorkerProfile& w : workers) {
    const estimate::Throughput& r = w.rates;
    const std::string key =
        absl::StrCat(r.device, "|", r.threads, "|", TwoDigits(r.gemm_flops), "|", TwoDigits(r.cholesky_flops), "|",
                     TwoDigits(r.fake_quant_bytes_per_s), "|",
                     TwoDigits(r.float_codes_bytes_per_s), "|", TwoDigits(r.disk_write_bytes_per_s), "|",
                     TwoDigits(r.disk_read_bytes_per_s), "|", Gib(r.host_memory_bytes), "|", Gib(r.gpu_memory_bytes),
                     "|", w.measured);
    Kind& kind = kinds[key];
    if (kind.worker_ids.empty()) {
      kind.rates = r;
      kind.label = absl::StrFormat("%s, %d threads, %.0f GFLOP/s GEMM, %s memory%s%s", r.device, r.threads,
                                   r.gemm_flops / 1e9, r.host_memory_bytes ? Gib(r.host_memory_bytes) : "unknown",
                                   r.gpu_memory_bytes ? absl::StrCat(", GPU ", Gib(r.gpu_memory_bytes)) : "",
                                   w.measured ? "" : " (not measured: reference rates)");
    }
    kind.worker_ids.push_back(w.worker_id);
  }
  std::vector<Kind> out;
  for (auto& [key, kind] : kinds) out.push_back(std::move(kind));
  return out;
}

quark::v1::ExportFormat ToProto(estimate::ExportKind kind) {
  switch (kind) {
    case estimate::ExportKind::kGguf: return quark::v1::EXPORT_FORMAT_GGUF;
    case estimate::ExportKind::kOnnx: return quark::v1::EXPORT_FORMAT_ONNX;
    case estimate::ExportKind::kCompressedTensors: return quark::v1::EXPORT_FORMAT_COMPRESSED_TENSORS;
    default: return quark::v1::EXPORT_FORMAT_HF_QUARK;
  }
}

// The job's sizes as the engine will see them. Evaluation tokens come from the text file's size (file:// only).
estimate::JobInputs Inputs(const quark::Config& config, const quark::v1::CalibrationSpec& calibration,
                           const google::protobuf::RepeatedField<int>& formats, const quark::v1::EvaluationSpec& eval,
                           const std::string& gguf_type, const std::vector<std::string>& read_roots) {
  estimate::JobInputs job;
  job.config = config;
  job.calibration_samples = calibration.num_samples() > 0 ? calibration.num_samples() : kDefaultSamples;
  job.calibration_seq_len = calibration.seq_len() > 0 ? calibration.seq_len() : kDefaultSeqLen;
  job.formats = ExportKindsOf(formats);
  job.gguf_type = gguf_type;
  // Measured through the walk confined to the caller's roots: the name may lead elsewhere since the URI checks.
  const std::string eval_path = UriPolicy::FilePath(eval.uri());
  if (!eval_path.empty()) {
    const absl::StatusOr<int64_t> bytes = ConfinedFileSize(read_roots, eval_path);
    if (bytes.ok()) {
      job.evaluation_seq_len = eval.seq_len() > 0 ? eval.seq_len() : kDefaultEvalSeqLen;
      job.evaluation_tokens = *bytes / kBytesPerToken;
      if (eval.max_windows() > 0) {
        job.evaluation_tokens = std::min<int64_t>(job.evaluation_tokens, int64_t{eval.max_windows()} * job.evaluation_seq_len);
      }
    }
  }
  job.accuracy_gate = eval.has_max_ppl_increase();
  // #31: tasks on the float model and each export the engine reads back (hf_quark, gguf, compressed_tensors); KLD of
  // each of those.
  int64_t readable = 0;
  for (estimate::ExportKind kind : job.formats) readable += kind == estimate::ExportKind::kOnnx ? 0 : 1;
  const quark::eval::EvaluationPlan plan = quark::eval::PlanFromProto(eval);
  job.tasks = plan.tasks;
  job.task_limit = plan.task_limit;
  job.num_fewshot = plan.num_fewshot;
  job.task_models = 1 + readable;
  job.kld_exports = plan.kld ? readable : 0;
  return job;
}

absl::StatusOr<quark::Config> WithAlgos(quark::Config config,
                                        const google::protobuf::RepeatedPtrField<quark::v1::AlgoConfig>& algos,
                                        const std::string& prefix) {
  for (int i = 0; i < algos.size(); ++i) {
    absl::StatusOr<quark::AlgoConfig> algo = FromProto(algos[i], absl::StrCat(prefix, "algo_config[", i, "]"));
    if (!algo.ok()) return algo.status();
    config.algo_config.push_back(*std::move(algo));
  }
  return config;
}

// Why `e` cannot run on `kind`, or "".
std::string DoesNotFit(const estimate::JobEstimate& e, const estimate::Throughput& rates) {
  if (rates.host_memory_bytes > 0 && e.peak_host_bytes > rates.host_memory_bytes) {
    return absl::StrCat("needs ", Gib(e.peak_host_bytes), " host memory at phase ", e.peak_host_phase, "; the worker has ",
                        Gib(rates.host_memory_bytes));
  }
  if (rates.gpu_memory_bytes > 0 && e.peak_gpu_bytes > rates.gpu_memory_bytes) {
    return absl::StrCat("needs ", Gib(e.peak_gpu_bytes), " GPU memory at phase ", e.peak_gpu_phase, "; the worker has ",
                        Gib(rates.gpu_memory_bytes));
  }
  return "";
}

void FillEstimate(const estimate::JobEstimate& e, const Kind& kind, quark::v1::Estimate* out) {
  out->set_worker_kind(kind.label);
  for (const std::string& id : kind.worker_ids) out->add_worker_ids(id);
  for (const estimate::PhaseEstimate& p : e.phases) {
    quark::v1::PhaseEstimate* phase = out->add_phases();
    phase->set_phase(p.phase);
    phase->set_seconds(p.seconds);
    phase->set_peak_host_bytes(static_cast<int64_t>(p.peak_host_bytes));
    phase->set_peak_gpu_bytes(static_cast<int64_t>(p.peak_gpu_bytes));
  }
  for (const estimate::ArtifactEstimate& a : e.artifacts) {
    quark::v1::ArtifactEstimate* artifact = out->add_artifacts();
    artifact->set_format(ToProto(a.format));
    artifact->set_bytes(static_cast<int64_t>(a.bytes));
  }
  out->set_total_seconds(e.total_seconds);
  out->set_peak_host_bytes(static_cast<int64_t>(e.peak_host_bytes));
  out->set_peak_gpu_bytes(static_cast<int64_t>(e.peak_gpu_bytes));
  out->set_host_memory_bytes(static_cast<int64_t>(kind.rates.host_memory_bytes));
  out->set_gpu_memory_bytes(static_cast<int64_t>(kind.rates.gpu_memory_bytes));
  out->set_does_not_fit(DoesNotFit(e, kind.rates));
}

}  // namespace

void AddEstimates(const quark::v1::ValidateConfigRequest& request, const quark::Config& config,
                  const std::string& model_dir, const std::vector<std::string>& read_roots,
                  const std::vector<WorkerProfile>& workers, quark::v1::ValidateConfigResponse* response) {
  if (model_dir.empty()) {
    response->add_errors("estimate: needs a file:// model_uri (the server reads its config.json and safetensors headers)");
    return;
  }
  absl::StatusOr<quark::Config> full = WithAlgos(config, request.algo_config(), "");
  if (!full.ok()) {
    response->add_errors(std::string(full.status().message()));
    return;
  }
  absl::StatusOr<estimate::ModelShape> model = estimate::ReadModelShape(model_dir);
  if (!model.ok()) {
    response->add_errors(absl::StrCat("model_uri: ", model.status().message()));
    return;
  }
  const estimate::JobInputs job = Inputs(*full, request.calibration(), request.export_formats(), request.evaluation(),
                                         request.gguf_type(), read_roots);
  std::vector<Kind> kinds = KindsOf(workers);
  if (kinds.empty()) {
    response->add_warnings("estimate: no worker is registered; the estimate is for the reference rates (2-core VM, "
                           "1 thread) of docs/results.md");
    kinds.push_back({"reference (no worker registered)", {}, estimate::ReferenceThroughput()});
  }
  bool noted = false;
  for (const Kind& kind : kinds) {
    absl::StatusOr<estimate::JobEstimate> e = estimate::EstimateJob(*model, job, kind.rates);
    if (!e.ok()) {
      response->add_errors(absl::StrCat("estimate (", kind.label, "): ", e.status().message()));
      continue;
    }
    if (!noted) {
      for (const std::string& note : e->notes) response->add_warnings(absl::StrCat("estimate: ", note));
      noted = true;
    }
    FillEstimate(*e, kind, response->add_estimates());
  }
}

JobMemoryNeeds EstimateJobNeeds(const quark::v1::JobSpec& spec, const estimate::ModelShape* model,
                                const std::vector<std::string>& read_roots) {
  JobMemoryNeeds needs;
  const bool has_preset = spec.quantization_case() == quark::v1::JobSpec::kPreset;
  const bool has_config = spec.quantization_case() == quark::v1::JobSpec::kConfig;
  if (model != nullptr && (has_preset || has_config)) {  // else llama.cpp's own GGUF quantization: not modelled
    absl::StatusOr<quark::Config> config =
        ResolveRequestConfig("spec.", has_config ? &spec.config() : nullptr, has_preset ? &spec.preset() : nullptr,
                             spec.kv_cache_dtype(), spec.exclude());
    if (config.ok()) config = WithAlgos(*std::move(config), spec.algo_config(), "spec.");
    if (config.ok()) {
      estimate::JobInputs inputs =
          Inputs(*config, spec.calibration(), spec.export_formats(), spec.evaluation(), spec.gguf_type(), read_roots);
      inputs.gguf_pure = spec.gguf_pure();
      inputs.gguf_imatrix = !spec.gguf_imatrix_uri().empty() || spec.gguf_imatrix_from_calibration();
      estimate::Throughput rates = estimate::ReferenceThroughput();
      // An MoE job that can stream its experts runs in what one expert at a time takes: a worker short of memory
      // streams them by itself (worker/engine_pipeline.cc), so a smaller worker can take it.
      absl::StatusOr<estimate::JobEstimate> cpu = estimate::LeastHostMemoryEstimate(*model, inputs, rates);
      if (cpu.ok()) {
        needs.host_bytes = static_cast<int64_t>(cpu->peak_host_bytes);
        needs.host_phase = cpu->peak_host_phase;
      }
      if (spec.resources().gpus() > 0) {
        rates.device = "cuda";
        absl::StatusOr<estimate::JobEstimate> gpu = estimate::EstimateJob(*model, inputs, rates);
        if (gpu.ok()) {
          needs.gpu_bytes = static_cast<int64_t>(gpu->peak_gpu_bytes);
          needs.gpu_phase = gpu->peak_gpu_phase;
        }
      }
    }
  }
  const int64_t asked = spec.resources().memory_mb() << 20;
  if (asked > needs.host_bytes) {
    needs.host_bytes = asked;
    needs.host_phase = "spec.resources.memory_mb";
  }
  return needs;
}

namespace {

int MostGpus(const std::vector<WorkerProfile>& workers) {
  int most = 0;
  for (const WorkerProfile& w : workers) most = std::max(most, GpuDeviceCount(w.devices));
  return most;
}

std::string GpusText(int gpus) { return gpus == 1 ? std::string("a GPU") : absl::StrCat(gpus, " GPUs"); }

// Whether something other than the registered workers can bring a worker with `gpus` GPUs.
bool CanStartGpuWorker(const GpuSources& sources, int gpus) {
  return sources.executor_starts_gpu_workers || sources.remote_gpu_workers || sources.local_gpus_per_worker >= gpus;
}

}  // namespace

absl::Status CheckJobFits(const quark::v1::JobSpec& spec, const JobMemoryNeeds& needs,
                          const std::vector<WorkerProfile>& workers, const GpuSources& sources) {
  const int gpus = spec.resources().gpus();
  if (gpus > 0 && MostGpus(workers) < gpus && !CanStartGpuWorker(sources, gpus)) {
    const int most = MostGpus(workers);
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.resources.gpus: the job asks for ", GpusText(gpus), " and no worker can ever have ",
        gpus == 1 ? "one" : "that many", ": ",
        most == 0 ? absl::StrCat("none of the ", workers.size(), " registered workers announced a GPU device (cuda:N, "
                                 "hip:N)")
                  : absl::StrCat("the registered workers have at most ", most),
        ", and executor ", sources.executor, " starts no worker with ", gpus == 1 ? "a GPU" : "them",
        sources.local_gpus_per_worker > 0 ? " (a local worker has one GPU)" : " (no local GPU is visible)"));
  }
  if (workers.empty()) return absl::OkStatus();
  const JobDemand demand{gpus, needs.host_bytes, needs.gpu_bytes};
  // Among the workers with the GPUs, the one with the most host memory names the refusal (as ValidateConfig's
  // estimates, the largest worker is the one a user would grow).
  const WorkerProfile* largest = nullptr;
  Shortfall largest_shortfall = Shortfall::kNone;
  for (const WorkerProfile& w : workers) {
    const WorkerCapacity capacity{GpuDeviceCount(w.devices), static_cast<int64_t>(w.rates.host_memory_bytes),
                                  static_cast<int64_t>(w.rates.gpu_memory_bytes)};
    const Shortfall shortfall = ShortfallOf(capacity, demand);
    if (shortfall == Shortfall::kNone) return absl::OkStatus();
    if (shortfall == Shortfall::kGpus) continue;
    if (largest == nullptr || w.rates.host_memory_bytes > largest->rates.host_memory_bytes) {
      largest = &w;
      largest_shortfall = shortfall;
    }
  }
  // No registered worker has the GPUs, but one that has them can be started: the job waits for it.
  if (largest == nullptr) return absl::OkStatus();
  std::string why;
  if (largest_shortfall == Shortfall::kGpuMemory) {
    why = absl::StrCat("needs ", Gib(needs.gpu_bytes), " GPU memory at phase ", needs.gpu_phase,
                       "; the largest worker has ", Gib(largest->rates.gpu_memory_bytes));
  } else {
    why = absl::StrCat("needs ", Gib(needs.host_bytes), " host memory at phase ", needs.host_phase,
                       "; the largest worker has ", Gib(largest->rates.host_memory_bytes));
  }
  return absl::ResourceExhaustedError(absl::StrCat("spec: the job fits no registered worker: ", why));
}

std::string GpuWaitText(const quark::v1::JobSpec& spec, const std::vector<WorkerProfile>& workers,
                        const GpuSources& sources) {
  const int gpus = spec.resources().gpus();
  if (gpus <= 0 || MostGpus(workers) >= gpus) return "";
  std::string from = sources.executor_starts_gpu_workers ? absl::StrCat("executor ", sources.executor, " starts one")
                     : sources.local_gpus_per_worker >= gpus ? std::string("a local worker with a GPU is starting")
                                                            : std::string("GPU workers are expected to join");
  return absl::StrCat("waiting for a worker with ", GpusText(gpus), " (no registered worker has ",
                      gpus == 1 ? "one" : "that many", "; ", from, ")");
}

}  // namespace quark::server

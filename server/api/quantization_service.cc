#include "server/api/quantization_service.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/base/log.h"
#include "server/log_text.h"
#include "core/checkpoint/model_modules.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "core/config/validation.h"
#include "server/api/job_estimates.h"
#include "server/api/model_fit.h"
#include "server/api/model_view.h"
#include "server/api/request_limits.h"
#include "server/api/spec_validation.h"
#include "server/api/status_util.h"
#include "server/api/watch_job_reactor.h"
#include "server/dedup/content_key.h"
#include "server/dedup/result_verification.h"
#include "server/scheduler/auto_search_plan.h"

namespace quark::server {
namespace {

constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;
// gRPC clients accept 4 MiB messages by default; a page's framing adds a few bytes per job.
constexpr int64_t kMaxPageBytes = int64_t{3} << 20;
constexpr size_t kMaxPageTokenBytes = 32;

void FillLayers(const LayerPlan& plan, quark::v1::ValidateConfigResponse* response) {
  for (const LayerAssignment& layer : plan.layers) {
    quark::v1::LayerAssignment* out = response->add_layers();
    out->set_module(layer.module);
    out->set_module_type(layer.module_type);
    out->set_source(layer.SourceLabel());
    *out->mutable_config() = ToProto(layer.config);
  }
}

}  // namespace

absl::Status CheckDeadline(const grpc::CallbackServerContext* context) {
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("deadline passed before the request was handled");
  }
  return absl::OkStatus();
}

absl::StatusOr<SubmitOptions> QuantizationServiceImpl::PrepareSubmit(const Principal& principal,
                                                                     const quark::v1::SubmitJobRequest& request,
                                                                     const std::vector<WorkerProfile>& live) {
  absl::Status status = ValidateSubmitRequest(request, *policy_);
  if (status.ok()) status = access_->CheckTenantUris(principal, request.spec());
  JobMemoryNeeds needs;
  const std::vector<std::string> read_roots = access_->ModelReadRoots(principal, policy_->roots());
  if (status.ok()) {
    // The estimate reads config.json and the tensors' headers: through a view pinned inside the tenant's roots, so
    // a symlink to another tenant's model is refused here rather than read (a missing folder keeps the estimate's
    // own handling).
    std::string model_dir = UriPolicy::FilePath(request.spec().model_uri());
    std::unique_ptr<ModelView> view;
    if (!model_dir.empty()) {
      absl::StatusOr<std::unique_ptr<ModelView>> opened =
          ModelView::Open(read_roots, model_dir);
      if (opened.ok()) {
        view = *std::move(opened);
        model_dir = view->path();
      } else if (opened.status().code() == absl::StatusCode::kPermissionDenied) {
        status = absl::PermissionDeniedError(absl::StrCat("spec.model_uri: ", opened.status().message()));
      }
    }
    // config.json and the tensors' headers, read once for the memory estimate and the shape check.
    std::optional<estimate::ModelShape> shape;
    if (status.ok() && !model_dir.empty()) {
      if (absl::StatusOr<estimate::ModelShape> read = estimate::ReadModelShape(model_dir); read.ok()) {
        shape = *std::move(read);
      }
    }
    if (status.ok()) needs = EstimateJobNeeds(request.spec(), shape ? &*shape : nullptr, read_roots);
    // #36: a scheme the model's shapes or the exporters cannot take fails here, not on the worker.
    if (status.ok() && view != nullptr && shape) status = CheckSpecFitsModel(request.spec(), *shape);
  }
  if (status.ok() && workers_ != nullptr) status = CheckJobFits(request.spec(), needs, live, gpu_sources_);
  if (!status.ok()) return status;
  SubmitOptions options = access_->SubmitOptionsFor(principal);
  options.needs_host_memory_bytes = needs.host_bytes;
  options.needs_gpu_memory_bytes = needs.gpu_bytes;
  // Keyed even with force (a later submit may reuse this run); hashing happens here, on a cache miss only.
  absl::StatusOr<ContentKey> key = ComputeContentKey(request.spec(), &digests_, read_roots);
  if (key.ok()) options.content_key = key->key;
  if (!options.content_key.empty() && !request.spec().force()) {
    options.reuse_succeeded =
        PrepareVerifiedDedup(*store_, principal.tenant, options.content_key,
                             access_->OutputReadRoots(principal, policy_->roots()), digests_, trust_object_store_);
  }
  if (!key.ok() || key->key.empty()) {
    log::Get("server")->info("job=- not deduplicated: {}",
                             ForLog(key.ok() ? key->not_keyed : key.status().ToString()));
  }
  return options;
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                             const quark::v1::SubmitJobRequest* request,
                                                             quark::v1::Job* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kSubmitter, "SubmitJob");
  if (!principal.ok()) return FinishNow(context, principal.status());  // audited by Authorize
  const std::vector<WorkerProfile> live = workers_ != nullptr ? workers_->Live() : std::vector<WorkerProfile>{};
  absl::Status status = CheckDeadline(context);
  if (status.ok()) status = RefuseQuarkdOnlyFields(request->spec());
  if (status.ok() && (request->spec().sweep_size() > 0 || request->spec().has_auto_search())) {  // #36
    absl::StatusOr<quark::v1::Job> parent = SubmitSweep(*context, *principal, *request, live);
    if (parent.ok()) *response = std::move(*parent);
    return FinishNow(context, parent.status());
  }
  absl::StatusOr<SubmitOptions> options =
      status.ok() ? PrepareSubmit(*principal, *request, live) : absl::StatusOr<SubmitOptions>(status);
  if (!options.ok()) {
    log::Get("server")->info("job=- SubmitJob refused: {}", ForLog(options.status().ToString()));
    // Every refused submission is audited (#29 item 4): bad requests as well as refused URIs.
    access_->Audit(*principal, "submit", "", options.status(), "");
    return FinishNow(context, options.status());
  }
  // Hashing a large model for the first time may outlast the caller's deadline: then no job is created (the
  // digests stay cached, so the caller's retry is quick) rather than one the caller never hears of.
  status = CheckDeadline(context);
  if (!status.ok()) return FinishNow(context, status);
  absl::StatusOr<quark::v1::Job> job = scheduler_->Submit(request->request_id(), request->spec(), *options);
  access_->Audit(*principal, "submit", job.ok() ? job->id() : "", job.status(),
                 absl::StrCat("model=", request->spec().model_uri(), " preset=", PresetLabel(request->spec()),
                              " output=", request->spec().output_uri()));
  if (job.ok() && workers_ != nullptr && job->state() == quark::v1::JOB_STATE_QUEUED) {
    const std::string waiting = GpuWaitText(request->spec(), live, gpu_sources_);
    if (!waiting.empty()) scheduler_->AppendLog(job->id(), waiting).IgnoreError();  // ended already: nothing to say
  }
  if (job.ok()) *response = std::move(*job);
  return FinishNow(context, job.status());
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                          const quark::v1::GetJobRequest* request,
                                                          quark::v1::Job* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kViewer, "GetJob");
  if (!principal.ok()) return FinishNow(context, principal.status());
  if (request->id().empty()) return FinishNow(context, absl::InvalidArgumentError("id: required"));
  absl::StatusOr<quark::v1::Job> job = access_->GetVisibleJob(*principal, request->id());
  if (job.ok()) *response = std::move(*job);
  return FinishNow(context, job.status());
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                            const quark::v1::ListJobsRequest* request,
                                                            quark::v1::ListJobsResponse* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kViewer, "ListJobs");
  if (!principal.ok()) return FinishNow(context, principal.status());
  if (request->page_size() < 0) {
    return FinishNow(context, absl::InvalidArgumentError(
                                  absl::StrCat("page_size: ", request->page_size(), " must not be negative")));
  }
  if (request->page_token().size() > kMaxPageTokenBytes) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                                  "page_token: ", request->page_token().size(), " bytes, not a token from ListJobs")));
  }
  JobFilter filter;
  // Pages end by bytes too: a page of large specs stays far below the largest message a client accepts.
  filter.max_page_bytes = kMaxPageBytes;
  for (int state : request->states()) filter.states.push_back(static_cast<quark::v1::JobState>(state));
  filter.labels.insert(request->labels().begin(), request->labels().end());
  filter.tenant = access_->TenantFilter(*principal);
  int page_size = request->page_size() == 0 ? kDefaultPageSize : std::min(request->page_size(), kMaxPageSize);
  absl::StatusOr<JobPage> page = store_->ListJobs(filter, page_size, request->page_token());
  if (page.ok()) {
    for (quark::v1::Job& job : page->jobs) *response->add_jobs() = std::move(job);
    response->set_next_page_token(page->next_page_token);
  }
  return FinishNow(context, page.status());
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                             const quark::v1::CancelJobRequest* request,
                                                             quark::v1::Job* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kSubmitter, "CancelJob");
  if (!principal.ok()) return FinishNow(context, principal.status());
  if (request->id().empty()) return FinishNow(context, absl::InvalidArgumentError("id: required"));
  // Another tenant's job is NOT_FOUND here exactly as a missing one (and leaves no audit record naming it).
  absl::StatusOr<quark::v1::Job> visible = access_->GetVisibleJob(*principal, request->id());
  if (!visible.ok()) return FinishNow(context, visible.status());
  absl::StatusOr<quark::v1::Job> job = scheduler_->Cancel(request->id());
  access_->Audit(*principal, "cancel", request->id(), job.status(),
                 job.ok() ? absl::StrCat("state=", quark::v1::JobState_Name(job->state())) : "");
  if (job.ok()) *response = std::move(*job);
  return FinishNow(context, job.status());
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::DeleteJob(grpc::CallbackServerContext* context,
                                                             const quark::v1::DeleteJobRequest* request,
                                                             quark::v1::DeleteJobResponse* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kSubmitter, "DeleteJob");
  if (!principal.ok()) return FinishNow(context, principal.status());
  if (request->id().empty()) return FinishNow(context, absl::InvalidArgumentError("id: required"));
  // As CancelJob: another tenant's job is NOT_FOUND exactly as a missing one, with no audit record naming it.
  absl::StatusOr<quark::v1::Job> visible = access_->GetVisibleJob(*principal, request->id());
  if (!visible.ok()) return FinishNow(context, visible.status());
  absl::StatusOr<int64_t> freed = DeleteSweepChildren(*visible);  // #36: a sweep's children go with it
  if (freed.ok()) {
    absl::StatusOr<int64_t> own = store_->DeleteJob(request->id());
    freed = own.ok() ? absl::StatusOr<int64_t>(*freed + *own) : own;
  }
  access_->Audit(*principal, "delete", request->id(), freed.status(),
                 freed.ok() ? absl::StrCat("tenant=", visible->tenant(), " freed_bytes=", *freed) : "");
  if (freed.ok()) {
    response->set_id(request->id());
    response->set_freed_bytes(*freed);
    log::Get("server")->info("job={} deleted by {} ({} bytes freed)", request->id(), ForLog(principal->name), *freed);
  }
  return FinishNow(context, freed.status());
}

grpc::ServerWriteReactor<quark::v1::JobEvent>* QuantizationServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const quark::v1::WatchJobRequest* request) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kViewer, "WatchJob");
  if (!principal.ok()) return new WatchJobReactor(principal.status());
  auto forget = [this](WatchJobReactor* done) {
    std::lock_guard<std::recursive_mutex> lock(watches_mu_);
    watches_.erase(done);
  };
  // Deletes itself in OnDone, which gRPC calls only after this handler returned it: registering it here is safe.
  auto* reactor = new WatchJobReactor(store_, hub_, *request, access_->TenantFilter(*principal), forget);
  std::lock_guard<std::recursive_mutex> lock(watches_mu_);
  watches_[reactor] = context;
  return reactor;
}

void QuantizationServiceImpl::EndRevokedWatches() {
  std::lock_guard<std::recursive_mutex> lock(watches_mu_);
  std::vector<WatchJobReactor*> open;
  for (const auto& [reactor, context] : watches_) open.push_back(reactor);
  for (WatchJobReactor* reactor : open) {
    auto it = watches_.find(reactor);  // an earlier Revoke's inline OnDone may have erased (and deleted) it
    if (it == watches_.end()) continue;
    absl::StatusOr<Principal> principal = access_->Authorize(*it->second, Role::kViewer, "WatchJob");
    if (principal.ok()) continue;
    log::Get("server")->info("job=- WatchJob ended: {}", ForLog(principal.status().ToString()));
    reactor->Revoke(ToGrpcStatus(principal.status()));
  }
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::ListPresets(grpc::CallbackServerContext* context,
                                                               const quark::v1::ListPresetsRequest* request,
                                                               quark::v1::ListPresetsResponse* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kViewer, "ListPresets");
  if (!principal.ok()) return FinishNow(context, principal.status());
  for (const Preset& preset : AllPresets()) {
    quark::v1::Preset* out = response->add_presets();
    out->set_name(preset.name);
    out->set_description(preset.description);
    out->set_legacy(preset.legacy);
    *out->mutable_config() = ToProto(preset.config);
  }
  return FinishNow(context, absl::OkStatus());
}

absl::Status RunValidateConfig(const quark::v1::ValidateConfigRequest& request, const UriPolicy& policy,
                               quark::v1::ValidateConfigResponse* response, const std::vector<WorkerProfile>& workers,
                               const std::vector<std::string>& caller_roots) {
  // Every file this call reads or measures is opened inside these (the caller's tenant's, else the global roots).
  const std::vector<std::string>& read_roots = caller_roots.empty() ? policy.roots() : caller_roots;
  absl::Status status = policy.Check("model_uri", request.model_uri(), false);
  // The estimate reads the data files' sizes: the same roots apply as to a submitted job's.
  if (status.ok()) status = policy.Check("calibration.uri", request.calibration().uri(), false);
  if (status.ok()) status = policy.Check("evaluation.uri", request.evaluation().uri(), false);
  if (!status.ok()) return status;
  bool has_preset = request.quantization_case() == quark::v1::ValidateConfigRequest::kPreset;
  bool has_config = request.quantization_case() == quark::v1::ValidateConfigRequest::kConfig;
  absl::StatusOr<quark::Config> config =
      ResolveRequestConfig("", has_config ? &request.config() : nullptr, has_preset ? &request.preset() : nullptr,
                           request.kv_cache_dtype(), request.exclude());
  if (!config.ok()) {
    response->set_valid(false);
    response->add_errors(std::string(config.status().message()));
    return absl::OkStatus();
  }
  *response->mutable_resolved_config() = ToProto(*config);
  std::vector<ModuleInfo> modules;
  bool have_modules = false;
  std::string path = UriPolicy::FilePath(request.model_uri());
  // Read through descriptors opened inside the caller's roots (ModelView): the URI checks above looked at names
  // that may have changed since, and at links against the global roots only. A missing folder keeps the
  // listing's own error.
  std::unique_ptr<ModelView> view;
  if (!path.empty()) {
    absl::StatusOr<std::unique_ptr<ModelView>> opened = ModelView::Open(read_roots, path);
    if (!opened.ok() && opened.status().code() != absl::StatusCode::kNotFound) {
      response->set_valid(false);
      response->add_errors(absl::StrCat("model_uri: ", opened.status().message()));
      return absl::OkStatus();
    }
    if (opened.ok()) {
      view = *std::move(opened);
      path = view->path();
    }
  }
  if (!path.empty()) {
    absl::StatusOr<std::vector<ModuleInfo>> listed = ListModelModules(path);
    if (!listed.ok()) {
      response->set_valid(false);
      response->add_errors(absl::StrCat("model_uri: ", listed.status().message()));
      return absl::OkStatus();
    }
    modules = std::move(*listed);
    have_modules = true;
  } else if (!request.model_uri().empty()) {
    response->add_warnings("model_uri: only file:// models are inspected by the server; the Config alone was checked");
  }
  for (const ValidationIssue& issue : quark::ValidateConfig(*config, have_modules ? &modules : nullptr)) {
    (issue.severity == ValidationIssue::Severity::kError ? response->add_errors() : response->add_warnings())
        ->assign(issue.ToString());
  }
  if (have_modules) FillLayers(BuildLayerPlan(*config, modules), response);
  if (request.estimate()) AddEstimates(request, *config, path, read_roots, workers, response);
  response->set_valid(response->errors_size() == 0);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* QuantizationServiceImpl::ValidateConfig(grpc::CallbackServerContext* context,
                                                                  const quark::v1::ValidateConfigRequest* request,
                                                                  quark::v1::ValidateConfigResponse* response) {
  absl::StatusOr<Principal> principal = access_->Authorize(*context, Role::kViewer, "ValidateConfig");
  if (!principal.ok()) return FinishNow(context, principal.status());
  absl::Status status = CheckDeadline(context);
  // Sizes first: nothing below may spend time on (or echo) a megabyte-long preset or pattern.
  if (status.ok()) status = CheckRequestSizes(*request, "");
  if (status.ok()) status = CheckJobShape("", request->calibration(), request->evaluation());
  if (status.ok()) status = policy_->Check("model_uri", request->model_uri(), false);
  // Every file the call looks at is in the caller's tenant's roots: the estimate reads the data files' sizes, which
  // would tell another tenant whether a file exists and how large it is.
  if (status.ok()) status = access_->CheckTenantModelUri(*principal, "model_uri", request->model_uri());
  if (status.ok()) {
    status = access_->CheckTenantModelUri(*principal, "calibration.uri", request->calibration().uri());
  }
  if (status.ok()) status = access_->CheckTenantModelUri(*principal, "evaluation.uri", request->evaluation().uri());
  if (status.ok()) {
    status = RunValidateConfig(*request, *policy_, response,
                               workers_ != nullptr ? workers_->Live() : std::vector<WorkerProfile>{},
                               access_->ModelReadRoots(*principal, policy_->roots()));
  }
  return FinishNow(context, status);
}

}  // namespace quark::server

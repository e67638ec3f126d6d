#include "client/commands.h"

#include <grpcpp/grpcpp.h>

#include "client/output.h"
#include "client/job_file.h"

namespace quark::client {

std::unique_ptr<grpc::ClientContext> Unary(const CommandContext& ctx) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + ctx.timeout);
  return context;
}

int RpcError(const CommandContext& ctx, const char* what, const grpc::Status& status) {
  *ctx.err << "quarkctl: " << what << " on " << ctx.server << ": " << StatusCodeName(status.error_code()) << ": "
           << status.error_message() << "\n";
  return kExitRpcError;
}

namespace {

int UsageError(const CommandContext& ctx, const absl::Status& status) {
  *ctx.err << "quarkctl: " << status.message() << "\n";
  return kExitUsage;
}

void PrintJob(const CommandContext& ctx, const quark::v1::Job& job) {
  if (ctx.json) {
    *ctx.out << ToJsonLine(job) << "\n";
  } else {
    *ctx.out << JobTable(job);
  }
  ctx.out->flush();
}

}  // namespace

int SubmitCommand(CommandContext& ctx, const SubmitFlags& flags, const std::string& request_id, bool wait) {
  absl::StatusOr<quark::v1::JobSpec> spec = BuildJobSpec(flags);
  if (!spec.ok()) return UsageError(ctx, spec.status());
  quark::v1::SubmitJobRequest request;
  request.set_request_id(request_id);
  *request.mutable_spec() = *spec;
  quark::v1::Job job;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->SubmitJob(context.get(), request, &job);
  if (!status.ok()) return RpcError(ctx, "SubmitJob", status);
  if (!wait) {
    PrintJob(ctx, job);
    return kExitOk;
  }
  if (!ctx.json) *ctx.out << "submitted " << job.id() << "\n" << std::flush;
  return WatchCommand(ctx, job.id(), 0, /*quiet_events=*/true);
}

int GetCommand(CommandContext& ctx, const std::string& id) {
  quark::v1::GetJobRequest request;
  request.set_id(id);
  quark::v1::Job job;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->GetJob(context.get(), request, &job);
  if (!status.ok()) return RpcError(ctx, "GetJob", status);
  PrintJob(ctx, job);
  return kExitOk;
}

int ListCommand(CommandContext& ctx, const std::vector<std::string>& states, const std::vector<std::string>& labels,
                int page_size, bool all) {
  quark::v1::ListJobsRequest request;
  for (const std::string& name : states) {
    absl::StatusOr<quark::v1::JobState> state = ParseJobState(name);
    if (!state.ok()) return UsageError(ctx, state.status());
    request.add_states(*state);
  }
  if (absl::Status status = AddLabels(labels, *request.mutable_labels()); !status.ok()) return UsageError(ctx, status);
  request.set_page_size(page_size);
  std::vector<quark::v1::Job> jobs;
  for (;;) {
    quark::v1::ListJobsResponse response;
    auto context = Unary(ctx);
    grpc::Status status = ctx.stub->ListJobs(context.get(), request, &response);
    if (!status.ok()) return RpcError(ctx, "ListJobs", status);
    if (ctx.json && !all) {
      *ctx.out << ToJsonLine(response) << "\n";
      return kExitOk;
    }
    jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
    if (!all || response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  if (ctx.json) {
    quark::v1::ListJobsResponse merged;
    for (const auto& job : jobs) *merged.add_jobs() = job;
    *ctx.out << ToJsonLine(merged) << "\n";
  } else {
    *ctx.out << JobListTable(jobs);
  }
  return kExitOk;
}

int CancelCommand(CommandContext& ctx, const std::string& id) {
  quark::v1::CancelJobRequest request;
  request.set_id(id);
  quark::v1::Job job;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->CancelJob(context.get(), request, &job);
  if (!status.ok()) return RpcError(ctx, "CancelJob", status);
  PrintJob(ctx, job);
  return kExitOk;
}

int DeleteCommand(CommandContext& ctx, const std::string& id) {
  quark::v1::DeleteJobRequest request;
  request.set_id(id);
  quark::v1::DeleteJobResponse response;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->DeleteJob(context.get(), request, &response);
  if (!status.ok()) return RpcError(ctx, "DeleteJob", status);
  *ctx.out << (ctx.json ? ToJsonLine(response) + "\n"
                        : "deleted " + response.id() + " (" + std::to_string(response.freed_bytes()) + " bytes freed)\n");
  return kExitOk;
}

int PresetsCommand(CommandContext& ctx) {
  quark::v1::ListPresetsResponse response;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->ListPresets(context.get(), quark::v1::ListPresetsRequest(), &response);
  if (!status.ok()) return RpcError(ctx, "ListPresets", status);
  *ctx.out << (ctx.json ? ToJsonLine(response) + "\n" : PresetsTable(response));
  return kExitOk;
}

int ValidateCommand(CommandContext& ctx, const SubmitFlags& flags) {
  quark::v1::ValidateConfigRequest request;
  request.set_model_uri(flags.model);
  absl::StatusOr<FlagQuantization> quantization = QuantizationFromFlags(flags);
  if (!quantization.ok()) return UsageError(ctx, quantization.status());
  if (quantization->empty()) {
    return UsageError(ctx, absl::InvalidArgumentError("--scheme or --config: one is required"));
  }
  if (!quantization->preset.empty()) request.set_preset(quantization->preset);
  if (quantization->config) *request.mutable_config() = std::move(*quantization->config);
  request.set_kv_cache_dtype(flags.kv_cache_dtype);
  for (const std::string& name : flags.exclude) request.add_exclude(name);
  request.set_estimate(flags.estimate);
  if (flags.num_calib_samples) request.mutable_calibration()->set_num_samples(*flags.num_calib_samples);
  if (flags.seq_len) request.mutable_calibration()->set_seq_len(*flags.seq_len);
  request.mutable_evaluation()->set_uri(flags.eval);
  if (flags.max_ppl_increase) request.mutable_evaluation()->set_max_ppl_increase(*flags.max_ppl_increase);
  if (absl::Status status = ApplyEvaluation(flags, *request.mutable_evaluation()); !status.ok()) {
    return UsageError(ctx, status);
  }
  for (const std::string& name : flags.exports) {
    absl::StatusOr<quark::v1::ExportFormat> format = ParseExportFormat(name);
    if (!format.ok()) return UsageError(ctx, format.status());
    request.add_export_formats(*format);
  }
  request.set_gguf_type(flags.gguf_type);
  quark::v1::JobSpec algorithms;  // AddAlgorithms reads the flags as submit does
  absl::Status algo = AddAlgorithms(flags.quant_algo, flags.quant_algo_config_file, algorithms);
  if (!algo.ok()) return UsageError(ctx, algo);
  *request.mutable_algo_config() = algorithms.algo_config();
  quark::v1::ValidateConfigResponse response;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->ValidateConfig(context.get(), request, &response);
  if (!status.ok()) return RpcError(ctx, "ValidateConfig", status);
  *ctx.out << (ctx.json ? ToJsonLine(response) + "\n" : ValidateTable(response));
  return response.valid() ? kExitOk : kExitInvalid;
}

}  // namespace quark::client

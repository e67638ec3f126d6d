// quarkctl's admin subcommands (AdminService): audit, drain, resume.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "client/output.h"
#include "google/protobuf/util/time_util.h"

namespace quark::client {
namespace {

int AdminRpcError(const CommandContext& ctx, const char* what, const grpc::Status& status) {
  *ctx.err << "quarkctl: " << what << " on " << ctx.server << ": " << StatusCodeName(status.error_code()) << ": "
           << status.error_message() << "\n";
  return kExitRpcError;
}

std::string AuditLine(const quark::v1::AuditRecord& record) {
  return absl::StrCat(record.sequence(), "  ", google::protobuf::util::TimeUtil::ToString(record.time()), "  ",
                      record.principal(), " (", record.tenant().empty() ? "-" : record.tenant(), ", ", record.role(),
                      ")  ", record.action(), " ", record.target().empty() ? "-" : record.target(), "  ",
                      record.outcome(), record.detail().empty() ? "" : "  " + record.detail(), "\n");
}

}  // namespace

int AuditCommand(CommandContext& ctx, int64_t after, const std::string& tenant, int page_size) {
  quark::v1::ListAuditRecordsRequest request;
  request.set_after_sequence(after);
  request.set_tenant(tenant);
  request.set_page_size(page_size);
  quark::v1::ListAuditRecordsResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + ctx.timeout);
  grpc::Status status = ctx.admin_stub->ListAuditRecords(&context, request, &response);
  if (!status.ok()) return AdminRpcError(ctx, "ListAuditRecords", status);
  if (ctx.json) {
    *ctx.out << ToJsonLine(response) << "\n";
  } else {
    for (const quark::v1::AuditRecord& record : response.records()) *ctx.out << AuditLine(record);
  }
  return kExitOk;
}

int DrainCommand(CommandContext& ctx, const std::string& worker_id, bool drain) {
  quark::v1::DrainWorkerRequest request;
  request.set_worker_id(worker_id);
  quark::v1::DrainWorkerResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + ctx.timeout);
  grpc::Status status = drain ? ctx.admin_stub->DrainWorker(&context, request, &response)
                              : ctx.admin_stub->ResumeWorker(&context, request, &response);
  if (!status.ok()) return AdminRpcError(ctx, drain ? "DrainWorker" : "ResumeWorker", status);
  if (ctx.json) {
    *ctx.out << ToJsonLine(response) << "\n";
  } else {
    *ctx.out << "worker " << response.worker_id() << (response.draining() ? " draining" : " resumed")
             << (response.registered() ? "" : " (not registered right now)") << "\n";
  }
  return kExitOk;
}

}  // namespace quark::client

// The quarkctl subcommands, each one RPC (or a stream) against quarkd. Internal to client/.
#pragma once

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "client/submit_spec.h"
#include <grpcpp/grpcpp.h>

#include "quark/v1/provenance.grpc.pb.h"
#include "quark/v1/service.grpc.pb.h"

namespace quark::client {

struct CommandContext {
  std::unique_ptr<quark::v1::QuantizationService::Stub> stub;
  std::unique_ptr<quark::v1::AdminService::Stub> admin_stub;
  std::unique_ptr<quark::v1::ProvenanceService::Stub> provenance_stub;
  std::string server;
  bool json = false;
  std::chrono::seconds timeout{30};
  std::ostream* out = nullptr;  // owned by the caller of RunQuarkctl
  std::ostream* err = nullptr;
  bool err_is_tty = false;
};

/// "UNAVAILABLE", "NOT_FOUND", ...
std::string StatusCodeName(grpc::StatusCode code);

/// A unary call's context with ctx.timeout as its deadline.
std::unique_ptr<grpc::ClientContext> Unary(const CommandContext& ctx);

/// Prints "quarkctl: WHAT on SERVER: CODE: message" and returns kExitRpcError.
int RpcError(const CommandContext& ctx, const char* what, const grpc::Status& status);

int SubmitCommand(CommandContext& ctx, const SubmitFlags& flags, const std::string& request_id, bool wait);
int GetCommand(CommandContext& ctx, const std::string& id);
int ListCommand(CommandContext& ctx, const std::vector<std::string>& states, const std::vector<std::string>& labels,
                int page_size, bool all);
int WatchCommand(CommandContext& ctx, const std::string& id, int64_t after, bool quiet_events);
int CancelCommand(CommandContext& ctx, const std::string& id);
/// #29: deletes a finished job from the store (DeleteJob), freeing its bytes from the tenant's storage quota.
int DeleteCommand(CommandContext& ctx, const std::string& id);
int PresetsCommand(CommandContext& ctx);
int ValidateCommand(CommandContext& ctx, const SubmitFlags& flags);
/// Admin role: the audit log after sequence `after` (only `tenant`'s when set); drain or resume a worker.
int AuditCommand(CommandContext& ctx, int64_t after, const std::string& tenant, int page_size);
int DrainCommand(CommandContext& ctx, const std::string& worker_id, bool drain);
/// #34 signed provenance (provenance_commands.cc): quarkd's manifest signing key; verify a manifest's signature
/// (against `key_files`, PEM public keys or base64, else quarkd's key) and every artifact's SHA-256.
int KeyCommand(CommandContext& ctx);
int VerifyCommand(CommandContext& ctx, const std::string& manifest_uri, const std::vector<std::string>& key_files);
/// Where `quarkctl report` writes its plot besides the tables: SVG and/or PNG ("" = not written).
struct ReportPlotFiles {
  std::string svg;
  std::string png;
};

/// The job's report (job_report.h): text tables, Markdown with `markdown`, JSON with -o json; the plot to
/// `plot_files` (report_plot.h, png_image.h); the manifest from `manifest_file` or a file:// manifest_uri for the
/// Δp histograms.
int ReportCommand(CommandContext& ctx, const std::string& id, bool markdown, const ReportPlotFiles& plot_files,
                  const std::string& manifest_file);

}  // namespace quark::client

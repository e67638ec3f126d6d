// quarkctl report JOB [--markdown] [--svg FILE] [--png FILE] [--manifest FILE] (-o json: the report as JSON).
#include <grpcpp/grpcpp.h>

#include <fstream>

#include "absl/strings/match.h"
#include "client/commands.h"
#include "client/job_report.h"
#include "client/output.h"
#include "client/png_image.h"

namespace quark::client {
namespace {

// The manifest from --manifest, else from a file:// manifest_uri; null when neither is readable (the report then
// has no Δp histograms, and says so on stderr).
nlohmann::json ReadManifest(const CommandContext& ctx, const quark::v1::Job& job, const std::string& manifest_file) {
  std::string path = manifest_file;
  const std::string& uri = job.result().manifest_uri();
  if (path.empty() && absl::StartsWith(uri, "file://")) path = uri.substr(7);
  if (path.empty()) {
    if (!uri.empty())
      *ctx.err << "quarkctl: report: " << uri << " is not local; give --manifest FILE for the Δp plot\n";
    return nullptr;
  }
  std::ifstream in(path);
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, false);
  if (!in || manifest.is_discarded()) {
    *ctx.err << "quarkctl: report: --manifest " << path << ": not readable JSON\n";
    return nullptr;
  }
  return manifest;
}

}  // namespace

int ReportCommand(CommandContext& ctx, const std::string& id, bool markdown, const ReportPlotFiles& plot_files,
                  const std::string& manifest_file) {
  quark::v1::GetJobRequest request;
  request.set_id(id);
  quark::v1::Job job;
  auto context = Unary(ctx);
  grpc::Status status = ctx.stub->GetJob(context.get(), request, &job);
  if (!status.ok()) return RpcError(ctx, "GetJob", status);
  const nlohmann::json report = BuildJobReport(job, ReadManifest(ctx, job, manifest_file));
  for (const auto& [flag, file] : {std::pair{"--svg", plot_files.svg}, std::pair{"--png", plot_files.png}}) {
    if (file.empty()) continue;
    std::ofstream out(file, std::ios::binary);
    out << (flag == std::string("--svg") ? ReportSvg(report) : ReportPng(report));
    if (!out) {
      *ctx.err << "quarkctl: " << flag << " " << file << ": cannot write\n";
      return kExitUsage;
    }
  }
  if (ctx.json) {
    *ctx.out << report.dump() << "\n";
  } else {
    *ctx.out << (markdown ? ReportMarkdown(report) : ReportText(report));
  }
  return kExitOk;
}

}  // namespace quark::client

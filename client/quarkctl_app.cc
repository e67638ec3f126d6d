#include "client/quarkctl_app.h"

#include <cstdlib>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "client/channel.h"
#include "client/commands.h"
#include "client/output.h"

namespace quark::client {
namespace {

void AddSpecFlags(CLI::App* cmd, SubmitFlags& f) {
  cmd->add_option("--model", f.model, "Model folder URI (file:// or s3://)");
  cmd->add_option("--scheme", f.scheme, "Preset name (quarkctl presets)");
  cmd->add_option("--config", f.config, "Config file (quark.v1.Config in YAML or JSON)");
  cmd->add_option("--kv-cache-dtype", f.kv_cache_dtype, "KV-cache quantization: fp8 or int8");
  cmd->add_option("--exclude", f.exclude, "Module name or pattern to leave in float (repeatable)");
}

struct Parsed {
  ChannelFlags channel;
  std::string output = "table";
  int timeout_s = 30;
  SubmitFlags spec;
  std::string request_id;
  bool wait = false;
  std::string id;
  std::vector<std::string> states;
  std::vector<std::string> labels;
  int page_size = 0;
  bool all = false;
  int64_t after = 0;
  std::string tenant;
  std::string manifest_uri;
  std::vector<std::string> key_files;
  bool markdown = false;     // report --markdown
  std::string svg_file;      // report --svg FILE
  std::string png_file;      // report --png FILE
  std::string manifest_file; // report --manifest FILE
};

void AddCommands(CLI::App& app, Parsed& p) {
  CLI::App* submit = app.add_subcommand("submit", "Submit a quantization job");
  submit->add_option("-f,--job-file", p.spec.job_file, "Job file (quark.v1.JobSpec in YAML or JSON)");
  AddSpecFlags(submit, p.spec);
  submit->add_option("--calib", p.spec.calib, "Calibration text URI");
  submit->add_option("--num-calib-samples", p.spec.num_calib_samples, "Calibration samples");
  submit->add_option("--seq-len", p.spec.seq_len, "Calibration sequence length");
  submit->add_option("--seed", p.spec.seed, "Calibration sampling seed");
  submit->add_option("--eval", p.spec.eval, "Perplexity evaluation text URI");
  submit->add_option("--output", p.spec.output, "Output prefix URI; artifacts land under OUTPUT/<job id>/");
  submit->add_option("--label", p.spec.labels, "KEY=VALUE label (repeatable)");
  submit->add_option("--export", p.spec.exports, "Export format: hf_quark, gguf, onnx, compressed_tensors (repeatable)");
  submit->add_option("--gguf-type", p.spec.gguf_type,
                     "llama-quantize's file type of the float weights, with its mixture: F32 F16 BF16 Q8_0 Q4_0 Q4_1 "
                     "Q5_0 Q5_1 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS");
  submit->add_flag("--gguf-pure", p.spec.gguf_pure, "With --gguf-type: every float weight in its type (--pure)");
  submit->add_option("--imatrix", p.spec.gguf_imatrix,
                     "With --gguf-type: importance matrix URI (imatrix.gguf or .dat), as llama-quantize --imatrix");
  submit->add_flag("--imatrix-from-calibration", p.spec.gguf_imatrix_from_calibration,
                   "With --gguf-type: gather the importance matrix in the calibration pass (--calib), published as "
                   "imatrix.gguf");
  submit->add_option("--max-ppl-increase", p.spec.max_ppl_increase,
                     "Accuracy gate (needs --eval): fail without publishing when perplexity rises more, e.g. 0.02");
  submit->add_option("--tasks", p.spec.tasks, "lm-eval tasks scored on the float model and each export: arc_easy,piqa");
  submit->add_option("--task-limit", p.spec.task_limit, "Only the first N examples of each task (lm-eval's --limit)");
  submit->add_option("--num-fewshot", p.spec.num_fewshot,
                     "Few-shot examples for every task (lm-eval's --num-fewshot; default each task's: mmlu, gsm8k 5)");
  submit->add_flag("--kld", p.spec.kld, "KL divergence of each export against the float model over --eval's text");
  submit->add_option("--max-kld", p.spec.max_kld, "Gate (needs --kld): fail when an export's mean KLD is larger");
  submit->add_option("--max-task-drop", p.spec.max_task_drop,
                     "Gate TASK=DROP (repeatable; needs the task): fail when an export's accuracy drops more");
  submit->add_option("--sweep", p.spec.sweep,
                     "Presets to compare, e.g. uint4_wo_128,int8,fp8: one child job each; the job's table compares "
                     "their size, bits, perplexity and KLD (needs --eval)");
  submit->add_option("--auto", p.spec.auto_candidates,
                     "Search the mixed recipe among these presets, e.g. uint4_wo_128,int8,fp8 (needs --eval and one "
                     "budget: --target-bits, or --max-kld / --max-ppl-increase, which are then the search's budget)");
  submit->add_option("--target-bits", p.spec.target_bits,
                     "With --auto: average bits per weight of the decoder linears, scales included");
  submit->add_option("--max-rounds", p.spec.max_rounds, "With --auto: verification rounds of a loss budget (default 4)");
  submit->add_option("--pass-splits", p.spec.pass_splits,
                     "With --auto: split each candidate's sensitivity pass into N decoder-layer ranges, one child job "
                     "each (1 = unsplit; default: quarkd gives every live worker a range)");
  submit->add_option("--quant-algo", p.spec.quant_algo, "Algorithms to run in order, e.g. gptq (comma-separated)");
  submit->add_option("--quant-algo-config-file", p.spec.quant_algo_config_file,
                     "Quark algo_config (YAML/JSON): {name: gptq, damp_percent: ...} or a list of them");
  submit->add_option("--priority", p.spec.priority, "Higher runs first");
  submit->add_option("--max-attempts", p.spec.max_attempts, "Attempts before the job fails");
  submit->add_option("--deadline", p.spec.deadline_seconds,
                     "Seconds from submission after which the job is stopped and fails DEADLINE_EXCEEDED");
  submit->add_flag("--force", p.spec.force,
                   "Run even when an identical job (same model files, config, data, exports) succeeded or runs");
  submit->add_option("--request-id", p.request_id, "Idempotency key: resubmitting returns the same job");
  submit->add_flag("--wait", p.wait, "Follow progress until the job ends; exit code by its final state");

  app.add_subcommand("get", "Show one job")->add_option("id", p.id, "Job id")->required();
  CLI::App* list = app.add_subcommand("list", "List jobs, newest first");
  list->add_option("--state", p.states, "Only jobs in this state (repeatable)");
  list->add_option("--label", p.labels, "Only jobs with this KEY=VALUE label (repeatable)");
  list->add_option("--page-size", p.page_size, "Jobs per page (server default 50)");
  list->add_flag("--all", p.all, "Follow page tokens to the end");
  CLI::App* watch = app.add_subcommand("watch", "Stream a job's events until it ends");
  watch->add_option("id", p.id, "Job id")->required();
  watch->add_option("--after", p.after, "Resume after this event sequence number");
  CLI::App* report = app.add_subcommand("report", "A job's evaluation: perplexity, KLD, tasks, sizes and times");
  report->add_option("id", p.id, "Job id")->required();
  report->add_flag("--markdown", p.markdown, "Markdown tables instead of text");
  report->add_option("--svg", p.svg_file, "Also write the plot (task accuracy, Δp histograms) as SVG to this file");
  report->add_option("--png", p.png_file, "Also write the same plot as PNG to this file");
  report->add_option("--manifest", p.manifest_file, "The job's manifest.json when its manifest_uri is not file://");
  app.add_subcommand("cancel", "Cancel a queued or running job")->add_option("id", p.id, "Job id")->required();
  app.add_subcommand("delete", "Delete a finished job from quarkd's store (frees its storage quota)")
      ->add_option("id", p.id, "Job id")
      ->required();
  app.add_subcommand("presets", "List the named quantization schemes");
  CLI::App* validate = app.add_subcommand("validate", "Dry-run a config or preset against a model");
  AddSpecFlags(validate, p.spec);
  validate->add_flag("--estimate", p.spec.estimate,
                     "Also estimate time, peak memory and artifact sizes per phase on each kind of registered worker");
  validate->add_option("--num-calib-samples", p.spec.num_calib_samples, "Calibration samples (estimate; default 128)");
  validate->add_option("--seq-len", p.spec.seq_len, "Calibration sequence length (estimate; default 512)");
  validate->add_option("--eval", p.spec.eval, "Perplexity evaluation text URI (estimate: its size sets the tokens)");
  validate->add_option("--export", p.spec.exports, "Export format: hf_quark, gguf, onnx, compressed_tensors (repeatable; estimate)");
  validate->add_option("--gguf-type", p.spec.gguf_type, "GGUF type of the float weights (estimate)");
  validate->add_option("--max-ppl-increase", p.spec.max_ppl_increase, "Accuracy gate (estimate: exports read back)");
  validate->add_option("--tasks", p.spec.tasks, "lm-eval tasks after the export (estimate: evaluate_tasks)");
  validate->add_option("--task-limit", p.spec.task_limit, "Examples per task (estimate)");
  validate->add_option("--num-fewshot", p.spec.num_fewshot, "Few-shot examples for every task");
  validate->add_flag("--kld", p.spec.kld, "KLD of each export against the float model (estimate: evaluate_kld)");
  validate->add_option("--quant-algo", p.spec.quant_algo, "Algorithms to run in order, e.g. gptq (estimate)");
  validate->add_option("--quant-algo-config-file", p.spec.quant_algo_config_file, "Quark algo_config (YAML/JSON)");
  CLI::App* audit = app.add_subcommand("audit", "Admin: the audit log (who submitted, cancelled, drained what)");
  audit->add_option("--after", p.after, "Only records after this sequence number");
  audit->add_option("--tenant", p.tenant, "Only this tenant's records");
  audit->add_option("--page-size", p.page_size, "Records (server default 100, at most 1000)");
  app.add_subcommand("drain", "Admin: lease no new jobs to a worker")->add_option("worker", p.id, "Worker id")
      ->required();
  app.add_subcommand("resume", "Admin: lease jobs to a drained worker again")->add_option("worker", p.id, "Worker id")
      ->required();
  app.add_subcommand("key", "The public key quarkd's workers sign manifest.json with");
  CLI::App* verify = app.add_subcommand("verify", "Check a manifest's signature and every artifact's SHA-256");
  verify->add_option("manifest", p.manifest_uri, "manifest.json URI (file:// or s3://)")->required();
  verify->add_option("--key", p.key_files, "Trusted public key: PEM file or base64 (repeatable; default quarkd's key)");
  app.require_subcommand(1);
}

int Dispatch(CLI::App& app, Parsed& p, CommandContext& ctx) {
  if (app.got_subcommand("submit")) return SubmitCommand(ctx, p.spec, p.request_id, p.wait);
  if (app.got_subcommand("get")) return GetCommand(ctx, p.id);
  if (app.got_subcommand("list")) return ListCommand(ctx, p.states, p.labels, p.page_size, p.all);
  if (app.got_subcommand("watch")) return WatchCommand(ctx, p.id, p.after, false);
  if (app.got_subcommand("report")) {
    return ReportCommand(ctx, p.id, p.markdown, {p.svg_file, p.png_file}, p.manifest_file);
  }
  if (app.got_subcommand("cancel")) return CancelCommand(ctx, p.id);
  if (app.got_subcommand("delete")) return DeleteCommand(ctx, p.id);
  if (app.got_subcommand("presets")) return PresetsCommand(ctx);
  if (app.got_subcommand("audit")) return AuditCommand(ctx, p.after, p.tenant, p.page_size);
  if (app.got_subcommand("drain")) return DrainCommand(ctx, p.id, true);
  if (app.got_subcommand("resume")) return DrainCommand(ctx, p.id, false);
  if (app.got_subcommand("key")) return KeyCommand(ctx);
  if (app.got_subcommand("verify")) return VerifyCommand(ctx, p.manifest_uri, p.key_files);
  return ValidateCommand(ctx, p.spec);
}

}  // namespace

int RunQuarkctl(int argc, const char* const* argv, std::ostream& out, std::ostream& err, bool err_is_tty) {
  CLI::App app{"quarkctl: submit and follow quantization jobs on quarkd"};
  Parsed p;
  const char* env_server = std::getenv("QUARK_SERVER");
  p.channel.server = env_server && *env_server ? env_server : "localhost:50051";
  app.add_option("--server", p.channel.server, "quarkd address HOST:PORT (default $QUARK_SERVER or localhost:50051)");
  app.add_option("--token", p.channel.token, "Bearer token (default $QUARK_TOKEN)")->envname("QUARK_TOKEN");
  app.add_option("--tls-ca", p.channel.tls_ca, "PEM CAs of quarkd's certificate: connect with TLS")
      ->envname("QUARK_TLS_CA");
  app.add_option("--tls-cert", p.channel.tls_cert, "PEM client certificate (mutual TLS)")->envname("QUARK_TLS_CERT");
  app.add_option("--tls-key", p.channel.tls_key, "PEM key of --tls-cert")->envname("QUARK_TLS_KEY");
  app.add_option("-o,--output-format", p.output, "table or json")->check(CLI::IsMember({"table", "json"}));
  app.add_option("--timeout", p.timeout_s, "Deadline of each unary call, seconds")->check(CLI::Range(1, 3600));
  // Global options may also follow the subcommand ("quarkctl submit ... -o json"), as the docs show them.
  app.fallthrough();
  AddCommands(app, p);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp& e) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << "quarkctl: " << e.what() << "\nRun 'quarkctl --help' for usage.\n";
    return kExitUsage;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeChannel(p.channel);
  if (!channel.ok()) {
    err << "quarkctl: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  CommandContext ctx;
  ctx.server = p.channel.server;
  ctx.stub = quark::v1::QuantizationService::NewStub(*channel);
  ctx.admin_stub = quark::v1::AdminService::NewStub(*channel);
  ctx.provenance_stub = quark::v1::ProvenanceService::NewStub(*channel);
  ctx.json = p.output == "json";
  ctx.timeout = std::chrono::seconds(p.timeout_s);
  ctx.out = &out;
  ctx.err = &err;
  ctx.err_is_tty = err_is_tty;
  return Dispatch(app, p, ctx);
}

}  // namespace quark::client

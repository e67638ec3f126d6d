// quarkctl submit: the JobSpec from a job file and flags (flags win).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"

namespace quark::client {

struct SubmitFlags {
  std::string job_file;   // -f: YAML/JSON JobSpec, the base the other flags override
  std::string model;      // --model URI
  std::string scheme;     // --scheme NAME (a preset)
  std::string config;     // --config FILE (a quark.v1.Config in YAML/JSON)
  std::string kv_cache_dtype;
  std::string calib;      // --calib URI
  std::optional<int> num_calib_samples;
  std::optional<int> seq_len;
  std::optional<uint64_t> seed;
  std::string eval;       // --eval URI
  std::string output;     // --output URI
  std::vector<std::string> exclude;
  std::vector<std::string> labels;   // KEY=VALUE
  std::vector<std::string> exports;  // hf_quark, gguf, onnx, compressed_tensors
  std::string gguf_type;             // --gguf-type: llama-quantize's file types (F16 ... Q4_K_M ... IQ4_XS)
  bool gguf_pure = false;            // --gguf-pure
  std::string gguf_imatrix;          // --imatrix URI
  bool gguf_imatrix_from_calibration = false;  // --imatrix-from-calibration
  std::optional<double> max_ppl_increase;  // --max-ppl-increase: the accuracy gate
  // #31: --tasks arc_easy,piqa [--task-limit N] --kld [--max-kld X] [--max-task-drop TASK=X ...]
  std::vector<std::string> tasks;
  std::optional<int> task_limit;
  std::optional<int> num_fewshot;  // --num-fewshot K (#31 item 2)
  bool kld = false;
  std::optional<double> max_kld;
  std::vector<std::string> max_task_drop;  // TASK=DROP
  std::vector<std::string> quant_algo;  // --quant-algo gptq,...
  std::string quant_algo_config_file;   // --quant-algo-config-file: Quark's algo_config (YAML/JSON)
  std::optional<int> priority;
  std::optional<int> max_attempts;
  std::optional<int64_t> deadline_seconds;  // --deadline S: stop and fail the job S seconds after submission
  bool force = false;                       // --force: run even when an identical job succeeded or runs
  bool estimate = false;                    // validate --estimate: time, memory and sizes per kind of worker
  // #36: --sweep uint4_wo_128,int8,fp8 (comma-separated, repeatable): one child job per preset, compared
  std::vector<std::string> sweep;
  // #36 item 3: --auto uint4_wo_128,int8,fp8 with --target-bits X, or --max-kld / --max-ppl-increase as its budget
  std::vector<std::string> auto_candidates;
  std::optional<double> target_bits;
  std::optional<int> max_rounds;
  // #36 item 4: --pass-splits, ranges per candidate's sensitivity pass (1 = unsplit; unset = quarkd's policy)
  std::optional<int> pass_splits;
};

/// Adds each --label KEY=VALUE to `out`; INVALID_ARGUMENT naming --label for one without a key or '='.
absl::Status AddLabels(const std::vector<std::string>& labels, google::protobuf::Map<std::string, std::string>& out);

/// Appends to spec.algo_config what --quant-algo NAMES (comma-separated lists allowed) and --quant-algo-config-file
/// (Quark's algo_config form) ask for, as `quark quantize` reads them: each named algorithm with the file's entry of
/// that name, else its defaults; without names, the file's entries in order. Errors name the flag.
absl::Status AddAlgorithms(const std::vector<std::string>& names, const std::string& config_file,
                           quark::v1::JobSpec& spec);

/// The quantization the flags ask for: a preset (--scheme) or a Config read from --config; neither when both are
/// empty. INVALID_ARGUMENT when both are given or the config file does not load (naming the file and field).
struct FlagQuantization {
  std::string preset;
  std::optional<quark::v1::Config> config;
  bool empty() const { return preset.empty() && !config.has_value(); }
};
absl::StatusOr<FlagQuantization> QuantizationFromFlags(const SubmitFlags& flags);

/// Builds the spec. INVALID_ARGUMENT naming the flag: both --scheme and --config, --sweep with either, none of
/// the three (nor in the job file), an empty --sweep item; --auto with --scheme, --config or --sweep, or with no
/// budget or two (--target-bits, --max-kld, --max-ppl-increase are its budget then, not gates),
/// no --model or --output (nor in the job file), a label without '=', an unknown export format, numbers < 1.
absl::StatusOr<quark::v1::JobSpec> BuildJobSpec(const SubmitFlags& flags);

/// --tasks, --task-limit, --kld, --max-kld, --max-task-drop into `evaluation`; INVALID_ARGUMENT naming the flag.
absl::Status ApplyEvaluation(const SubmitFlags& flags, quark::v1::EvaluationSpec& evaluation);

/// "hf_quark" / "gguf" / "onnx" / "compressed_tensors" (any case, '-' or '_') to the enum; INVALID_ARGUMENT otherwise.
absl::StatusOr<quark::v1::ExportFormat> ParseExportFormat(const std::string& name);

/// "queued", "RUNNING", "JOB_STATE_FAILED", ... to the enum; INVALID_ARGUMENT otherwise.
absl::StatusOr<quark::v1::JobState> ParseJobState(const std::string& name);

}  // namespace quark::client

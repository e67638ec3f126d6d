#include "server/api/spec_validation.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/config/export_format_proto.h"
#include "core/config/llama_cpp_rules.h"  // #37 item 4
#include "core/config/mxfp8_tiles_as_mx.h"  // #30
#include "core/config/online_rotation.h"  // #35 item 4
#include "core/config/presets.h"
#include "core/export/ct_config.h"
#include "core/eval/evaluation_plan_proto.h"
#include "core/config/proto_convert.h"
#include "core/config/validation.h"
#include "core/export/gguf_file_type_names.h"
#include "server/api/request_limits.h"

namespace quark::server {
namespace {

constexpr size_t kMaxRequestIdBytes = 256;
constexpr int kMaxLabels = 64;
constexpr size_t kMaxLabelBytes = 256;
constexpr int kMaxAttempts = 100;
constexpr int kMaxSamples = 1 << 20;
constexpr int kMaxSeqLen = 1 << 20;
constexpr int64_t kMaxDeadlineSeconds = 366LL * 24 * 3600;  // a year; also keeps deadline_ms far from overflow

absl::Status WithPrefix(const absl::Status& status, const std::string& prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

absl::Status CheckSizes(const quark::v1::SubmitJobRequest& request) {
  const quark::v1::JobSpec& spec = request.spec();
  if (request.request_id().size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request_id: ", request.request_id().size(), " bytes, more than ", kMaxRequestIdBytes));
  }
  // Every string, list and map of the spec, and its whole size, before anything else looks at it.
  if (absl::Status status = CheckRequestSizes(spec, "spec."); !status.ok()) return status;
  if (spec.labels_size() > kMaxLabels) {
    return absl::InvalidArgumentError(absl::StrCat("spec.labels: ", spec.labels_size(), " labels, more than ", kMaxLabels));
  }
  for (const auto& [key, value] : spec.labels()) {
    if (key.empty() || key.size() > kMaxLabelBytes || value.size() > kMaxLabelBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.labels[\"", key.substr(0, 64), "\"]: keys must be 1-", kMaxLabelBytes,
                       " bytes and values at most ", kMaxLabelBytes));
    }
  }
  if (spec.deadline_seconds() < 0 || spec.deadline_seconds() > kMaxDeadlineSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("spec.deadline_seconds: ", spec.deadline_seconds(),
                                                   " is not in 0..", kMaxDeadlineSeconds, " (0 = no deadline)"));
  }
  if (spec.max_attempts() < 0 || spec.max_attempts() > kMaxAttempts) {
    return absl::InvalidArgumentError(absl::StrCat("spec.max_attempts: ", spec.max_attempts(), " is not in 0..", kMaxAttempts));
  }
  if (absl::Status status = CheckJobShape("spec.", spec.calibration(), spec.evaluation()); !status.ok()) return status;
  const quark::v1::WorkerResources& resources = spec.resources();
  if (resources.gpus() < 0 || resources.cpus() < 0 || resources.memory_mb() < 0) {
    return absl::InvalidArgumentError("spec.resources: gpus, cpus and memory_mb must not be negative");
  }
  if (resources.gpus() > kMaxGpus) {
    return absl::InvalidArgumentError(absl::StrCat("spec.resources.gpus: ", resources.gpus(), " is above ", kMaxGpus));
  }
  if (resources.cpus() > kMaxCpus) {
    return absl::InvalidArgumentError(absl::StrCat("spec.resources.cpus: ", resources.cpus(), " is above ", kMaxCpus));
  }
  // Bytes are memory_mb << 20 (estimates, fit checks): bounded far from int64's overflow.
  if (resources.memory_mb() > kMaxMemoryMb) {
    return absl::InvalidArgumentError(absl::StrCat("spec.resources.memory_mb: ", resources.memory_mb(),
                                                   " is above ", kMaxMemoryMb, " (1 PiB)"));
  }
  if (!resources.compute_dtype().empty() && resources.compute_dtype() != "f32" && resources.compute_dtype() != "bf16") {
    return absl::InvalidArgumentError(absl::StrCat("spec.resources.compute_dtype: \"",
                                                   absl::CEscape(resources.compute_dtype().substr(0, 32)),
                                                   "\" is not one of f32, bf16"));
  }
  for (int i = 0; i < spec.export_formats_size(); ++i) {
    if (!quark::v1::ExportFormat_IsValid(spec.export_formats(i))) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.export_formats[", i, "]: unknown format ", spec.export_formats(i)));
    }
  }
  return absl::OkStatus();
}

// llama-quantize's file types the engine writes (core/export/gguf_file_type_names.h: the server does not link the
// engine), and only with a GGUF export; --pure and the importance matrix only with one of them.
// The export formats as far as llama.cpp's rules care: {"gguf"} when GGUF is the only one.
std::vector<std::string> GgufOnly(const quark::v1::JobSpec& spec) {
  if (spec.export_formats_size() == 1 && spec.export_formats(0) == quark::v1::EXPORT_FORMAT_GGUF) return {"gguf"};
  return {"other"};
}

absl::Status CheckGgufType(const quark::v1::JobSpec& spec) {
  const auto& names = exporter::gguf::kFileTypeNames;
  if (spec.gguf_type().empty()) {
    if (spec.gguf_pure()) return absl::InvalidArgumentError("spec.gguf_pure: set, but spec.gguf_type is empty");
    if (!spec.gguf_imatrix_uri().empty()) {
      return absl::InvalidArgumentError("spec.gguf_imatrix_uri: set, but spec.gguf_type is empty");
    }
    if (spec.gguf_imatrix_from_calibration()) {
      return absl::InvalidArgumentError("spec.gguf_imatrix_from_calibration: set, but spec.gguf_type is empty");
    }
    return absl::OkStatus();
  }
  if (std::find(std::begin(names), std::end(names), spec.gguf_type()) == std::end(names)) {
    std::string accepted;
    for (std::string_view name : names) accepted.append(accepted.empty() ? "" : ", ").append(name);
    return absl::InvalidArgumentError(
        absl::StrCat("spec.gguf_type: \"", Excerpt(spec.gguf_type()), "\" is not one of ", accepted));
  }
  if (!spec.gguf_imatrix_uri().empty() && spec.gguf_imatrix_from_calibration()) {
    return absl::InvalidArgumentError(
        "spec.gguf_imatrix_from_calibration: set together with spec.gguf_imatrix_uri; give one of them");
  }
  for (int i = 0; i < spec.export_formats_size(); ++i) {
    if (spec.export_formats(i) == quark::v1::EXPORT_FORMAT_GGUF) return absl::OkStatus();
  }
  return absl::InvalidArgumentError("spec.gguf_type: set, but EXPORT_FORMAT_GGUF is not among spec.export_formats");
}

// #35 item 4: a rotation with r4 (spec.algo_config or spec.config.algo_config) reaches vLLM only through the
// compressed-tensors export's transform_config; the other formats are refused here (core/config/online_rotation.h).
absl::Status CheckR4ExportFormats(const quark::v1::JobSpec& spec) {
  bool r4 = false;
  for (const auto& a : spec.algo_config()) r4 |= a.has_rotation() && a.rotation().r4();
  if (spec.has_config()) {
    for (const auto& a : spec.config().algo_config()) r4 |= a.has_rotation() && a.rotation().r4();
  }
  if (!r4) return absl::OkStatus();
  if (spec.export_formats_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("spec.export_formats: empty (hf_quark) but ",
                                                   quark::CheckR4ExportFormat("hf_quark").message()));
  }
  for (int i = 0; i < spec.export_formats_size(); ++i) {
    absl::StatusOr<std::string> name = quark::ExportFormatName(spec.export_formats(i), i);
    if (!name.ok()) return name.status();
    absl::Status s = quark::CheckR4ExportFormat(*name);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("spec.export_formats[", i, "]: ", s.message()));
  }
  return absl::OkStatus();
}

// A compressed-tensors export of a scheme the library cannot express, or one the engine does not write yet, is
// refused at submit rather than when the worker starts the export.
absl::Status CheckCompressedTensorsSchemes(const quark::v1::JobSpec& spec, const quark::Config& config) {
  for (int i = 0; i < spec.export_formats_size(); ++i) {
    if (spec.export_formats(i) != quark::v1::EXPORT_FORMAT_COMPRESSED_TENSORS) continue;
    auto check = [&](const LayerQuantConfig& c, const std::string& path) {
      if (c.Empty()) return absl::OkStatus();
      absl::Status s = exporter::CheckCtLayerConfig(c, path);
      if (s.ok()) return s;
      return absl::Status(s.code(), absl::StrCat("spec.export_formats[", i, "] (compressed_tensors): ", s.message()));
    };
    QUARK_RETURN_IF_ERROR(check(config.global_quant_config, "spec.config.global_quant_config"));
    if (auto linear = config.layer_type_quant_config.find("Linear"); linear != config.layer_type_quant_config.end()) {
      QUARK_RETURN_IF_ERROR(check(linear->second, "spec.config.layer_type_quant_config[Linear]"));
    }
    for (size_t j = 0; j < config.layer_quant_config.size(); ++j) {
      QUARK_RETURN_IF_ERROR(check(config.layer_quant_config[j].config,
                                  absl::StrCat("spec.config.layer_quant_config[", config.layer_quant_config[j].pattern, "]")));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJobShape(const std::string& prefix, const quark::v1::CalibrationSpec& calibration,
                           const quark::v1::EvaluationSpec& evaluation) {
  if (calibration.num_samples() < 0 || calibration.num_samples() > kMaxSamples) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "calibration.num_samples: ", calibration.num_samples(),
                                                   " is not in 0..", kMaxSamples));
  }
  if (calibration.seq_len() < 0 || calibration.seq_len() > kMaxSeqLen) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "calibration.seq_len: ", calibration.seq_len(), " is not in 0..", kMaxSeqLen));
  }
  if (evaluation.seq_len() < 0 || evaluation.max_windows() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "evaluation: seq_len and max_windows must not be negative"));
  }
  return absl::OkStatus();
}

absl::StatusOr<quark::Config> ResolveRequestConfig(const std::string& prefix, const quark::v1::Config* config,
                                                   const std::string* preset, const std::string& kv_cache_dtype,
                                                   const google::protobuf::RepeatedPtrField<std::string>& exclude) {
  absl::StatusOr<quark::Config> resolved;
  if (preset != nullptr) {
    resolved = PresetConfig(*preset);
    if (!resolved.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, "preset: ", Excerpt(resolved.status().message())));
    }
  } else if (config != nullptr) {
    resolved = FromProto(*config);
    if (!resolved.ok()) return WithPrefix(resolved.status(), absl::StrCat(prefix, "config."));
    *resolved = WithExportedMxfp8AsMx(*std::move(resolved));  // #30: as ResolveConfigChoice (the worker's) reads it
  } else {
    return absl::InvalidArgumentError(absl::StrCat(prefix, "quantization: set either config or preset"));
  }
  absl::Status kv = ApplyKvCacheDtype(kv_cache_dtype, *resolved);
  if (!kv.ok()) return absl::InvalidArgumentError(absl::StrCat(prefix, "kv_cache_dtype: ", kv.message()));
  for (const std::string& pattern : exclude) {
    if (pattern.empty()) return absl::InvalidArgumentError(absl::StrCat(prefix, "exclude: empty pattern"));
    resolved->exclude.push_back(pattern);
  }
  return resolved;
}

absl::Status ValidateSubmitRequest(const quark::v1::SubmitJobRequest& request, const UriPolicy& policy) {
  absl::Status status = CheckSizes(request);
  if (!status.ok()) return status;
  const quark::v1::JobSpec& spec = request.spec();
  status = policy.Check("spec.model_uri", spec.model_uri(), true);
  if (status.ok()) status = policy.Check("spec.output_uri", spec.output_uri(), true);
  if (status.ok()) status = policy.Check("spec.calibration.uri", spec.calibration().uri(), false);
  if (status.ok()) status = policy.Check("spec.evaluation.uri", spec.evaluation().uri(), false);
  if (status.ok()) status = policy.Check("spec.gguf_imatrix_uri", spec.gguf_imatrix_uri(), false);
  if (!status.ok()) return status;
  bool has_preset = spec.quantization_case() == quark::v1::JobSpec::kPreset;
  bool has_config = spec.quantization_case() == quark::v1::JobSpec::kConfig;
  status = CheckGgufType(spec);
  if (!status.ok()) return status;
  if (spec.evaluation().has_max_ppl_increase()) {
    if (!(spec.evaluation().max_ppl_increase() >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("spec.evaluation.max_ppl_increase: ",
                                                     spec.evaluation().max_ppl_increase(), " must not be negative"));
    }
    if (spec.evaluation().uri().empty()) {
      return absl::InvalidArgumentError("spec.evaluation.max_ppl_increase: the accuracy gate needs spec.evaluation.uri");
    }
  }
  // Tasks, KLD and their gates: unknown tasks and gates on figures the job does not compute are refused here.
  if (absl::Status s = eval::ValidateEvaluationPlan(eval::PlanFromProto(spec.evaluation()), "spec.evaluation");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckR4ExportFormats(spec); !s.ok()) return s;
  // A GGUF by llama.cpp's own rules (a gguf_type, GGUF the only export) quantizes the float model: no scheme needed,
  // and only algorithms that transform the float weights may come first (core/config/llama_cpp_rules.h).
  if (QuantizesByLlamaCppRules(has_preset || has_config, spec.gguf_type(), GgufOnly(spec))) {
    std::vector<quark::AlgoConfig> algos;
    for (int i = 0; i < spec.algo_config_size(); ++i) {
      absl::StatusOr<quark::AlgoConfig> algo = FromProto(spec.algo_config(i), absl::StrCat("spec.algo_config[", i, "]"));
      if (!algo.ok()) return algo.status();
      algos.push_back(*std::move(algo));
    }
    return CheckAlgorithmsBeforeLlamaCppRules(
        algos, [](size_t i) { return absl::StrCat("spec.algo_config[", i, "]"); }, "spec.preset or spec.config",
        /*allow_kquant_rounding=*/false);
  }
  absl::StatusOr<quark::Config> config =
      ResolveRequestConfig("spec.", has_config ? &spec.config() : nullptr, has_preset ? &spec.preset() : nullptr,
                           spec.kv_cache_dtype(), spec.exclude());
  if (!config.ok()) return config.status();
  for (int i = 0; i < spec.algo_config_size(); ++i) {
    absl::StatusOr<quark::AlgoConfig> algo = FromProto(spec.algo_config(i), absl::StrCat("spec.algo_config[", i, "]"));
    if (!algo.ok()) return algo.status();
    config->algo_config.push_back(*std::move(algo));
  }
  std::vector<std::string> errors;
  for (const ValidationIssue& issue : ValidateConfig(*config)) {
    if (issue.severity != ValidationIssue::Severity::kError) continue;
    // The algorithms travel in the JobSpec's own algo_config (spec.algo_config[i]), the scheme in spec.config.
    const bool algo = issue.path.rfind("algo_config[", 0) == 0;
    errors.push_back(absl::StrCat(algo ? "spec." : "spec.config.", issue.ToString()));
  }
  if (!errors.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors, "; "));
  return CheckCompressedTensorsSchemes(spec, *config);
}

}  // namespace quark::server

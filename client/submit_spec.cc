#include "client/submit_spec.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "client/job_file.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace quark::client {
namespace {

std::string Normalize(const std::string& name) {
  std::string out = absl::AsciiStrToLower(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

absl::Status ApplyInputs(const SubmitFlags& flags, quark::v1::JobSpec& spec) {
  if (!flags.model.empty()) spec.set_model_uri(flags.model);
  if (!flags.output.empty()) spec.set_output_uri(flags.output);
  if (!flags.kv_cache_dtype.empty()) spec.set_kv_cache_dtype(flags.kv_cache_dtype);
  if (!flags.calib.empty()) spec.mutable_calibration()->set_uri(flags.calib);
  if (flags.num_calib_samples) {
    if (*flags.num_calib_samples < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--num-calib-samples: ", *flags.num_calib_samples, " is not >= 1"));
    }
    spec.mutable_calibration()->set_num_samples(*flags.num_calib_samples);
  }
  if (flags.seq_len) {
    if (*flags.seq_len < 1) return absl::InvalidArgumentError(absl::StrCat("--seq-len: ", *flags.seq_len, " is not >= 1"));
    spec.mutable_calibration()->set_seq_len(*flags.seq_len);
  }
  if (flags.seed) spec.mutable_calibration()->set_seed(*flags.seed);
  if (!flags.eval.empty()) spec.mutable_evaluation()->set_uri(flags.eval);
  for (const std::string& name : flags.exclude) spec.add_exclude(name);
  if (absl::Status status = AddLabels(flags.labels, *spec.mutable_labels()); !status.ok()) return status;
  if (!flags.exports.empty()) spec.clear_export_formats();
  for (const std::string& name : flags.exports) {
    absl::StatusOr<quark::v1::ExportFormat> format = ParseExportFormat(name);
    if (!format.ok()) return format.status();
    spec.add_export_formats(*format);
  }
  if (!flags.gguf_type.empty()) spec.set_gguf_type(flags.gguf_type);
  if (flags.gguf_pure) spec.set_gguf_pure(true);
  if (!flags.gguf_imatrix.empty()) spec.set_gguf_imatrix_uri(flags.gguf_imatrix);
  if (flags.gguf_imatrix_from_calibration) spec.set_gguf_imatrix_from_calibration(true);
  if (flags.max_ppl_increase) spec.mutable_evaluation()->set_max_ppl_increase(*flags.max_ppl_increase);
  if (absl::Status status = ApplyEvaluation(flags, *spec.mutable_evaluation()); !status.ok()) return status;
  if (flags.priority) spec.set_priority(*flags.priority);
  if (flags.max_attempts) {
    if (*flags.max_attempts < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--max-attempts: ", *flags.max_attempts, " is not >= 1"));
    }
    spec.set_max_attempts(*flags.max_attempts);
  }
  if (flags.deadline_seconds) {
    if (*flags.deadline_seconds < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--deadline: ", *flags.deadline_seconds, " is not >= 1"));
    }
    spec.set_deadline_seconds(*flags.deadline_seconds);
  }
  if (flags.force) spec.set_force(true);
  return absl::OkStatus();
}

}  // namespace

// --tasks (comma-separated lists allowed), --task-limit, --num-fewshot, --kld, --max-kld, --max-task-drop TASK=DROP. The names and
// gates are checked by quarkd at SubmitJob (core/eval/evaluation_plan.h); here only the flags' own form.
absl::Status ApplyEvaluation(const SubmitFlags& flags, quark::v1::EvaluationSpec& evaluation) {
  for (const std::string& list : flags.tasks) {
    std::stringstream in(list);
    std::string name;
    while (std::getline(in, name, ',')) {
      if (!name.empty()) evaluation.add_tasks(name);
    }
  }
  if (flags.task_limit) {
    if (*flags.task_limit < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--task-limit: ", *flags.task_limit, " is not >= 1"));
    }
    evaluation.set_task_limit(*flags.task_limit);
  }
  if (flags.num_fewshot) {
    if (*flags.num_fewshot < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--num-fewshot: ", *flags.num_fewshot, " is negative"));
    }
    evaluation.set_num_fewshot(*flags.num_fewshot);
  }
  if (flags.kld) evaluation.set_kld(true);
  if (flags.max_kld) evaluation.set_max_kld(*flags.max_kld);
  for (const std::string& entry : flags.max_task_drop) {
    const size_t eq = entry.find('=');
    double bound = 0;
    if (eq == std::string::npos || eq == 0 || !absl::SimpleAtod(entry.substr(eq + 1), &bound)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max-task-drop: \"", entry, "\" is not TASK=DROP (e.g. arc_easy=0.02)"));
    }
    (*evaluation.mutable_max_task_drop())[entry.substr(0, eq)] = bound;
  }
  return absl::OkStatus();
}

absl::StatusOr<quark::v1::ExportFormat> ParseExportFormat(const std::string& name) {
  std::string n = Normalize(name);
  if (n == "hf_quark" || n == "hf" || n == "quark") return quark::v1::EXPORT_FORMAT_HF_QUARK;
  if (n == "gguf") return quark::v1::EXPORT_FORMAT_GGUF;
  if (n == "onnx") return quark::v1::EXPORT_FORMAT_ONNX;
  if (n == "compressed_tensors" || n == "ct") return quark::v1::EXPORT_FORMAT_COMPRESSED_TENSORS;
  return absl::InvalidArgumentError(
      absl::StrCat("--export: \"", name, "\" is not one of hf_quark, gguf, onnx, compressed_tensors"));
}

absl::StatusOr<quark::v1::JobState> ParseJobState(const std::string& name) {
  std::string n = Normalize(name);
  n = std::string(absl::StripPrefix(n, "job_state_"));
  for (int value = quark::v1::JOB_STATE_QUEUED; value <= quark::v1::JOB_STATE_CANCELLED; ++value) {
    auto state = static_cast<quark::v1::JobState>(value);
    if (absl::AsciiStrToLower(absl::StripPrefix(quark::v1::JobState_Name(state), "JOB_STATE_")) == n) return state;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--state: \"", name, "\" is not one of queued, running, succeeded, failed, cancelled"));
}

absl::Status AddLabels(const std::vector<std::string>& labels, google::protobuf::Map<std::string, std::string>& out) {
  for (const std::string& label : labels) {
    const size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--label: \"", label, "\" is not KEY=VALUE"));
    }
    out[label.substr(0, eq)] = label.substr(eq + 1);
  }
  return absl::OkStatus();
}

namespace {

// The AlgoConfig case of a --quant-algo name; ALGO_NOT_SET for an unknown one.
quark::v1::AlgoConfig::AlgoCase AlgoCaseOf(const std::string& name) {
  if (name == "gptq") return quark::v1::AlgoConfig::kGptq;
  if (name == "awq") return quark::v1::AlgoConfig::kAwq;
  if (name == "smooth" || name == "smoothquant") return quark::v1::AlgoConfig::kSmoothquant;
  if (name == "autosmoothquant") return quark::v1::AlgoConfig::kAutosmoothquant;
  if (name == "rotation") return quark::v1::AlgoConfig::kRotation;
  return quark::v1::AlgoConfig::ALGO_NOT_SET;
}

// An AlgoConfig with `algo_case` set to its defaults (an empty message of that case).
quark::v1::AlgoConfig Defaults(quark::v1::AlgoConfig::AlgoCase algo_case) {
  quark::v1::AlgoConfig algo;
  const google::protobuf::FieldDescriptor* field = algo.GetDescriptor()->FindFieldByNumber(algo_case);
  algo.GetReflection()->MutableMessage(&algo, field);
  return algo;
}

}  // namespace

absl::Status AddAlgorithms(const std::vector<std::string>& names, const std::string& config_file,
                           quark::v1::JobSpec& spec) {
  std::vector<quark::v1::AlgoConfig> from_file;
  if (!config_file.empty()) {
    absl::StatusOr<std::vector<quark::v1::AlgoConfig>> loaded = LoadQuarkAlgoConfigFile(config_file);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(), absl::StrCat("--quant-algo-config-file: ", loaded.status().message()));
    }
    from_file = *std::move(loaded);
  }
  std::vector<std::string> wanted;
  for (const std::string& list : names) {
    std::stringstream items(list);
    for (std::string name; std::getline(items, name, ',');) {
      if (!name.empty()) wanted.push_back(name);
    }
  }
  if (wanted.empty()) {  // the file's entries, in order
    for (auto& algo : from_file) *spec.add_algo_config() = std::move(algo);
    return absl::OkStatus();
  }
  // Each named algorithm with the file's entry of that name, else its defaults (Quark's LLM example).
  for (const std::string& name : wanted) {
    const quark::v1::AlgoConfig::AlgoCase algo_case = AlgoCaseOf(name);
    if (algo_case == quark::v1::AlgoConfig::ALGO_NOT_SET) {
      return absl::InvalidArgumentError(
          "--quant-algo: unknown algorithm \"" + name + "\" (gptq, awq, smoothquant, autosmoothquant, rotation)");
    }
    auto in_file = std::find_if(from_file.begin(), from_file.end(),
                                [&](const quark::v1::AlgoConfig& a) { return a.algo_case() == algo_case; });
    *spec.add_algo_config() = in_file != from_file.end() ? *in_file : Defaults(algo_case);
  }
  return absl::OkStatus();
}

absl::StatusOr<FlagQuantization> QuantizationFromFlags(const SubmitFlags& flags) {
  if (!flags.scheme.empty() && !flags.config.empty()) {
    return absl::InvalidArgumentError("--scheme and --config: give one, not both");
  }
  FlagQuantization choice;
  choice.preset = flags.scheme;
  if (!flags.config.empty()) {
    absl::StatusOr<quark::v1::Config> config = LoadConfigFile(flags.config);
    if (!config.ok()) return config.status();
    choice.config = std::move(*config);
  }
  return choice;
}

namespace {

// #36: the names of comma-separated, repeatable lists (--sweep, --auto), spaces trimmed; an empty item names `flag`.
absl::Status AppendNames(const std::vector<std::string>& lists, const char* flag,
                         google::protobuf::RepeatedPtrField<std::string>& out) {
  for (const std::string& list : lists) {
    for (absl::string_view item : absl::StrSplit(list, ',')) {
      item = absl::StripAsciiWhitespace(item);
      if (item.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", list, "\" has an empty item (NAME,NAME,...)"));
      }
      out.Add(std::string(item));
    }
  }
  return absl::OkStatus();
}

// #36: --sweep replaces the job file's quantization (a sweep sets each child's preset); items split on commas.
absl::Status ApplySweep(const SubmitFlags& flags, quark::v1::JobSpec& spec) {
  if (flags.sweep.empty()) return absl::OkStatus();
  if (!flags.scheme.empty() || !flags.config.empty()) {
    return absl::InvalidArgumentError("--sweep: give the candidates as --sweep alone, without --scheme or --config");
  }
  spec.clear_sweep();
  spec.clear_quantization();
  return AppendNames(flags.sweep, "--sweep", *spec.mutable_sweep());
}

// #36 item 3: --auto's candidates; --target-bits, or --max-kld / --max-ppl-increase (then the search's budget
// instead of the evaluation's gates; --max-kld keeps --kld's measurement).
absl::Status ApplyAuto(const SubmitFlags& flags, quark::v1::JobSpec& spec) {
  if (flags.auto_candidates.empty()) {
    if (flags.target_bits || flags.max_rounds || flags.pass_splits) {
      return absl::InvalidArgumentError(flags.target_bits  ? "--target-bits: only with --auto"
                                        : flags.max_rounds ? "--max-rounds: only with --auto"
                                                           : "--pass-splits: only with --auto");
    }
    return absl::OkStatus();
  }
  if (!flags.scheme.empty() || !flags.config.empty() || !flags.sweep.empty()) {
    return absl::InvalidArgumentError("--auto: the recipe is searched; give no --scheme, --config or --sweep");
  }
  spec.clear_quantization();
  spec.clear_sweep();
  quark::v1::AutoSearchSpec& a = *spec.mutable_auto_search();
  a.Clear();
  if (absl::Status s = AppendNames(flags.auto_candidates, "--auto", *a.mutable_candidates()); !s.ok()) return s;
  const int budgets = (flags.target_bits ? 1 : 0) + (flags.max_kld ? 1 : 0) + (flags.max_ppl_increase ? 1 : 0);
  if (budgets != 1) {
    return absl::InvalidArgumentError(
        "--auto: give exactly one budget of --target-bits, --max-kld, --max-ppl-increase");
  }
  quark::v1::EvaluationSpec& evaluation = *spec.mutable_evaluation();
  if (flags.target_bits) a.set_target_bits(*flags.target_bits);
  if (flags.max_kld) {
    a.set_max_kld(*flags.max_kld);
    evaluation.clear_max_kld();
  }
  if (flags.max_ppl_increase) {
    a.set_max_ppl_increase(*flags.max_ppl_increase);
    evaluation.clear_max_ppl_increase();
  }
  if (flags.max_rounds) a.set_max_rounds(*flags.max_rounds);
  if (flags.pass_splits) a.set_pass_splits(*flags.pass_splits);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<quark::v1::JobSpec> BuildJobSpec(const SubmitFlags& flags) {
  quark::v1::JobSpec spec;
  if (!flags.job_file.empty()) {
    absl::StatusOr<quark::v1::JobSpec> loaded = LoadJobSpecFile(flags.job_file);
    if (!loaded.ok()) return loaded.status();
    spec = std::move(*loaded);
  }
  absl::StatusOr<FlagQuantization> quantization = QuantizationFromFlags(flags);
  if (!quantization.ok()) return quantization.status();
  if (!quantization->preset.empty()) spec.set_preset(quantization->preset);
  if (quantization->config) *spec.mutable_config() = std::move(*quantization->config);
  if (absl::Status status = ApplySweep(flags, spec); !status.ok()) return status;
  if (absl::Status status = ApplyInputs(flags, spec); !status.ok()) return status;
  if (absl::Status status = AddAlgorithms(flags.quant_algo, flags.quant_algo_config_file, spec); !status.ok()) {
    return status;
  }
  if (absl::Status status = ApplyAuto(flags, spec); !status.ok()) return status;
  if (spec.quantization_case() == quark::v1::JobSpec::QUANTIZATION_NOT_SET && spec.sweep_size() == 0 &&
      !spec.has_auto_search()) {
    return absl::InvalidArgumentError(
        "--scheme or --config: one is required, or --sweep or --auto (or preset/config/sweep/auto_search in the job "
        "file)");
  }
  if (spec.model_uri().empty()) return absl::InvalidArgumentError("--model: required (or model_uri in the job file)");
  if (spec.output_uri().empty()) {
    return absl::InvalidArgumentError("--output: required (or output_uri in the job file)");
  }
  return spec;
}

}  // namespace quark::client

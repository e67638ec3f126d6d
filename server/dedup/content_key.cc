#include "server/dedup/content_key.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/config/proto_convert.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "quark/version.h"
#include "server/api/model_view.h"
#include "server/api/spec_validation.h"
#include "server/api/uri_policy.h"
#include "core/base/digest.h"

namespace quark::server {
namespace {

namespace fs = std::filesystem;

constexpr int kDefaultSamples = 128;  // CalibrationSpec's documented defaults: 0 and the default are one job
constexpr int kDefaultSeqLen = 512;
constexpr uint64_t kDefaultSeed = 42;

std::string Deterministic(const google::protobuf::MessageLite& message) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

// Every line is "name length:value" so no value can be mistaken for the next field.
void Field(std::string* out, const std::string& name, const std::string& value) {
  absl::StrAppend(out, name, " ", value.size(), ":", value, "\n");
}

// The digest line of a data file URI: "" (none), the file's digest, or not keyed (s3://, unreadable).
bool DataField(std::string* out, const std::string& name, const std::string& uri, FileDigestCache* cache,
               const std::vector<std::string>& read_roots, std::string* not_keyed) {
  Field(out, name, uri.empty() ? "" : "file");
  if (uri.empty()) return true;
  std::string path = UriPolicy::FilePath(uri);
  if (path.empty()) {
    *not_keyed = absl::StrCat(name, ": only file:// data is digested by quarkd");
    return false;
  }
  // Read through the walk confined to the caller's roots: the name may lead elsewhere since the URI checks.
  absl::StatusOr<storage::UniqueFd> file = OpenConfinedFile(read_roots, path);
  if (!file.ok()) {
    *not_keyed = absl::StrCat(name, ": ", file.status().message());
    return false;
  }
  uint64_t size = 0;
  absl::StatusOr<std::string> digest = cache->Sha256Of(file->get(), path, &size);
  if (!digest.ok()) {
    *not_keyed = absl::StrCat(name, ": ", digest.status().message());
    return false;
  }
  Field(out, absl::StrCat(name, ".sha256"), absl::StrCat(size, " ", *digest));
  return true;
}

// The model's files as the job will read them: pinned inside the caller's roots (ModelView), a symlink inside
// the folder followed only to a target inside them, every digest read from the pinned file.
bool ModelFields(std::string* out, const std::string& model_uri, FileDigestCache* cache,
                 const std::vector<std::string>& read_roots, std::string* not_keyed) {
  std::string root = UriPolicy::FilePath(model_uri);
  if (root.empty()) {
    *not_keyed = "model_uri: s3:// models are not digested by quarkd";
    return false;
  }
  absl::StatusOr<std::unique_ptr<ModelView>> view = ModelView::Open(read_roots, root);
  if (!view.ok()) {
    *not_keyed = absl::StrCat("model_uri: ", view.status().message());
    return false;
  }
  const fs::path pinned = (*view)->path();
  std::error_code error;
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(pinned, fs::directory_options::none, error), end; !error && it != end;
       it.increment(error)) {
    // The view holds folders and, for each pinned file, a link to its descriptor: names are taken lexically
    // (fs::relative would resolve the link to the file's own path).
    if (!it->is_directory(error)) files.push_back(it->path().lexically_relative(pinned).generic_string());
  }
  if (error) {
    *not_keyed = absl::StrCat("model_uri: cannot list \"", root, "\": ", error.message());
    return false;
  }
  if (files.empty()) {
    *not_keyed = absl::StrCat("model_uri: \"", root, "\" holds no files");
    return false;
  }
  std::sort(files.begin(), files.end());
  Field(out, "model.files", std::to_string(files.size()));
  for (const std::string& relative : files) {
    // Opening the view's name reopens the pinned inode; the log and errors name the tenant's path.
    storage::UniqueFd file(open((pinned / relative).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (!file) {
      *not_keyed = absl::StrCat("model_uri: ", relative, ": ", std::strerror(errno));
      return false;
    }
    uint64_t size = 0;
    absl::StatusOr<std::string> digest = cache->Sha256Of(file.get(), (fs::path(root) / relative).string(), &size);
    if (!digest.ok()) {
      *not_keyed = absl::StrCat("model_uri: ", relative, ": ", digest.status().message());
      return false;
    }
    Field(out, absl::StrCat("model.file ", relative), absl::StrCat(size, " ", *digest));
  }
  return true;
}

absl::Status ConfigFields(std::string* out, const quark::v1::JobSpec& spec) {
  bool has_preset = spec.quantization_case() == quark::v1::JobSpec::kPreset;
  bool has_config = spec.quantization_case() == quark::v1::JobSpec::kConfig;
  if (!has_preset && !has_config) {
    Field(out, "config", "none");  // a GGUF by llama.cpp's rules from the float model
  } else {
    absl::StatusOr<quark::Config> config =
        ResolveRequestConfig("spec.", has_config ? &spec.config() : nullptr, has_preset ? &spec.preset() : nullptr,
                             spec.kv_cache_dtype(), spec.exclude());
    if (!config.ok()) return config.status();
    std::set<std::string> exclude(config->exclude.begin(), config->exclude.end());  // a set of patterns
    config->exclude.assign(exclude.begin(), exclude.end());
    Field(out, "config", Deterministic(ToProto(*config)));
  }
  // The spec's algorithms run after the config's, in order: order matters, so it is kept.
  for (const quark::v1::AlgoConfig& algo : spec.algo_config()) Field(out, "algo_config", Deterministic(algo));
  Field(out, "gguf_type", spec.gguf_type());
  if (spec.gguf_pure()) Field(out, "gguf_pure", "true");
  if (spec.gguf_imatrix_from_calibration()) Field(out, "gguf_imatrix_from_calibration", "true");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ContentKey> ComputeContentKey(const quark::v1::JobSpec& spec, FileDigestCache* cache,
                                             const std::vector<std::string>& read_roots) {
  ContentKey result;
  std::string text;
  Field(&text, "engine", QUARK_ENGINE_VERSION);
  // #36 item 3: a sensitivity pass of a preset is not its quantization (only when set: other keys do not move).
  if (spec.sensitivity_pass()) Field(&text, "sensitivity_pass", "1");
  // #36 item 4: a split pass's layer range (only when split: whole passes keep their keys).
  if (spec.sensitivity_layer_count() > 0) {
    Field(&text, "sensitivity_layers",
          absl::StrCat(spec.sensitivity_first_layer(), "+", spec.sensitivity_layer_count()));
  }
  absl::Status status = ConfigFields(&text, spec);
  if (!status.ok()) return status;
  std::set<int> formats;
  for (int format : spec.export_formats()) {
    formats.insert(format == quark::v1::EXPORT_FORMAT_UNSPECIFIED ? quark::v1::EXPORT_FORMAT_HF_QUARK : format);
  }
  if (formats.empty()) formats.insert(quark::v1::EXPORT_FORMAT_HF_QUARK);
  for (int format : formats) Field(&text, "export", quark::v1::ExportFormat_Name(format));
  const quark::v1::CalibrationSpec& calibration = spec.calibration();
  Field(&text, "calibration",
        absl::StrCat(calibration.num_samples() > 0 ? calibration.num_samples() : kDefaultSamples, " ",
                     calibration.seq_len() > 0 ? calibration.seq_len() : kDefaultSeqLen, " ",
                     calibration.seed() != 0 ? calibration.seed() : kDefaultSeed));
  // #27: bf16 compute changes the artifact; float32 (empty or "f32") adds no line, so older keys do not move.
  if (const std::string& dtype = spec.resources().compute_dtype(); !dtype.empty() && dtype != "f32") {
    Field(&text, "compute_dtype", dtype);
  }
  const quark::v1::EvaluationSpec& evaluation = spec.evaluation();
  Field(&text, "evaluation",
        absl::StrCat(evaluation.seq_len(), " ", evaluation.max_windows(), " ",
                     evaluation.has_max_ppl_increase() ? absl::StrFormat("%.17g", evaluation.max_ppl_increase()) : "-"));
  if (evaluation.tasks_size() > 0 || evaluation.kld()) {
    // #31: tasks and KLD (and their gates) change what the job reports and whether it succeeds. The task files are
    // the worker's (--tasks-dir), keyed by name only.
    std::string gates = evaluation.has_max_kld() ? absl::StrFormat("%.17g", evaluation.max_kld()) : "-";
    const std::map<std::string, double> drops(evaluation.max_task_drop().begin(), evaluation.max_task_drop().end());
    for (const auto& [task, bound] : drops) absl::StrAppend(&gates, " ", task, "=", absl::StrFormat("%.17g", bound));
    Field(&text, "evaluation_plan",
          absl::StrCat(absl::StrJoin(evaluation.tasks(), ","), " ", evaluation.task_limit(), " ",
                       evaluation.kld() ? "kld" : "-", " ", gates,
                       // few-shot only when set, so the keys of jobs submitted before it existed do not move
                       evaluation.has_num_fewshot() ? absl::StrCat(" fewshot=", evaluation.num_fewshot()) : ""));
  }
  // Files last: a spec that is not keyed stops before reading gigabytes.
  if (!DataField(&text, "calibration.uri", calibration.uri(), cache, read_roots, &result.not_keyed) ||
      !DataField(&text, "evaluation.uri", evaluation.uri(), cache, read_roots, &result.not_keyed) ||
      !(spec.gguf_imatrix_uri().empty() ||
        DataField(&text, "gguf_imatrix_uri", spec.gguf_imatrix_uri(), cache, read_roots, &result.not_keyed)) ||
      !ModelFields(&text, spec.model_uri(), cache, read_roots, &result.not_keyed)) {
    return result;
  }
  result.key = quark::Sha256Hex(text);
  return result;
}

}  // namespace quark::server

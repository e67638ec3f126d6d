#include "core/export/hf_quark_writer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "core/base/strings.h"
#include "core/base/write_error.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_modules.h"
#include "core/checkpoint/moe_layout.h"
#include "core/config/quark_json.h"
#include "core/export/hf_quark_checker.h"
#include "core/export/hf_quark_config.h"
#include "core/export/hf_quark_gpt_oss.h"
#include "core/export/scale_dtype.h"
#include "core/numerics/quant_params.h"
#include "core/runtime/tensor_view.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;

bool InDecoderLayer(const checkpoint::ModelConfig& model, const std::string& name) {
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    if (name.rfind(checkpoint::LayerPrefix(model, i), 0) == 0) return true;
  }
  return false;
}

absl::Status CheckOutputDir(const std::string& output_dir) {
  std::error_code ec;
  if (output_dir.empty()) return absl::InvalidArgumentError("output_dir: empty");
  if (fs::exists(output_dir, ec) && (!fs::is_directory(output_dir, ec) || !fs::is_empty(output_dir, ec))) {
    return absl::AlreadyExistsError(StrCat("output_dir: ", output_dir, " exists and is not an empty folder"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfQuarkExporter>> HfQuarkExporter::Create(const std::string& model_dir,
                                                                         const std::string& output_dir,
                                                                         const Config& config, const LayerPlan& plan,
                                                                         HfQuarkExportOptions options) {
  std::unique_ptr<HfQuarkExporter> e(new HfQuarkExporter());
  if (auto s = e->Init(model_dir, output_dir, config, plan, options); !s.ok()) return s;
  return e;
}

absl::Status HfQuarkExporter::Init(const std::string& model_dir, const std::string& output_dir, const Config& config,
                                   const LayerPlan& plan, HfQuarkExportOptions options) {
  if (auto s = CheckOutputDir(output_dir); !s.ok()) return s;
  model_dir_ = model_dir;
  output_dir_ = output_dir;
  staging_dir_ = output_dir + ".partial";
  options_ = options;
  config_ = config;
  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return model.status();
  model_ = *std::move(model);
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  reader_ = *std::move(reader);
  std::vector<checkpoint::PlannedTensor> planned;
  if (auto s = PlanTensors(plan, planned); !s.ok()) return s;
  std::error_code ec;
  fs::remove_all(staging_dir_, ec);  // a leftover of an interrupted run
  checkpoint::CheckpointWriterOptions writer_options;
  writer_options.max_shard_bytes = options.max_shard_bytes;
  auto writer = checkpoint::CheckpointWriter::Create(staging_dir_, std::move(planned), writer_options);
  if (!writer.ok()) return writer.status();
  writer_ = *std::move(writer);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ExportTensorSpec>> HfQuarkExporter::LinearTensors(const std::string& module,
                                                                             const LayerQuantConfig& config,
                                                                             int64_t out, int64_t in,
                                                                             bool has_bias) const {
  return QuantizedLinearTensors(module, config, out, in, has_bias, model_dtype_, FloatScaleDType(config));
}

absl::StatusOr<std::vector<ExportTensor>> HfQuarkExporter::PackLinear(const LinearExportData& data) const {
  return LinearExportTensors(data, config_.pack_method, model_dtype_, FloatScaleDType(data.config));
}

absl::StatusOr<nlohmann::ordered_json> HfQuarkExporter::MakeQuantizationConfig(
    const LayerPlan&, const std::vector<std::string>& excluded) const {
  nlohmann::ordered_json qc = ConfigToQuarkJson(HfQuarkExportConfig(config_));  // #30 Quark's and vLLM's spelling
  qc["exclude"] = excluded;  // exact names: vLLM does no glob matching here
  return qc;
}

absl::Status HfQuarkExporter::CheckExport(const std::string& dir) const { return CheckHfQuarkExport(dir); }

HfQuarkExporter::~HfQuarkExporter() {
  writer_.reset();
  if (!published_ && !staging_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_dir_, ec);
  }
}

checkpoint::StDType HfQuarkExporter::FloatScaleDType(const LayerQuantConfig& config) const {
  // Per-group int4/uint4 scales are 16-bit (scale_dtype.h); QuantLinear quantized the weight with those same scales.
  const auto packed = config.weight ? PackedGroupScaleDtype(*config.weight, options_.compute_dtype) : std::nullopt;
  if (!packed) return checkpoint::StDType::kF32;
  auto dtype = StDTypeOf(*packed);
  return dtype.ok() ? *dtype : checkpoint::StDType::kF16;
}

absl::Status HfQuarkExporter::PlanTensors(const LayerPlan& plan, std::vector<checkpoint::PlannedTensor>& planned) {
  const std::string embed = checkpoint::ResolveTensorName(*reader_, checkpoint::EmbedTokensName(model_) + ".weight");
  if (!embed.empty()) model_dtype_ = reader_->Get(embed)->info->dtype;
  std::set<std::string> replaced;  // source tensors the quantized linears replace
  std::vector<std::string> excluded;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded) excluded.push_back(a.module);
    const auto fused_expert = FusedExpertLinearShape(model_, *reader_, a.module);  // gpt-oss: hf_quark_gpt_oss.h
    if (fused_expert && (a.source == ConfigSource::kExcluded || a.config.Empty())) {
      return absl::UnimplementedError(StrCat(a.module, " (from ", a.SourceLabel(), "): an HF-quark export carries gpt-oss's "
                                             "experts quantized, per expert (vLLM's gpt_oss loader reads no float "
                                             "per-expert tensors); quantize every expert"));
    }
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    if (a.module_type != "Linear" || !InDecoderLayer(model_, a.module)) {
      return absl::UnimplementedError(StrCat(a.module, " (", a.module_type, ", from ", a.SourceLabel(),
                                             "): only the linears of decoder layers are quantized in an LLM export; "
                                             "add it to exclude"));
    }
    const std::string weight = checkpoint::ResolveTensorName(*reader_, a.module + ".weight");
    if (weight.empty() && !fused_expert) return absl::NotFoundError(StrCat(a.module, ".weight: not in ", reader_->location()));
    const std::vector<int64_t> shape = fused_expert ? *fused_expert : reader_->Get(weight)->info->shape;
    const std::string bias = checkpoint::ResolveTensorName(*reader_, a.module + ".bias");
    auto specs = LinearTensors(a.module, a.config, shape[0], shape[1], fused_expert || !bias.empty());
    if (!specs.ok()) return specs.status();
    for (const auto& spec : *specs) planned.push_back({spec.name, spec.dtypes[0], spec.shape});
    replaced.insert(weight);
    if (!bias.empty()) replaced.insert(bias);
    quantized_modules_.insert(a.module);
  }
  for (const std::string& name : reader_->Names()) {
    if (replaced.count(name) || ReplacedByExpertLinears(model_, name)) continue;
    const auto& info = *reader_->Get(name)->info;
    planned.push_back({name, info.dtype, info.shape});
    pending_copies_.insert(name);
  }
  if (options_.untie_embeddings && checkpoint::ResolveTensorName(*reader_, "lm_head.weight").empty()) {
    planned.push_back({"lm_head.weight", model_dtype_, {model_.vocab_size, model_.hidden_size}});
    pending_copies_.insert("lm_head.weight");
  }
  // MoE routers are no module of the plan (never quantized): vLLM builds them unquantized anyway, but HF transformers'
  // Quark loader replaces every Linear that exclude does not name.
  // The MTP layers (IsOutsideForward) are copied as stored, so their linears are named excluded as well.
  const std::string weight = ".weight";
  const auto module_of = [&weight](const std::string& tensor) { return tensor.substr(0, tensor.size() - weight.size()); };
  for (int64_t i = 0; i < model_.num_hidden_layers; ++i) {
    for (const auto& router : checkpoint::LayerRouterTensors(model_, i)) {
      if (absl::EndsWith(router.name, weight)) excluded.push_back(module_of(router.name));
    }
  }
  for (const auto& spec : checkpoint::ModelTensors(model_)) {
    if (spec.role == checkpoint::TensorRole::kLinearWeight && checkpoint::IsOutsideForward(model_, spec.name)) {
      excluded.push_back(module_of(spec.name));
    }
  }
  auto qc = MakeQuantizationConfig(plan, excluded);
  if (!qc.ok()) return qc.status();
  quantization_config_ = *std::move(qc);
  return absl::OkStatus();
}

absl::Status HfQuarkExporter::WriteLinear(const LinearExportData& data) {
  if (!quantized_modules_.count(data.module)) {
    return absl::InvalidArgumentError(StrCat(data.module, ": not a quantized linear of the export plan"));
  }
  auto tensors = PackLinear(data);
  if (!tensors.ok()) return tensors.status();
  for (const ExportTensor& t : *tensors) {
    auto bytes = runtime::HostBytes(t.data, t.name);
    if (!bytes.ok()) return bytes.status();
    if (auto s = writer_->Write(t.name, *bytes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status HfQuarkExporter::WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) {
  for (auto it = pending_copies_.begin(); it != pending_copies_.end();) {
    if (it->rfind(prefix, 0) != 0) {
      ++it;
      continue;
    }
    if (!reader_->Get(*it).ok()) {
      // A tensor the export adds (an untied lm_head): its values come from `weights` alone.
      auto dtype = AtenFloatOf(model_dtype_);
      if (!dtype.ok()) return dtype.status();
      auto tensor = weights.Get(*it, *dtype);
      if (!tensor.ok()) return tensor.status();
      const at::Tensor t = tensor->contiguous();
      auto bytes = runtime::HostBytes(t, *it);
      if (!bytes.ok()) return bytes.status();
      if (auto s = writer_->Write(*it, *bytes); !s.ok()) return s;
      it = pending_copies_.erase(it);
      continue;
    }
    auto ref = reader_->Get(*it);
    auto float_dtype = AtenFloatOf(ref->info->dtype);
    if (!float_dtype.ok()) {
      // Not a float tensor (an integer buffer): no algorithm changes those, the bytes travel as they are.
      if (auto s = writer_->Write(*it, ref->bytes()); !s.ok()) return s;
    } else {
      auto tensor = weights.Get(*it, *float_dtype);
      if (!tensor.ok()) return tensor.status();
      const at::Tensor t = tensor->contiguous();
      auto bytes = runtime::HostBytes(t, *it);
      if (!bytes.ok()) return bytes.status();
      if (auto s = writer_->Write(*it, *bytes); !s.ok()) return s;
    }
    ref->Release();  // its pages leave the resident set: memory stays at one layer
    it = pending_copies_.erase(it);
  }
  return absl::OkStatus();
}

absl::Status HfQuarkExporter::WriteConfigAndFiles() const {
  std::ifstream in(model_dir_ + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(StrCat(model_dir_, "/config.json: not a JSON object"));
  }
  config["quantization_config"] = quantization_config_;
  if (options_.untie_embeddings) config["tie_word_embeddings"] = false;
  std::ofstream out(staging_dir_ + "/config.json");
  out << config.dump(2) << "\n";
  if (!out.flush()) return WriteError(StrCat(staging_dir_, "/config.json: write failed"), errno);
  // Tokenizer files, generation_config.json and the rest of the folder's top level travel with the weights.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "config.json" || name == "model.safetensors.index.json" ||
        entry.path().extension() == ".safetensors") {
      continue;
    }
    fs::copy_file(entry.path(), fs::path(staging_dir_) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return WriteError(StrCat("copy of ", entry.path().string(), " failed"), ec);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> HfQuarkExporter::Finish(const runtime::WeightSource& weights) {
  if (auto s = WriteUnquantized("", weights); !s.ok()) return s;
  if (auto s = writer_->Finish(); !s.ok()) return s;
  writer_.reset();
  if (auto s = WriteConfigAndFiles(); !s.ok()) return s;
  if (auto s = CheckExport(staging_dir_); !s.ok()) return s;  // refused: the destructor removes the folder
  std::error_code ec;
  fs::remove(output_dir_, ec);  // an empty folder may stand in the way of the rename
  fs::rename(staging_dir_, output_dir_, ec);
  if (ec) return WriteError(StrCat("publishing ", output_dir_, " failed"), ec);
  published_ = true;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(output_dir_, ec)) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace quark::exporter

#include "core/export/gguf_whole_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_mxfp4.h"
#include "core/export/gguf_whole_file_plan.h"
#include "core/export/gguf_tensor_plan.h"
#include "core/numerics/real_quant.h"

namespace quark::exporter::gguf {
namespace {

namespace fs = std::filesystem;

// The bytes of `t` in its GGUF type.
absl::StatusOr<std::string> Encode(const GgufTensorData& t) {
  const TypeTraits* traits = FindType(t.type);
  const int64_t row = t.data.dim() == 0 ? 1 : t.data.size(-1), rows = t.data.numel() / row;
  if (traits == nullptr || row % traits->block_size != 0) {
    return absl::InternalError(StrCat("gguf: tensor ", t.name, ": rows of ", row, " values do not fit type ",
                                      traits ? traits->name : "?"));
  }
  const float* src = t.data.data_ptr<float>();
  const int64_t row_bytes = RowBytes(t.type, row);
  std::string bytes(static_cast<size_t>(rows * row_bytes), '\0');
  for (int64_t r = 0; r < rows; ++r) traits->from_float(src + r * row, bytes.data() + r * row_bytes, row);
  if (t.type == kGgmlMxfp4) {
    // The engine's OCP MXFP4 values are a subset of GGML MXFP4's: they must come back exactly, else the file would
    // hold other weights than the run evaluated.
    std::vector<float> back(static_cast<size_t>(row));
    for (int64_t r = 0; r < rows; ++r) {
      traits->to_float(bytes.data() + r * row_bytes, back.data(), row);
      for (int64_t j = 0; j < row; ++j) {
        if (back[j] != src[r * row + j]) {
          return absl::InternalError(StrCat("gguf: tensor ", t.name, ": value ", src[r * row + j], " at row ", r,
                                            ", column ", j, " is not on its block's MXFP4 grid (it encodes as ",
                                            back[j], ")"));
        }
      }
    }
  }
  return bytes;
}

// The run's weights with the quantized linears' float values in front.
class OverlaidWeights : public runtime::WeightSource {
 public:
  OverlaidWeights(const runtime::TensorMapWeightSource& front, const runtime::WeightSource& back)
      : front_(front), back_(back) {}
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override {
    return front_.Has(name) ? front_.Get(name, dtype) : back_.Get(name, dtype);
  }
  bool Has(const std::string& name) const override { return front_.Has(name) || back_.Has(name); }
  std::string Location() const override { return back_.Location(); }

 private:
  const runtime::TensorMapWeightSource& front_;
  const runtime::WeightSource& back_;
};

class WholeFileGgufExporter : public ModelExporter {
 public:
  WholeFileGgufExporter(std::string output_file, std::set<std::string> linears, std::set<std::string> mxfp4,
                        WholeFileWrite write)
      : output_file_(std::move(output_file)),
        linears_(std::move(linears)),
        mxfp4_(std::move(mxfp4)),
        write_(std::move(write)) {}

  std::string_view format() const override { return "gguf"; }

  absl::Status WriteLinear(const LinearExportData& data) override {
    if (!linears_.count(data.module)) {
      return absl::InvalidArgumentError(StrCat(data.module, ": not a linear of this model"));
    }
    at::Tensor weight;
    const auto& spec = data.config.weight;
    if (spec && !IsCastType(spec->dtype)) {
      QUARK_ASSIGN_OR_RETURN(weight, Dequantize(data.weight_codes, *spec, at::kFloat));
    } else if (spec) {
      weight = data.weight.to(spec->dtype == DType::kBFloat16 ? at::kBFloat16 : at::kHalf).to(at::kFloat);
    } else {
      weight = data.weight.to(at::kFloat);
    }
    if (weight.dim() != 2) {
      return absl::InternalError(StrCat(data.module, ": weight of ", weight.dim(), " dims, expected [out, in]"));
    }
    overlay_.Set(data.module + ".weight", weight.cpu().contiguous());
    if (data.bias.defined()) overlay_.Set(data.module + ".bias", data.bias.to(at::kFloat).cpu().contiguous());
    return absl::OkStatus();
  }

  // Everything else is read from the weights Finish receives (the layer's norms, router, unquantized linears).
  absl::Status WriteUnquantized(const std::string&, const runtime::WeightSource&) override { return absl::OkStatus(); }

  absl::StatusOr<std::vector<std::string>> Finish(const runtime::WeightSource& weights) override {
    if (finished_) return absl::FailedPreconditionError("gguf export: Finish called twice");
    finished_ = true;
    const std::string staging = output_file_ + ".partial";
    const OverlaidWeights source(overlay_, weights);
    if (auto s = write_(source, mxfp4_, staging); !s.ok()) {
      std::error_code ec;
      fs::remove(staging, ec);
      return s;
    }
    std::error_code ec;
    fs::rename(staging, output_file_, ec);
    if (ec) return absl::InternalError(StrCat("output: renaming ", staging, " to ", output_file_, ": ", ec.message()));
    return std::vector<std::string>{fs::path(output_file_).filename().string()};
  }

 private:
  std::string output_file_;
  std::set<std::string> linears_;  // modules the pipeline may hand to WriteLinear
  std::set<std::string> mxfp4_;    // those the plan quantizes to OCP MXFP4
  WholeFileWrite write_;
  runtime::TensorMapWeightSource overlay_;
  bool finished_ = false;
};

}  // namespace

absl::Status WriteGgufTensors(const Metadata& metadata, const std::vector<GgufTensorData>& tensors,
                              const std::string& path) {
  std::vector<TensorInfo> infos;
  for (const GgufTensorData& t : tensors) {
    infos.push_back({t.name, std::vector<int64_t>(t.data.sizes().rbegin(), t.data.sizes().rend()), t.type});
  }
  AssignOffsets(infos);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string header = SerializeHeader(metadata, infos);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  uint64_t written = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string pad(static_cast<size_t>(infos[k].offset - written), '\0');
    out.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    QUARK_ASSIGN_OR_RETURN(const std::string bytes, Encode(tensors[k]));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    written = infos[k].offset + bytes.size();
  }
  if (!out) return absl::InternalError(StrCat("cannot write ", path));
  return absl::OkStatus();
}

Metadata WholeFileMetadata(const std::string& a, const std::string& name, const checkpoint::ModelConfig& b,
                           int64_t kv_heads) {
  auto u32 = [](int64_t v) { return Value::U32(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return Value::F32(static_cast<float>(v)); };
  return {{"general.architecture", Value::Str(a)},
          {"general.type", Value::Str("model")},
          {"general.name", Value::Str(name)},
          {"general.alignment", u32(kGgufAlignment)},
          {a + ".block_count", u32(b.num_hidden_layers)},
          {a + ".context_length", u32(b.max_position_embeddings)},
          {a + ".embedding_length", u32(b.hidden_size)},
          {a + ".attention.head_count", u32(b.num_attention_heads)},
          {a + ".attention.head_count_kv", u32(kv_heads)},
          {a + ".rope.freq_base", f32(b.rope_theta)},
          {a + ".attention.layer_norm_rms_epsilon", f32(b.rms_norm_eps)}};
}

void AppendWholeFileTail(const checkpoint::ModelConfig& b, const GgufVocab& vocab, GgmlType type,
                         bool mxfp4_experts, Metadata& md) {
  // LLAMA_FTYPE_ALL_F32 0, MOSTLY_Q8_0 7, MOSTLY_MXFP4_MOE 38.
  const uint32_t file_type = mxfp4_experts ? kFileTypeMxfp4Moe : type == GgmlType::kQ8_0 ? 7 : 0;
  md.emplace_back("general.file_type", Value::U32(file_type));
  if (type != GgmlType::kF32 || mxfp4_experts) md.emplace_back("general.quantization_version", Value::U32(2));
  AppendTokenizerMetadata(b.vocab_size, b.bos_token_id, b.eos_token_id, vocab, md);
}

absl::Status TakePlannedTypes(const std::string& family, const std::vector<TensorInfo>& planned,
                              std::vector<GgufTensorData>& tensors) {
  for (size_t k = 0; k < std::max(tensors.size(), planned.size()); ++k) {
    const bool same = k < tensors.size() && k < planned.size() && tensors[k].name == planned[k].name &&
                      std::equal(tensors[k].data.sizes().rbegin(), tensors[k].data.sizes().rend(),
                                 planned[k].ne.begin(), planned[k].ne.end());
    if (!same) {
      if (k >= tensors.size() || k >= planned.size() || tensors[k].name != planned[k].name) {
        return absl::InvalidArgumentError(StrCat("gguf ", family, ": tensor ", k, " (\"",
                                                 k < tensors.size() ? tensors[k].name : planned[k].name,
                                                 "\") is not the one config.json implies there"));
      }
      const std::vector<int64_t> ne(tensors[k].data.sizes().rbegin(), tensors[k].data.sizes().rend());
      return absl::InvalidArgumentError(StrCat("gguf ", family, ": tensor \"", tensors[k].name, "\" has ne [",
                                               StrJoin(ne, ", "), "] but config.json implies [",
                                               StrJoin(planned[k].ne, ", "), "]"));
    }
    tensors[k].type = planned[k].type;
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> DequantizedGgufTensor(const GgufFile& file, const std::string& name) {
  const TensorInfo* info = file.FindTensor(name);
  if (info == nullptr) return absl::NotFoundError(StrCat(file.path(), ": tensor \"", name, "\" is missing"));
  const TypeTraits* traits = FindType(info->type);
  if (traits == nullptr || traits->to_float == nullptr) {
    return absl::InvalidArgumentError(StrCat(file.path(), ": tensor \"", name, "\" has a type this reader lacks"));
  }
  std::vector<int64_t> sizes(info->ne.rbegin(), info->ne.rend());
  at::Tensor out = at::empty(sizes, at::kFloat);
  const int64_t row = info->RowLength(), rows = info->Rows(), row_bytes = RowBytes(info->type, row);
  const uint8_t* data = file.TensorData(*info);
  for (int64_t r = 0; r < rows; ++r) traits->to_float(data + r * row_bytes, out.data_ptr<float>() + r * row, row);
  return out;
}

absl::StatusOr<at::Tensor> GetChecked(const runtime::WeightSource& weights, const std::string& name,
                                      const std::vector<int64_t>& shape) {
  QUARK_ASSIGN_OR_RETURN(at::Tensor t, weights.Get(name, at::kFloat));
  if (t.sizes() != at::IntArrayRef(shape)) {
    return absl::InvalidArgumentError(StrCat("tensor \"", name, "\" has shape [", StrJoin(t.sizes(), ", "),
                                             "] but config.json implies [", StrJoin(shape, ", "), "]"));
  }
  return t.contiguous();
}

absl::StatusOr<WholeFileModel> OpenWholeFileModel(const std::string& model_dir, const GgufExportOptions& options) {
  WholeFileModel out;
  QUARK_ASSIGN_OR_RETURN(out.model, checkpoint::LoadModelConfig(model_dir));
  QUARK_ASSIGN_OR_RETURN(out.type, WholeFileGgufType(options.file_type, options.type, options.imatrix != nullptr,
                                                     out.model.model_type));
  QUARK_ASSIGN_OR_RETURN(out.vocab, ReadModelVocab(model_dir, out.model.vocab_size, out.model.model_type));
  return out;
}

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateWholeFileGgufExporter(const std::string& output_file,
                                                                           const LayerPlan& plan, WholeFileWrite write) {
  std::error_code ec;
  if (output_file.empty()) return absl::InvalidArgumentError("output: empty");
  if (fs::exists(output_file, ec)) return absl::AlreadyExistsError(StrCat("output: ", output_file, " exists"));
  std::set<std::string> linears;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    QUARK_RETURN_IF_ERROR(CheckGgufWeightsOnly(a, StrCat(a.module, " (", a.SourceLabel(), ")")));
    linears.insert(a.module);
  }
  return std::unique_ptr<ModelExporter>(
      new WholeFileGgufExporter(output_file, std::move(linears), Mxfp4Modules(plan), std::move(write)));
}

}  // namespace quark::exporter::gguf

#include "core/export/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/base/log.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/base/write_error.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/checkpoint/model_modules.h"
#include "core/export/gguf_deepseek_exporter.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_gemma.h"
#include "core/export/gguf_gpt_oss.h"
#include "core/export/gguf_llama4.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_moe.h"
#include "core/export/gguf_tensor_plan.h"
#include "core/export/gguf_vocab.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

// One HF tensor as gguf_tensor_plan.h planned it, placed in the file: its part is a whole GGUF tensor, or (an MoE
// expert's weight) the slice `expert` of the stacked tensor table_[table], at the stacked tensor's offset + expert *
// the slice's bytes.
struct PlannedTensor : gguf::PlannedGgufTensor {
  size_t table = 0;  // the GGUF tensor (index in table_) it is or is part of
  bool written = false;
};


// One weight row of codes -> blocks. codes/scale/zero_point are one row's values (in/32 groups).
absl::Status EncodeCodeRow(GgmlType type, const int32_t* q, const float* s, const float* z, int64_t n, uint8_t* out,
                           const std::string& module) {
  for (int64_t b = 0; b < n / gguf::kBlockSize; ++b) {
    const int32_t* qb = q + b * gguf::kBlockSize;
    const uint16_t d = gguf::Fp32ToFp16(s[b]);
    if (!std::isfinite(gguf::Fp16ToFp32(d))) {
      return absl::InvalidArgumentError(StrCat(module, ": weight scale ", s[b], " does not fit fp16 (GGUF's block scale)"));
    }
    const int lo = type == GgmlType::kQ8_0 ? -128 : type == GgmlType::kQ4_0 ? -8 : 0;
    const int hi = type == GgmlType::kQ8_0 ? 127 : type == GgmlType::kQ4_0 ? 7 : 15;
    for (int j = 0; j < gguf::kBlockSize; ++j) {
      if (qb[j] < lo || qb[j] > hi) {
        return absl::InternalError(StrCat(module, ": weight code ", qb[j], " outside [", lo, ", ", hi, "]"));
      }
    }
    if (type == GgmlType::kQ8_0) {
      gguf::BlockQ8_0 block{d, {}};
      for (int j = 0; j < gguf::kBlockSize; ++j) block.qs[j] = static_cast<int8_t>(qb[j]);
      std::memcpy(out + b * sizeof(block), &block, sizeof(block));
    } else if (type == GgmlType::kQ4_0) {
      gguf::BlockQ4_0 block{d, {}};
      for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>((qb[j] + 8) | ((qb[j + 16] + 8) << 4));
      std::memcpy(out + b * sizeof(block), &block, sizeof(block));
    } else {
      // Quark's Q4_1 mapping: w = (q - z) * s = s * q + (-s * z).
      gguf::BlockQ4_1 block{d, gguf::Fp32ToFp16(-s[b] * z[b]), {}};
      for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(qb[j] | (qb[j + 16] << 4));
      std::memcpy(out + b * sizeof(block), &block, sizeof(block));
    }
  }
  return absl::OkStatus();
}

class GgufExporter : public ModelExporter {
 public:
  static absl::StatusOr<std::unique_ptr<GgufExporter>> Create(const std::string& model_dir,
                                                              const std::string& output_file, const Config& config,
                                                              const LayerPlan& plan, GgufExportOptions options);
  ~GgufExporter() override;

  std::string_view format() const override { return "gguf"; }
  absl::Status WriteLinear(const LinearExportData& data) override;
  absl::Status WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) override;
  absl::StatusOr<std::vector<std::string>> Finish(const runtime::WeightSource& weights) override;

 private:
  GgufExporter() = default;
  absl::Status Plan(const LayerPlan& plan, const checkpoint::CheckpointReader& reader);
  absl::Status BuildTable();
  absl::Status OpenStaging(const std::string& header, uint64_t data_bytes);
  absl::Status WriteFloat(PlannedTensor& t, const at::Tensor& values);
  absl::Status WritePreEncoded(PlannedTensor& t, const at::Tensor& values, const gguf::PreEncodedTensor& data);
  absl::Status WriteCodes(PlannedTensor& t, const LinearExportData& data);
  absl::Status WriteBytes(PlannedTensor& t, const std::string& bytes);
  absl::Status CheckWritten() const;
  absl::Status CheckImatrix() const;
  // The quant weights of `t` (its expert's slice), empty when the imatrix does not name it or its type ignores it.
  std::vector<float> ImatrixWeights(const PlannedTensor& t) const;
  PlannedTensor* Find(const std::string& hf_name);

  std::string output_file_, staging_file_;
  GgufExportOptions options_;
  checkpoint::ModelConfig model_;
  std::map<std::string, GgmlType> coded_;  // module -> type of its engine codes
  std::vector<PlannedTensor> tensors_;
  std::vector<gguf::TensorInfo> table_;  // the GGUF's tensor table (experts stacked)
  std::map<std::string, size_t> index_;  // HF name -> tensors_
  uint64_t data_start_ = 0;
  int fd_ = -1;
  bool published_ = false;
  bool head_from_embedding_ = false;  // tied embeddings, but llama.cpp's architecture requires output.weight
};

absl::StatusOr<std::unique_ptr<GgufExporter>> GgufExporter::Create(const std::string& model_dir,
                                                                  const std::string& output_file, const Config& config,
                                                                  const LayerPlan& plan, GgufExportOptions options) {
  (void)config;  // the plan carries every module's resolved config
  std::error_code ec;
  if (output_file.empty()) return absl::InvalidArgumentError("output: empty");
  if (fs::exists(output_file, ec)) return absl::AlreadyExistsError(StrCat("output: ", output_file, " exists"));
  std::unique_ptr<GgufExporter> e(new GgufExporter());
  e->output_file_ = output_file;
  e->staging_file_ = output_file + ".partial";
  e->options_ = options;
  QUARK_ASSIGN_OR_RETURN(e->model_, checkpoint::LoadModelConfig(model_dir));
  if (options.untie_embeddings) e->model_.tie_word_embeddings = false;  // ModelTensors then lists lm_head.weight
  QUARK_ASSIGN_OR_RETURN(const std::string arch, gguf::GgufArchitecture(e->model_));
  if (e->model_.tie_word_embeddings && gguf::RequiresOutputTensor(arch)) {
    e->model_.tie_word_embeddings = false;  // output.weight written from the embedding
    e->head_from_embedding_ = true;
  }
  QUARK_ASSIGN_OR_RETURN(const gguf::GgufVocab vocab,
                         gguf::ReadModelVocab(model_dir, e->model_.vocab_size, e->model_.model_type));
  QUARK_ASSIGN_OR_RETURN(auto reader, checkpoint::CheckpointReader::Open(model_dir));
  QUARK_RETURN_IF_ERROR(e->Plan(plan, *reader));
  QUARK_RETURN_IF_ERROR(e->CheckImatrix());

  // general.file_type names the weights' main type: the requested one, else the engine codes' (a mixed recipe's: the
  // type most of its coded tensors have, first by type id on a tie, as llama.cpp's loader guesses a file's type from
  // its tensors), else the source's.
  GgmlType main_type = GgmlType::kF32;
  bool quantized = false;
  for (const PlannedTensor& t : e->tensors_) quantized |= gguf::FindType(t.info.type)->quantized;
  if (options.file_type) {
    main_type = options.file_type->default_type;
  } else if (options.type) {
    main_type = *options.type;
  } else if (!e->coded_.empty()) {
    std::map<GgmlType, int> count;
    for (const auto& [module, type] : e->coded_) ++count[type];
    main_type = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                  return a.second < b.second;
                })->first;
  } else {
    main_type = e->tensors_.front().info.type;  // token_embd, in the source dtype
  }
  std::string name = options.name.empty() ? fs::path(model_dir).lexically_normal().filename().string() : options.name;
  if (name.empty()) name = fs::path(model_dir).lexically_normal().parent_path().filename().string();
  QUARK_ASSIGN_OR_RETURN(const gguf::Metadata metadata,
                         gguf::BuildMetadata(e->model_, vocab, name,
                                             options.file_type ? options.file_type->ftype
                                                               : gguf::FindType(main_type)->file_type,
                                             quantized));
  const uint64_t data_bytes = gguf::AssignOffsets(e->table_);
  for (PlannedTensor& t : e->tensors_) {
    t.info.nbytes = gguf::TensorBytes(t.info.type, t.info.ne);
    t.info.offset = e->table_[t.table].offset + (t.expert < 0 ? 0 : t.expert * t.info.nbytes);
  }
  const std::string header = gguf::SerializeHeader(metadata, e->table_);
  QUARK_RETURN_IF_ERROR(e->OpenStaging(header, data_bytes));
  return e;
}

GgufExporter::~GgufExporter() {
  if (fd_ >= 0) ::close(fd_);
  if (!published_ && !staging_file_.empty()) {
    std::error_code ec;
    fs::remove(staging_file_, ec);
  }
}

absl::Status GgufExporter::Plan(const LayerPlan& plan, const checkpoint::CheckpointReader& reader) {
  QUARK_ASSIGN_OR_RETURN(coded_, gguf::CodedGgufTypes(plan));
  gguf::GgufTypeRequest request;
  request.file_type = options_.file_type;
  request.type = options_.type;
  request.pure = options_.pure;
  request.has_imatrix = options_.imatrix != nullptr;
  auto source_dtype = [&](const std::string& hf_name) -> absl::StatusOr<checkpoint::StDType> {
    std::string stored = checkpoint::ResolveTensorName(reader, hf_name);
    // An untied lm_head the checkpoint does not hold is made from the embedding: it takes the embedding's dtype.
    if (stored.empty() && hf_name == "lm_head.weight" && (options_.untie_embeddings || head_from_embedding_)) {
      stored = checkpoint::ResolveTensorName(reader, checkpoint::EmbedTokensName(model_) + ".weight");
    }
    if (stored.empty()) return absl::NotFoundError(StrCat(hf_name, ": not in ", reader.location()));
    return reader.Get(stored)->info->dtype;
  };
  QUARK_ASSIGN_OR_RETURN(std::vector<gguf::PlannedGgufTensor> planned,
                         gguf::PlanGgufTensors(model_, coded_, request, source_dtype));
  for (gguf::PlannedGgufTensor& p : planned) {
    if (!p.fallback.empty()) log::Get("export")->warn("gguf: {}", p.fallback);
    if (options_.on_planned) options_.on_planned(p.hf_name, p.info.type);  // #37 item 4
    PlannedTensor t;
    static_cast<gguf::PlannedGgufTensor&>(t) = std::move(p);
    index_[t.hf_name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  if (options_.pre_encoded) {
    std::map<std::string, GgmlType> types;
    for (const PlannedTensor& t : tensors_) {
      if (t.expert < 0 && !t.from_codes && t.info.ne.size() == 2) types[t.hf_name] = t.info.type;
    }
    options_.pre_encoded->SetPlannedTypes(std::move(types));
  }
  return BuildTable();
}

absl::Status GgufExporter::BuildTable() {
  std::map<std::string, size_t> by_name;
  std::map<size_t, std::set<int64_t>> experts;  // stacked tensor -> the experts planned into it
  for (PlannedTensor& t : tensors_) {
    auto [it, fresh] = by_name.emplace(t.info.name, table_.size());
    t.table = it->second;
    if (fresh) {
      table_.push_back(t.info);
      if (t.expert >= 0) table_.back().ne.push_back(model_.num_experts);
    }
    const gguf::TensorInfo& whole = table_[t.table];
    if (t.expert < 0) {
      if (!fresh) return absl::InternalError(StrCat(t.hf_name, ": a second tensor named ", t.info.name));
      continue;
    }
    if (whole.ne.size() != 3 || t.expert >= whole.ne[2] || !experts[t.table].insert(t.expert).second) {
      return absl::InternalError(StrCat(t.hf_name, ": expert ", t.expert, " does not fit ", whole.name, " (",
                                        model_.num_experts, " experts)"));
    }
    if (t.info.type != whole.type || !std::equal(t.info.ne.begin(), t.info.ne.end(), whole.ne.begin())) {
      return absl::InvalidArgumentError(StrCat(
          whole.name, ": expert ", t.expert, " (", t.hf_name, ") would be ", gguf::FindType(t.info.type)->name,
          " but the layer's first expert is ", gguf::FindType(whole.type)->name,
          ": llama.cpp holds a layer's experts in one tensor of one type; quantize them alike or exclude them all"));
    }
  }
  for (const auto& [table, planned] : experts) {
    if (static_cast<int64_t>(planned.size()) != model_.num_experts) {
      return absl::InternalError(StrCat(table_[table].name, ": ", planned.size(), " experts planned, config has ",
                                        model_.num_experts));
    }
  }
  return absl::OkStatus();
}

absl::Status GgufExporter::OpenStaging(const std::string& header, uint64_t data_bytes) {
  std::error_code ec;
  const fs::path parent = fs::path(staging_file_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  fd_ = ::open(staging_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) return WriteError(StrCat("output: cannot create ", staging_file_), errno);
  data_start_ = header.size();
  if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(data_start_ + data_bytes)) != 0) {
    return WriteError(StrCat("output: cannot write ", staging_file_), errno);
  }
  return absl::OkStatus();
}

absl::Status GgufExporter::CheckImatrix() const {
  if (!options_.imatrix) return absl::OkStatus();
  for (const auto& [name, entry] : options_.imatrix->entries) {
    const gguf::TensorInfo* whole = nullptr;
    for (const gguf::TensorInfo& t : table_) whole = t.name == name ? &t : whole;
    if (whole == nullptr) return absl::InvalidArgumentError(StrCat("imatrix: \"", name, "\" is no tensor of the model"));
    const int64_t slices = whole->ne.size() > 2 ? whole->ne[2] : 1;
    if (static_cast<int64_t>(entry.sum2.size()) != whole->ne[0] * slices ||
        (!entry.legacy && static_cast<int64_t>(entry.counts.size()) != slices)) {
      return absl::InvalidArgumentError(StrCat("imatrix: ", name, ": ", entry.sum2.size(), " values in ",
                                               entry.counts.size(), " slices, the tensor has ", whole->ne[0],
                                               " columns x ", slices, " experts"));
    }
  }
  return absl::OkStatus();
}

std::vector<float> GgufExporter::ImatrixWeights(const PlannedTensor& t) const {
  if (!options_.imatrix || t.from_codes || gguf::FindType(t.info.type)->quantize == nullptr) return {};
  auto it = options_.imatrix->entries.find(t.info.name);
  if (it == options_.imatrix->entries.end()) return {};
  gguf::ImatrixEntry entry = it->second;
  entry.ncols = t.info.ne[0];  // a legacy entry is one run of columns x experts
  return gguf::QuantWeights(entry, t.expert < 0 ? 0 : t.expert);
}

PlannedTensor* GgufExporter::Find(const std::string& hf_name) {
  auto it = index_.find(hf_name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::Status GgufExporter::WriteBytes(PlannedTensor& t, const std::string& bytes) {
  if (bytes.size() != t.info.nbytes) {
    return absl::InternalError(StrCat(t.info.name, ": ", bytes.size(), " bytes, planned ", t.info.nbytes));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                               static_cast<off_t>(data_start_ + t.info.offset + done));
    if (n <= 0) return WriteError(StrCat("output: writing ", t.info.name, " to ", staging_file_), n == 0 ? ENOSPC : errno);
    done += static_cast<size_t>(n);
  }
  t.written = true;
  return absl::OkStatus();
}

absl::Status GgufExporter::WriteFloat(PlannedTensor& t, const at::Tensor& values) {
  std::vector<int64_t> shape(t.info.ne.rbegin(), t.info.ne.rend());
  if (values.sizes().vec() != shape) {
    return absl::InvalidArgumentError(StrCat(t.hf_name, ": shape ", StrJoin(values.sizes().vec(), "x"), ", expected ",
                                             StrJoin(shape, "x")));
  }
  at::Tensor v = values.to(at::kFloat).contiguous();
  if (t.permute_heads > 0) v = gguf::PermuteRows(v, t.permute_heads);
  if (const float shift = gguf::GemmaNormShift(model_, t.hf_name); shift != 0) v = v + shift;  // Gemma's 1 + w
  if (options_.pre_encoded) {
    if (std::optional<gguf::PreEncodedTensor> data = options_.pre_encoded->Take(t.hf_name)) {
      return WritePreEncoded(t, v, *data);
    }
  }
  const gguf::TypeTraits* traits = gguf::FindType(t.info.type);
  const int64_t n = t.info.RowLength(), rows = t.info.Rows(), row_bytes = gguf::RowBytes(t.info.type, n);
  std::string bytes(t.info.nbytes, '\0');
  const float* x = v.data_ptr<float>();
  if (const std::vector<float> qw = ImatrixWeights(t); !qw.empty()) {
    traits->quantize(x, bytes.data(), rows, n, qw.data());
  } else {
    for (int64_t r = 0; r < rows; ++r) traits->from_float(x + r * n, bytes.data() + r * row_bytes, n);
  }
  return WriteBytes(t, bytes);
}

// `values` [rows, n] float32 as the file holds them (rows permuted); `data` in the HF row order.
absl::Status GgufExporter::WritePreEncoded(PlannedTensor& t, const at::Tensor& values, const gguf::PreEncodedTensor& data) {
  const int64_t n = t.info.RowLength(), rows = t.info.Rows(), row_bytes = gguf::RowBytes(t.info.type, n);
  if (data.type != t.info.type || data.rows != rows || data.cols != n ||
      static_cast<int64_t>(data.bytes.size()) != rows * row_bytes) {
    return absl::InternalError(StrCat(t.hf_name, ": pre-encoded as ", gguf::FindType(data.type)->name, " [", data.rows,
                                      ", ", data.cols, "], planned ", gguf::FindType(t.info.type)->name, " [", rows,
                                      ", ", n, "]"));
  }
  at::Tensor blocks = at::from_blob(const_cast<uint8_t*>(data.bytes.data()), {rows, row_bytes}, at::kByte);
  if (t.permute_heads > 0) blocks = gguf::PermuteRows(blocks, t.permute_heads);
  blocks = blocks.contiguous();
  at::Tensor decoded = at::empty({rows, n}, at::kFloat);
  gguf::FindType(t.info.type)->to_float(blocks.data_ptr<uint8_t>(), decoded.data_ptr<float>(), rows * n);
  if (!at::equal(decoded, values)) {
    return absl::InternalError(StrCat(t.hf_name, ": the pre-encoded ", gguf::FindType(t.info.type)->name,
                                      " blocks do not decode to the weight's values"));
  }
  const std::string bytes(reinterpret_cast<const char*>(blocks.data_ptr<uint8_t>()), static_cast<size_t>(rows * row_bytes));
  return WriteBytes(t, bytes);
}

absl::Status GgufExporter::WriteCodes(PlannedTensor& t, const LinearExportData& data) {
  const RealQuantized& q = data.weight_codes;
  const int64_t out = t.info.ne[1], in = t.info.ne[0], groups = in / gguf::kBlockSize;
  if (!q.codes.defined() || !q.scale.defined() || q.codes.sizes().vec() != std::vector<int64_t>{out, in} ||
      q.scale.numel() != out * groups) {
    return absl::InvalidArgumentError(StrCat(data.module, ": weight_codes must be [", out, ", ", in,
                                             "] codes with ", out, "x", groups, " scales"));
  }
  at::Tensor codes = q.codes.to(at::kInt).reshape({out, in});
  at::Tensor scale = q.scale.to(at::kFloat).reshape({out, groups});
  at::Tensor zero = q.zero_point.defined() && q.zero_point.numel() == out * groups
                        ? q.zero_point.to(at::kFloat).reshape({out, groups})
                        : at::zeros({out, groups}, at::kFloat);
  if (t.permute_heads > 0) {
    codes = gguf::PermuteRows(codes, t.permute_heads);
    scale = gguf::PermuteRows(scale, t.permute_heads);
    zero = gguf::PermuteRows(zero, t.permute_heads);
  }
  codes = codes.contiguous();
  scale = scale.contiguous();
  zero = zero.contiguous();
  const int64_t row_bytes = gguf::RowBytes(t.info.type, in);
  std::string bytes(t.info.nbytes, '\0');
  for (int64_t r = 0; r < out; ++r) {
    QUARK_RETURN_IF_ERROR(EncodeCodeRow(t.info.type, codes.data_ptr<int32_t>() + r * in,
                                        scale.data_ptr<float>() + r * groups, zero.data_ptr<float>() + r * groups, in,
                                        reinterpret_cast<uint8_t*>(bytes.data()) + r * row_bytes, data.module));
  }
  return WriteBytes(t, bytes);
}

absl::Status GgufExporter::WriteLinear(const LinearExportData& data) {
  PlannedTensor* weight = Find(data.module + ".weight");
  if (weight == nullptr) return absl::InvalidArgumentError(StrCat(data.module, ": not a linear of this model"));
  if (weight->written) return absl::FailedPreconditionError(StrCat(data.module, ": written twice"));
  const bool coded = data.config.weight && !IsCastType(data.config.weight->dtype);
  if (coded != weight->from_codes) {
    return absl::InvalidArgumentError(StrCat(data.module, ": the plan ", weight->from_codes ? "quantizes" : "does not quantize",
                                             " it, the data ", coded ? "has" : "has no", " weight codes"));
  }
  QUARK_RETURN_IF_ERROR(coded ? WriteCodes(*weight, data) : WriteFloat(*weight, data.weight));
  if (PlannedTensor* bias = Find(data.module + ".bias")) {
    if (!data.bias.defined()) return absl::InvalidArgumentError(StrCat(data.module, ": bias missing"));
    QUARK_RETURN_IF_ERROR(WriteFloat(*bias, data.bias));
  }
  return absl::OkStatus();
}

absl::Status GgufExporter::WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) {
  for (PlannedTensor& t : tensors_) {
    if (t.written || t.from_codes || t.hf_name.rfind(prefix, 0) != 0) continue;
    const bool from_embedding = head_from_embedding_ && t.hf_name == "lm_head.weight";
    QUARK_ASSIGN_OR_RETURN(const at::Tensor values,
                           weights.Get(from_embedding ? checkpoint::EmbedTokensName(model_) + ".weight" : t.hf_name,
                                       at::kFloat));
    QUARK_RETURN_IF_ERROR(WriteFloat(t, values));
  }
  return absl::OkStatus();
}

absl::Status GgufExporter::CheckWritten() const {
  for (const PlannedTensor& t : tensors_) {
    if (!t.written) {
      return absl::FailedPreconditionError(StrCat(t.hf_name, ": quantized by the plan but WriteLinear never gave its codes"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> GgufExporter::Finish(const runtime::WeightSource& weights) {
  if (published_ || fd_ < 0) return absl::FailedPreconditionError("gguf export: Finish called twice");
  QUARK_RETURN_IF_ERROR(WriteUnquantized("", weights));
  QUARK_RETURN_IF_ERROR(CheckWritten());
  const bool synced = ::fsync(fd_) == 0;
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) return WriteError(StrCat("output: closing ", staging_file_), errno);
  // Read the file back as a consumer would: the header parses and every tensor is where it was planned.
  QUARK_ASSIGN_OR_RETURN(auto file, gguf::GgufFile::Open(staging_file_));
  if (file->tensors().size() != table_.size()) {
    return absl::InternalError(StrCat(staging_file_, ": ", file->tensors().size(), " tensors read back, planned ",
                                      table_.size()));
  }
  for (size_t i = 0; i < table_.size(); ++i) {
    const gguf::TensorInfo& got = file->tensors()[i];
    const gguf::TensorInfo& want = table_[i];
    if (got.name != want.name || got.ne != want.ne || got.type != want.type || got.offset != want.offset ||
        file->data_offset() != data_start_) {
      return absl::InternalError(StrCat(staging_file_, ": tensor ", want.name, " read back differs from the plan"));
    }
  }
  std::error_code ec;
  fs::rename(staging_file_, output_file_, ec);
  if (ec) return WriteError(StrCat("output: renaming ", staging_file_, " to ", output_file_), ec);
  published_ = true;
  return std::vector<std::string>{fs::path(output_file_).filename().string()};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateGgufExporter(const std::string& model_dir,
                                                                 const std::string& output_file, const Config& config,
                                                                 const LayerPlan& plan, GgufExportOptions options) {
  // DeepSeek-V3: llama.cpp's deepseek2 layout, written whole at Finish (gguf_deepseek_exporter.h).
  // gpt-oss and Llama 4 (#32): llama.cpp's gpt-oss and llama4 layouts, written whole at Finish as well.
  if (auto model = checkpoint::LoadModelConfig(model_dir); model.ok()) {
    if (model->family == checkpoint::ArchFamily::kDeepseek) {
      return CreateDeepseekGgufExporter(model_dir, output_file, plan, options);
    }
    if (model->family == checkpoint::ArchFamily::kGptOss) {
      return CreateGptOssGgufExporter(model_dir, output_file, plan, options);
    }
    if (model->family == checkpoint::ArchFamily::kLlama4) {
      return CreateLlama4GgufExporter(model_dir, output_file, plan, options);
    }
  }
  QUARK_ASSIGN_OR_RETURN(auto exporter, GgufExporter::Create(model_dir, output_file, config, plan, options));
  return std::unique_ptr<ModelExporter>(std::move(exporter));
}

}  // namespace quark::exporter

#include "core/export/gguf_deepseek_exporter.h"

#include <filesystem>
#include <map>
#include <set>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/model_config.h"
#include "core/config/quant_types.h"
#include "core/export/gguf_deepseek.h"
#include "core/export/gguf_tensor_plan.h"
#include "core/export/gguf_vocab.h"
#include "core/numerics/real_quant.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;

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

class DeepseekGgufExporter : public ModelExporter {
 public:
  DeepseekGgufExporter(checkpoint::DeepseekConfig config, gguf::SentencePieceVocab vocab, gguf::GgmlType type,
                       std::string output_file, std::set<std::string> linears)
      : config_(std::move(config)),
        vocab_(std::move(vocab)),
        type_(type),
        output_file_(std::move(output_file)),
        linears_(std::move(linears)) {}

  std::string_view format() const override { return "gguf"; }

  absl::Status WriteLinear(const LinearExportData& data) override {
    if (!linears_.count(data.module))
      return absl::InvalidArgumentError(StrCat(data.module, ": not a linear of this model"));
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
    if (auto s = gguf::WriteDeepseekGguf(config_, source, vocab_, type_, staging); !s.ok()) {
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
  checkpoint::DeepseekConfig config_;
  gguf::SentencePieceVocab vocab_;
  gguf::GgmlType type_;
  std::string output_file_;
  std::set<std::string> linears_;  // modules the pipeline may hand to WriteLinear
  runtime::TensorMapWeightSource overlay_;
  bool finished_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateDeepseekGgufExporter(const std::string& model_dir,
                                                                          const std::string& output_file,
                                                                          const LayerPlan& plan,
                                                                          const GgufExportOptions& options) {
  std::error_code ec;
  if (output_file.empty()) return absl::InvalidArgumentError("output: empty");
  if (fs::exists(output_file, ec)) return absl::AlreadyExistsError(StrCat("output: ", output_file, " exists"));
  QUARK_ASSIGN_OR_RETURN(const checkpoint::ModelConfig model, checkpoint::LoadModelConfig(model_dir));
  if (!model.deepseek) return absl::InternalError(StrCat(model_dir, ": not a deepseek_v3 model"));
  QUARK_ASSIGN_OR_RETURN(const gguf::GgmlType type,
                         gguf::DeepseekGgufType(options.file_type, options.type, options.imatrix != nullptr));
  QUARK_RETURN_IF_ERROR(gguf::CheckDeepseekGguf(*model.deepseek));
  std::set<std::string> linears;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    QUARK_RETURN_IF_ERROR(gguf::CheckGgufWeightsOnly(a, StrCat(a.module, " (", a.SourceLabel(), ")")));
    linears.insert(a.module);
  }
  const std::string tokenizer = (fs::path(model_dir) / "tokenizer.model").string();
  auto vocab = gguf::ReadSentencePieceVocab(tokenizer);
  if (!vocab.ok()) {
    return absl::InvalidArgumentError(
        StrCat(std::string(vocab.status().message()), " (GGUF needs the SentencePiece vocabulary)"));
  }
  if (static_cast<int64_t>(vocab->pieces.size()) > model.vocab_size) {
    return absl::InvalidArgumentError(
        StrCat(tokenizer, ": ", vocab->pieces.size(), " pieces, more than vocab_size = ", model.vocab_size));
  }
  return std::unique_ptr<ModelExporter>(
      new DeepseekGgufExporter(*model.deepseek, *std::move(vocab), type, output_file, std::move(linears)));
}

}  // namespace quark::exporter

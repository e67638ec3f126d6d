#include "core/export/onnx_exporter.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include "core/base/strings.h"
#include "core/base/write_error.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_layout.h"
#include "core/export/onnx_graph.h"
#include "core/export/onnx_llama_graph.h"
#include "core/export/onnx_quant_nodes.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;
using onnx_export::ExternalDataFile;
using onnx_export::LlamaGraph;
using onnx_export::OnnxGraph;

// The highest opset onnx 1.12's checker and shape inference know.
constexpr int kCheckerMaxOpset = 17;

bool InDecoderLayer(const checkpoint::ModelConfig& model, const std::string& name) {
  for (int64_t i = 0; i < model.num_hidden_layers; ++i) {
    if (name.rfind(checkpoint::LayerPrefix(model, i), 0) == 0) return true;
  }
  return false;
}

// The opset `plan` needs, refusing what the ONNX export cannot hold.
absl::StatusOr<int> PlanOpset(const checkpoint::ModelConfig& model, const LayerPlan& plan) {
  // qwen3 is Llama-family here but its per-head q/k norms are not in the ONNX graph.
  if (model.family != checkpoint::ArchFamily::kLlama || model.qk_norm) {
    return absl::UnimplementedError(StrCat("model_type ", model.model_type, ": the ONNX export builds the Llama "
                                           "family (llama, mistral, qwen2) only"));
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ModuleInfo& m : ModulesFromConfig(model)) shapes[m.name] = m.weight_shape;
  int opset = 17;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source == ConfigSource::kExcluded || a.config.Empty()) continue;
    if (a.module_type != "Linear" || !InDecoderLayer(model, a.module) || !shapes.count(a.module)) {
      return absl::UnimplementedError(StrCat(a.module, " (", a.module_type, ", from ", a.SourceLabel(),
                                             "): only the linears of decoder layers are quantized in an ONNX export; "
                                             "add it to exclude"));
    }
    const auto& shape = shapes[a.module];
    auto o = onnx_export::RequiredOpset(a.module, a.config, shape[0], shape[1]);
    if (!o.ok()) return o.status();
    opset = std::max(opset, *o);
  }
  return opset;
}

// Every node input is a graph input, an initializer or an earlier node's output (the node list is built in
// topological order); checked for every opset, including those onnx 1.12's checker does not know.
absl::Status CheckTopology(const onnx::GraphProto& graph) {
  std::set<std::string> defined;
  for (const auto& in : graph.input()) defined.insert(in.name());
  for (const auto& init : graph.initializer()) defined.insert(init.name());
  for (const auto& node : graph.node()) {
    for (const auto& in : node.input()) {
      if (!in.empty() && !defined.count(in)) {
        return absl::InternalError(StrCat("onnx graph: node ", node.name(), " (", node.op_type(), ") reads ", in,
                                          " before it is defined"));
      }
    }
    for (const auto& out : node.output()) defined.insert(out);
  }
  for (const auto& out : graph.output()) {
    if (!defined.count(out.name())) return absl::InternalError(StrCat("onnx graph: output ", out.name(), " undefined"));
  }
  return absl::OkStatus();
}

// onnx's own checker (with the external data files) and strict shape inference.
absl::Status CheckWithOnnx(const std::string& path, onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(path);
    onnx::ShapeInferenceOptions options;
    options.check_type = true;
    options.error_mode = 1;
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& error) {
    return absl::FailedPreconditionError(StrCat(path, ": rejected by onnx's checker: ", error.what()));
  }
  return absl::OkStatus();
}

absl::Status CheckOutputDir(const std::string& output_dir) {
  std::error_code ec;
  if (output_dir.empty()) return absl::InvalidArgumentError("output_dir: empty");
  if (fs::exists(output_dir, ec) && (!fs::is_directory(output_dir, ec) || !fs::is_empty(output_dir, ec))) {
    return absl::AlreadyExistsError(StrCat("output_dir: ", output_dir, " exists and is not an empty folder"));
  }
  return absl::OkStatus();
}

// config.json with tie_word_embeddings false (the graph has its own lm_head).
absl::Status WriteUntiedConfig(const std::string& from, const std::string& to) {
  std::ifstream in(from);
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return absl::InvalidArgumentError(StrCat(from, ": not a JSON object"));
  config["tie_word_embeddings"] = false;
  std::ofstream out(to);
  out << config.dump(2) << "\n";
  if (!out.flush()) return WriteError(StrCat(to, ": write failed"), errno);
  return absl::OkStatus();
}

// What WriteLinear left for the layer's graph: the weight's value and the activation quantization to apply.
struct PendingLinear {
  std::string weight;  // float [in, out] value
  std::string bias;    // initializer or ""
  LayerQuantConfig config;
  std::optional<QuantParams> input_params, output_params;
};

class OnnxExporter : public ModelExporter {
 public:
  static absl::StatusOr<std::unique_ptr<ModelExporter>> Create(const std::string& model_dir,
                                                               const std::string& output_dir, const Config& config,
                                                               const LayerPlan& plan, OnnxExportOptions options);
  ~OnnxExporter() override;

  std::string_view format() const override { return "onnx"; }
  absl::Status WriteLinear(const LinearExportData& data) override;
  absl::Status WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) override;
  absl::StatusOr<std::vector<std::string>> Finish(const runtime::WeightSource& weights) override;

 private:
  OnnxExporter() = default;
  absl::StatusOr<std::string> Linear(const std::string& module, const std::string& x, int64_t in_features,
                                     const runtime::WeightSource& weights);
  absl::Status WriteLayer(int64_t index, const runtime::WeightSource& weights);
  absl::Status Publish();

  std::string model_dir_, output_dir_, staging_dir_;
  OnnxExportOptions options_;
  checkpoint::ModelConfig model_;
  int opset_ = 17;
  std::set<std::string> quantized_;  // modules the plan quantizes
  std::map<std::string, PendingLinear> pending_;
  std::unique_ptr<ExternalDataFile> data_;
  std::unique_ptr<OnnxGraph> graph_;
  std::unique_ptr<LlamaGraph> llama_;
  int64_t next_layer_ = 0;
  bool published_ = false;
};

absl::StatusOr<std::unique_ptr<ModelExporter>> OnnxExporter::Create(const std::string& model_dir,
                                                                     const std::string& output_dir,
                                                                     const Config& /*config*/, const LayerPlan& plan,
                                                                     OnnxExportOptions options) {
  if (auto s = CheckOutputDir(output_dir); !s.ok()) return s;
  if (options.file_name.empty() || options.file_name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(StrCat("file_name: \"", options.file_name, "\" is not a plain file name"));
  }
  std::unique_ptr<OnnxExporter> e(new OnnxExporter());
  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return model.status();
  e->model_ = *std::move(model);
  if (options.untie_embeddings) e->model_.tie_word_embeddings = false;
  auto opset = PlanOpset(e->model_, plan);
  if (!opset.ok()) return opset.status();
  e->opset_ = *opset;
  for (const LayerAssignment& a : plan.layers) {
    if (a.source != ConfigSource::kExcluded && !a.config.Empty()) e->quantized_.insert(a.module);
  }
  e->model_dir_ = model_dir;
  e->output_dir_ = output_dir;
  e->staging_dir_ = output_dir + ".partial";
  e->options_ = options;
  std::error_code ec;
  fs::remove_all(e->staging_dir_, ec);  // a leftover of an interrupted run
  fs::create_directories(e->staging_dir_, ec);
  if (ec) return WriteError(StrCat(e->staging_dir_, ": cannot create"), ec);
  const std::string data_name = options.file_name + ".data";
  auto data = ExternalDataFile::Create(e->staging_dir_ + "/" + data_name, data_name);
  if (!data.ok()) return data.status();
  e->data_ = *std::move(data);
  e->graph_ = std::make_unique<OnnxGraph>(e->opset_, e->data_.get(), options.external_data_threshold);
  e->llama_ = std::make_unique<LlamaGraph>(*e->graph_, e->model_, options.kv_cache);
  if (auto s = e->llama_->Begin(); !s.ok()) return s;
  return std::unique_ptr<ModelExporter>(std::move(e));
}

OnnxExporter::~OnnxExporter() {
  data_.reset();
  if (!published_ && !staging_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(staging_dir_, ec);
  }
}

absl::Status OnnxExporter::WriteLinear(const LinearExportData& data) {
  if (!quantized_.count(data.module)) {
    return absl::InvalidArgumentError(StrCat(data.module, ": not a quantized linear of the export plan"));
  }
  if (pending_.count(data.module)) return absl::FailedPreconditionError(StrCat(data.module, ": written twice"));
  // The weight goes to the data file now; its DequantizeLinear reads only initializers, so it may stand anywhere
  // before the MatMul in the node list.
  PendingLinear p;
  auto weight = onnx_export::WeightValue(*graph_, data);
  if (!weight.ok()) return weight.status();
  p.weight = *weight;
  if (data.bias.defined()) {
    auto bias = graph_->FloatInitializer(data.module + ".bias", data.bias);
    if (!bias.ok()) return bias.status();
    p.bias = *bias;
  }
  p.config = data.config;
  p.input_params = data.input_params;
  p.output_params = data.output_params;
  pending_[data.module] = std::move(p);
  return absl::OkStatus();
}

absl::StatusOr<std::string> OnnxExporter::Linear(const std::string& module, const std::string& x, int64_t in_features,
                                                 const runtime::WeightSource& weights) {
  auto it = pending_.find(module);
  if (it == pending_.end()) {
    if (quantized_.count(module)) {
      return absl::FailedPreconditionError(StrCat(module, ": quantized by the plan but never written (WriteLinear)"));
    }
    auto w = weights.Get(module + ".weight", at::kFloat);
    if (!w.ok()) return w.status();
    auto value = onnx_export::FloatWeightValue(*graph_, module + ".weight", *w);
    if (!value.ok()) return value.status();
    std::string y = graph_->Op("MatMul", {x, *value}, module + ".matmul");
    if (weights.Has(module + ".bias")) {
      auto b = weights.Get(module + ".bias", at::kFloat);
      if (!b.ok()) return b.status();
      auto bias = graph_->FloatInitializer(module + ".bias", *b);
      if (!bias.ok()) return bias.status();
      y = graph_->Op("Add", {y, *bias}, module + ".biased");
    }
    return y;
  }
  const PendingLinear& p = it->second;
  std::string in = x;
  if (p.config.input_tensors) {
    auto q = onnx_export::QuantizeActivation(*graph_, x, in_features, *p.config.input_tensors, p.input_params,
                                             module + ".input");
    if (!q.ok()) return q.status();
    in = *q;
  }
  std::string y = graph_->Op("MatMul", {in, p.weight}, module + ".matmul");
  if (!p.bias.empty()) y = graph_->Op("Add", {y, p.bias}, module + ".biased");
  if (p.config.output_tensors) {
    // Shape [.., out]: the width only matters to per-group specs, which outputs do not take.
    auto q = onnx_export::QuantizeActivation(*graph_, y, 0, *p.config.output_tensors, p.output_params,
                                             module + ".output");
    if (!q.ok()) return q.status();
    y = *q;
  }
  pending_.erase(it);
  return y;
}

absl::Status OnnxExporter::WriteLayer(int64_t index, const runtime::WeightSource& weights) {
  auto linear = [&](const std::string& module, const std::string& x, int64_t in_features) {
    return Linear(module, x, in_features, weights);
  };
  if (auto s = llama_->Layer(index, weights, linear); !s.ok()) return s;
  ++next_layer_;
  return absl::OkStatus();
}

absl::Status OnnxExporter::WriteUnquantized(const std::string& prefix, const runtime::WeightSource& weights) {
  if (next_layer_ >= model_.num_hidden_layers || prefix != checkpoint::LayerPrefix(model_, next_layer_)) {
    return absl::FailedPreconditionError(
        StrCat("prefix: \"", prefix, "\" is not the next decoder layer (",
               next_layer_ < model_.num_hidden_layers ? checkpoint::LayerPrefix(model_, next_layer_) : "none left",
               "): the ONNX graph is built in layer order"));
  }
  return WriteLayer(next_layer_, weights);
}

absl::Status OnnxExporter::Publish() {
  onnx::ModelProto model;
  model.set_ir_version(onnx_export::IrVersionFor(opset_));
  model.set_producer_name("quarkd");
  model.set_model_version(1);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(opset_);
  graph_->proto().set_name(model_.model_type);
  *model.mutable_graph() = std::move(graph_->proto());
  if (auto s = CheckTopology(model.graph()); !s.ok()) return s;
  const std::string path = staging_dir_ + "/" + options_.file_name;
  {
    std::ofstream out(path, std::ios::binary);
    if (!model.SerializeToOstream(&out) || !out.flush()) return WriteError(StrCat(path, ": write failed"), errno);
  }
  if (opset_ <= kCheckerMaxOpset) {
    if (auto s = CheckWithOnnx(path, model); !s.ok()) return s;
  }
  // config.json and the tokenizer travel with the model (ONNX Runtime GenAI reads them beside it).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !IsOnnxCompanionFile(name)) continue;
    if (name == "config.json" && options_.untie_embeddings) {
      if (auto s = WriteUntiedConfig(entry.path().string(), staging_dir_ + "/" + name); !s.ok()) return s;
      continue;
    }
    fs::copy_file(entry.path(), fs::path(staging_dir_) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return WriteError(StrCat("copy of ", entry.path().string(), " failed"), ec);
  }
  if (ec) return absl::InternalError(StrCat(model_dir_, ": cannot list (", ec.message(), ")"));
  fs::remove(output_dir_, ec);  // an empty folder may stand in the way of the rename
  fs::rename(staging_dir_, output_dir_, ec);
  if (ec) return WriteError(StrCat("publishing ", output_dir_, " failed"), ec);
  published_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> OnnxExporter::Finish(const runtime::WeightSource& weights) {
  if (published_) return absl::FailedPreconditionError(StrCat(output_dir_, ": already published"));
  while (next_layer_ < model_.num_hidden_layers) {
    if (auto s = WriteLayer(next_layer_, weights); !s.ok()) return s;
  }
  if (!pending_.empty()) {
    return absl::FailedPreconditionError(StrCat(pending_.begin()->first, ": written but not in any decoder layer"));
  }
  if (auto s = llama_->End(weights); !s.ok()) return s;
  if (auto s = data_->Close(); !s.ok()) return s;
  if (auto s = Publish(); !s.ok()) return s;
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(output_dir_, ec)) files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

bool IsOnnxCompanionFile(const std::string& name) {
  static const std::set<std::string> kFiles = {"config.json", "generation_config.json", "tokenizer.model",
                                               "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                               "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja"};
  return kFiles.count(name) > 0;
}

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateOnnxExporter(const std::string& model_dir,
                                                                 const std::string& output_dir, const Config& config,
                                                                 const LayerPlan& plan, OnnxExportOptions options) {
  try {
    return OnnxExporter::Create(model_dir, output_dir, config, plan, std::move(options));
  } catch (const std::exception& error) {
    return absl::InternalError(StrCat("onnx export of ", model_dir, ": ", error.what()));
  }
}

absl::StatusOr<int> OnnxExportOpset(const std::string& model_dir, const LayerPlan& plan) {
  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return model.status();
  return PlanOpset(*model, plan);
}

}  // namespace quark::exporter

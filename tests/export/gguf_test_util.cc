#include "tests/export/gguf_test_util.h"

#include <filesystem>
#include <fstream>
#include <memory>

#include "core/base/status_macros.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/export/hf_quark_layout.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/layer_streamer.h"

namespace quark::testing {

absl::StatusOr<Config> GgufTestConfig(const std::string& preset, const std::vector<std::string>& extra_exclude) {
  const bool int8 = preset == "int8_wo_32";
  QUARK_ASSIGN_OR_RETURN(Config config, PresetConfig(int8 ? "int4_wo_32" : preset));
  if (int8) config.global_quant_config.weight->dtype = DType::kInt8;
  for (const std::string& e : extra_exclude) config.exclude.push_back(e);
  return config;
}

absl::StatusOr<std::vector<std::string>> ExportGguf(const GgufTestExport& job) {
  QUARK_ASSIGN_OR_RETURN(const checkpoint::ModelConfig model, checkpoint::LoadModelConfig(job.model_dir));
  const LayerPlan plan = BuildLayerPlan(job.config, exporter::ModulesFromConfig(model));
  QUARK_ASSIGN_OR_RETURN(auto exporter,
                         exporter::CreateGgufExporter(job.model_dir, job.output_file, job.config, plan, job.options));
  QUARK_ASSIGN_OR_RETURN(auto reader, checkpoint::CheckpointReader::Open(job.model_dir));
  auto weights = std::make_shared<runtime::CheckpointWeightSource>(std::move(reader));
  QUARK_ASSIGN_OR_RETURN(auto streamer, runtime::LayerStreamer::Create(model, weights));
  quantize::LayerQuantizer quantizer(job.config, plan);
  std::vector<std::shared_ptr<quantize::QuantLinear>> linears;
  runtime::LayerHooks hooks;
  hooks.before = [&](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) -> absl::Status {
    QUARK_ASSIGN_OR_RETURN(linears, quantizer.Calibrate(layer, inputs, streamer->model()));
    return absl::OkStatus();
  };
  hooks.after = [&](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&,
                    const std::vector<at::Tensor>&) -> absl::Status {
    for (const auto& q : linears) {
      exporter::LinearExportData data;
      data.module = q->name();
      data.config = q->config();
      data.weight = q->weight();
      data.bias = q->bias();
      if (q->config().weight && !IsCastType(q->config().weight->dtype)) {
        QUARK_ASSIGN_OR_RETURN(data.weight_codes, q->ExportWeight());
      }
      if (job.on_linear) job.on_linear(data);
      QUARK_RETURN_IF_ERROR(exporter->WriteLinear(data));
    }
    return exporter->WriteUnquantized(layer.prefix(), *weights);
  };
  // Weight-only configs need no calibration data: one short sample carries the streamer through the layers.
  QUARK_RETURN_IF_ERROR(streamer->Run({at::arange(1, 9, at::kLong)}, hooks).status());
  return exporter->Finish(*weights);
}

absl::Status WriteSyntheticModelForGguf(const std::string& model_type, const std::string& dir,
                                        const std::string& tokenizer_model) {
  checkpoint::ModelConfig c;
  c.model_type = model_type;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 512;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = model_type == "qwen2" ? 1000000.0 : 10000.0;
  c.attention_bias = model_type == "qwen2";
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.torch_dtype = "float32";
  std::filesystem::create_directories(dir);
  // Through the parser, so the folder holds exactly what LoadModelConfig will read.
  QUARK_ASSIGN_OR_RETURN(c, checkpoint::ParseModelConfig(checkpoint::ModelConfigToJson(c)));
  { std::ofstream(dir + "/config.json") << checkpoint::ModelConfigToJson(c); }
  const auto tensors = checkpoint::ModelTensors(c);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& t : tensors) plan.push_back({t.name, checkpoint::StDType::kF32, t.shape});
  QUARK_ASSIGN_OR_RETURN(auto writer, checkpoint::CheckpointWriter::Create(dir, plan));
  at::manual_seed(11);
  for (const auto& t : tensors) {
    const double scale = t.role == checkpoint::TensorRole::kEmbedding ? 1.0
                         : t.role == checkpoint::TensorRole::kLinearBias ? 0.5 : 0.1;
    at::Tensor v = t.role == checkpoint::TensorRole::kNormWeight ? 1 + 0.1 * at::randn(t.shape)
                                                                   : at::randn(t.shape) * scale;
    v = v.to(at::kFloat).contiguous();
    QUARK_RETURN_IF_ERROR(writer->Write(t.name, std::string_view(static_cast<const char*>(v.data_ptr()), v.nbytes())));
  }
  QUARK_RETURN_IF_ERROR(writer->Finish());
  std::error_code ec;
  std::filesystem::copy_file(tokenizer_model, dir + "/tokenizer.model", ec);
  if (ec) return absl::InternalError("copying " + tokenizer_model + ": " + ec.message());
  return absl::OkStatus();
}

}  // namespace quark::testing

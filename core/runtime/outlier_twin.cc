#include "core/runtime/outlier_twin.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include <ATen/ATen.h>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_config.h"
#include "core/runtime/tensor_view.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;

// Each norm and the linears that read its output.
struct NormReaders {
  const char* norm;
  std::vector<const char*> linears;
};
const NormReaders kNormReaders[] = {
    {"input_layernorm", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
    {"post_attention_layernorm", {"mlp.gate_proj", "mlp.up_proj"}},
};

absl::Status CheckOptions(const OutlierTwinOptions& o, const checkpoint::ModelConfig& model) {
  static const std::set<std::string> kPlainRmsNorm = {"llama", "mistral", "qwen2", "qwen3"};
  if (!kPlainRmsNorm.count(model.model_type)) {
    return absl::InvalidArgumentError(StrCat("model_type: \"", model.model_type, "\" has no outlier twin here (",
                                             "llama, mistral, qwen2, qwen3: a plain RMSNorm weight read by q/k/v and "
                                             "gate/up)"));
  }
  if (o.channels < 1 || o.channels > model.hidden_size) {
    return absl::InvalidArgumentError(StrCat("--channels: ", o.channels, " is not in [1, hidden_size ",
                                             model.hidden_size, "]"));
  }
  if (!(o.min_scale >= 1) || !(o.max_scale >= o.min_scale) || !(o.max_scale <= 1e4)) {
    return absl::InvalidArgumentError(StrCat("--min-scale / --max-scale: ", o.min_scale, " / ", o.max_scale,
                                             " must satisfy 1 <= min <= max <= 10000"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeOutlierTwin(const OutlierTwinOptions& o) {
  QUARK_ASSIGN_OR_RETURN(const checkpoint::ModelConfig model, checkpoint::LoadModelConfig(o.model_dir));
  QUARK_RETURN_IF_ERROR(CheckOptions(o, model));
  std::error_code ec;
  if (fs::exists(o.out_dir, ec)) return absl::AlreadyExistsError(StrCat("--output: ", o.out_dir, " exists"));
  QUARK_ASSIGN_OR_RETURN(auto reader, checkpoint::CheckpointReader::Open(o.model_dir));

  // The scale of every (layer, norm) channel picked, seeded: channel -> s.
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> scale(o.min_scale, o.max_scale);
  std::map<std::string, std::map<int64_t, double>> scaled;  // "model.layers.N.<norm>" -> channels
  for (int64_t layer = 0; layer < model.num_hidden_layers; ++layer) {
    for (const NormReaders& n : kNormReaders) {
      std::vector<int64_t> all(model.hidden_size);
      for (int64_t c = 0; c < model.hidden_size; ++c) all[c] = c;
      std::shuffle(all.begin(), all.end(), rng);
      auto& picked = scaled[StrCat("model.layers.", layer, ".", n.norm)];
      for (int64_t i = 0; i < o.channels; ++i) picked[all[i]] = scale(rng);
    }
  }
  // tensor name -> (channels, whether the tensor is the norm (multiply) or a reader (divide its columns)).
  std::map<std::string, std::pair<const std::map<int64_t, double>*, bool>> edits;
  for (const auto& [prefix, channels] : scaled) {
    const std::string layer = prefix.substr(0, prefix.rfind('.') + 1);
    const std::string norm = prefix.substr(prefix.rfind('.') + 1);
    edits[prefix + ".weight"] = {&channels, true};
    for (const NormReaders& n : kNormReaders) {
      if (norm != n.norm) continue;
      for (const char* linear : n.linears) edits[StrCat(layer, linear, ".weight")] = {&channels, false};
    }
  }
  for (const auto& [name, edit] : edits) {
    if (!reader->Has(name)) return absl::NotFoundError(StrCat(name, ": not in ", reader->location()));
  }

  std::vector<checkpoint::PlannedTensor> plan;
  for (const std::string& name : reader->Names()) {
    QUARK_ASSIGN_OR_RETURN(const checkpoint::TensorRef ref, reader->Get(name));
    plan.push_back({name, ref.info->dtype, ref.info->shape});
  }
  QUARK_ASSIGN_OR_RETURN(auto writer, checkpoint::CheckpointWriter::Create(o.out_dir, plan));
  for (const std::string& name : reader->Names()) {
    QUARK_ASSIGN_OR_RETURN(const checkpoint::TensorRef ref, reader->Get(name));
    auto edit = edits.find(name);
    if (edit == edits.end()) {
      QUARK_RETURN_IF_ERROR(writer->Write(name, ref.bytes()));
      continue;
    }
    QUARK_ASSIGN_OR_RETURN(const at::ScalarType stored, AtenTypeOf(ref.info->dtype));
    QUARK_ASSIGN_OR_RETURN(at::Tensor values, LoadAs(ref, at::kDouble));
    values = values.clone();
    const auto& [channels, is_norm] = edit->second;
    for (const auto& [c, s] : *channels) {
      if (is_norm) {
        values[c].mul_(s);
      } else {
        values.select(1, c).div_(s);
      }
    }
    const at::Tensor out = values.to(stored).contiguous();
    QUARK_ASSIGN_OR_RETURN(const std::string_view bytes, HostBytes(out, name));
    QUARK_RETURN_IF_ERROR(writer->Write(name, bytes));
  }
  QUARK_RETURN_IF_ERROR(writer->Finish());
  for (const fs::directory_entry& e : fs::directory_iterator(o.model_dir)) {
    const std::string file = e.path().filename().string();
    if (!e.is_regular_file() || e.path().extension() == ".safetensors" || file == "model.safetensors.index.json") {
      continue;
    }
    fs::copy_file(e.path(), fs::path(o.out_dir) / file, ec);
    if (ec) return absl::InternalError(StrCat("--output: cannot copy ", file, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace quark::runtime

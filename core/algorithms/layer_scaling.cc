#include "core/algorithms/layer_scaling.h"

#include <memory>

#include "core/algorithms/moe_scaling.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/attention.h"
#include "core/runtime/gemma_layer.h"
#include "core/runtime/linear.h"
#include "core/runtime/llama_layer.h"
#include "core/runtime/moe_block.h"
#include "core/runtime/opt_layer.h"
#include "core/runtime/phi3_layer.h"

namespace quark::algorithms {
namespace {

torch::nn::Module* FindModule(const runtime::DecoderLayer& layer, const std::string& name) {
  for (const auto& item : layer.named_modules("", /*include_self=*/false)) {
    if (item.key() == name) return item.value().get();
  }
  return nullptr;
}

// A norm's output channels: RMSNorm or LayerNorm (weight, and LayerNorm's bias).
struct NormRef {
  runtime::RmsNorm* rms = nullptr;
  runtime::LayerNorm* layer_norm = nullptr;
  bool found() const { return rms != nullptr || layer_norm != nullptr; }
  at::Tensor weight() const { return rms ? rms->weight() : layer_norm->weight(); }
};

NormRef FindNorm(const runtime::DecoderLayer& layer, const std::string& name) {
  NormRef ref;
  torch::nn::Module* m = FindModule(layer, name);
  if (m == nullptr) return ref;
  ref.rms = dynamic_cast<runtime::RmsNorm*>(m);
  ref.layer_norm = dynamic_cast<runtime::LayerNorm*>(m);
  return ref;
}

// Thrown once every recorded linear has seen its input when nobody wants the layer's output: the rest of the forward
// (down_proj's product, for SmoothQuant's norm pairs all three MLP products) is not computed.
struct StopRecording {};

// One tensor a forward handed to recorded linears, with what was taken of it. Linears that read the same tensor (q,
// k and v the normed hidden states; an MLP's or an expert's gate and up) share one kept copy and one statistic: AWQ
// keeps every quantized linear's input, and those copies are its largest per-token term
// (checkpoint/token_pass_memory.h). The tensor is known by its TensorImpl, held by a weak reference so that no other
// tensor can take that address while the forward runs, and by its version: changed in place between two reads, it
// is two inputs.
struct ReadInput {
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> source;
  int64_t version = 0;
  at::Tensor abs_max;  // per input channel, float32
  at::Tensor kept;     // [tokens, in], where the activations are kept; undefined unless inputs are kept

  static int64_t VersionOf(const at::Tensor& t) { return t.is_inference() ? -1 : static_cast<int64_t>(t._version()); }
  bool Is(const at::Tensor& t) const {
    return source._unsafe_get_target() == t.unsafeGetTensorImpl() && version == VersionOf(t);
  }
};

// Counts the recorded linears a forward has reached, and remembers the inputs it handed them (one forward's: the
// list is cleared with the count).
struct RecordingProgress {
  size_t seen = 0;
  size_t total = 0;
  bool stop_when_done = false;
  bool keep = false;                                     // inputs are kept, not only their statistics
  const runtime::ActivationHome* activations = nullptr;  // where kept inputs go
  std::vector<ReadInput> reads;

  void StartForward() {
    seen = 0;
    reads.clear();
  }
  // What was taken of `input`: taken now if no linear of this forward read it before.
  const ReadInput& Read(const at::Tensor& input) {
    for (const ReadInput& read : reads) {
      if (read.Is(input)) return read;
    }
    ReadInput read{c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(input.getIntrusivePtr()),
                   ReadInput::VersionOf(input)};
    const at::Tensor flat = input.reshape({-1, input.size(-1)});
    // Quark's stat_tensor: the max in the input's dtype, then float32.
    read.abs_max = std::get<0>(flat.abs().max(0)).to(at::kFloat);
    if (keep) read.kept = activations->Keep(flat);
    reads.push_back(std::move(read));
    return reads.back();
  }
};

// Where one linear's recorded input goes: its kept inputs and its running per-channel max |x|.
struct InputRecord {
  std::vector<at::Tensor>* inputs = nullptr;
  at::Tensor* abs_max = nullptr;
  RecordingProgress* progress = nullptr;

  void Add(const at::Tensor& input) const {
    const ReadInput& read = progress->Read(input);
    *abs_max = abs_max->defined() ? at::maximum(*abs_max, read.abs_max) : read.abs_max;
    if (progress->keep) inputs->push_back(read.kept);
    if (++progress->seen == progress->total && progress->stop_when_done) throw StopRecording{};
  }
};

// Records the input of a linear (and its per-channel max |x|) before running it.
class RecordingLinear : public runtime::LinearLike {
 public:
  RecordingLinear(std::shared_ptr<runtime::LinearLike> inner, InputRecord record)
      : inner_(std::move(inner)), record_(record) {}
  at::Tensor forward(const at::Tensor& input) override {
    record_.Add(input);
    return inner_->forward(input);
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor weight() const override { return inner_->weight(); }
  at::Tensor bias() const override { return inner_->bias(); }
  std::shared_ptr<runtime::LinearLike> inner() const { return inner_; }

 private:
  std::shared_ptr<runtime::LinearLike> inner_;
  InputRecord record_;
};

// Puts the original linears back however the recording ends.
class RestoreLinears {
 public:
  explicit RestoreLinears(runtime::DecoderLayer& layer) : layer_(layer) {}
  ~RestoreLinears() {
    for (auto& [name, linear] : originals_) (void)layer_.ReplaceLinear(name, linear);
  }
  void Remember(const std::string& name, std::shared_ptr<runtime::LinearLike> linear) {
    originals_.emplace_back(name, std::move(linear));
  }

 private:
  runtime::DecoderLayer& layer_;
  std::vector<std::pair<std::string, std::shared_ptr<runtime::LinearLike>>> originals_;
};

// Takes the input observers off the MoE blocks it watched however the recording ends.
class ObservedBlocks {
 public:
  ~ObservedBlocks() {
    for (runtime::MoeBlock* block : blocks_) block->set_input_observer(nullptr);
  }
  void Observe(runtime::MoeBlock* block, InputRecord record) {
    block->set_input_observer([record](const at::Tensor& flat) { record.Add(flat); });
    blocks_.push_back(block);
  }

 private:
  std::vector<runtime::MoeBlock*> blocks_;
};

// GQA: the scale of o_proj's input channels [heads * head_dim] reduced (max) over the query heads that share each
// KV head: v_proj's rows take the reduced scale, o_proj's columns the reduced scale repeated per query head.
std::pair<at::Tensor, at::Tensor> GroupedQueryScales(const at::Tensor& scales, const HeadLayout& heads) {
  const int64_t repeats = heads.heads / heads.kv_heads;
  const int64_t head_dim = scales.numel() / heads.heads;
  const at::Tensor reduced = std::get<0>(scales.view({heads.kv_heads, repeats, head_dim}).max(1, true));
  return {reduced.reshape(-1), reduced.expand({heads.kv_heads, repeats, head_dim}).reshape(-1)};
}

// Phi-3's fused mlp.gate_up_proj (rows gate | up) feeding down_proj through silu(gate) * up: scaling down_proj's
// input channels by s is exact when only the up rows are divided by s (AutoAWQ's scale_fc_fc does the same).
bool IsFusedGateUp(const std::string& prev_op) { return prev_op == "mlp.gate_up_proj"; }

// Phi-3's fused self_attn.qkv_proj (rows q | k | v) feeding o_proj through softmax(q k^T) v: scaling o_proj's input
// channels by s is exact when only the v rows (the last kv_heads * head_dim) are divided by s, reduced per KV head
// under grouped heads as for v_proj -> o_proj; the q and k rows keep theirs (they meet only in q k^T).
constexpr char kFusedQkv[] = "self_attn.qkv_proj";
constexpr char kFusedQkvReader[] = "self_attn.o_proj";

// qkv_proj's rows are q (heads * head_dim, what o_proj reads) + k + v (kv_heads * head_dim each): the v rows are
// (rows - o_columns) / 2, and they must divide o_columns (whole query groups per KV head). 0 when they do not fit.
int64_t FusedQkvValueRows(int64_t qkv_rows, int64_t o_columns) {
  const int64_t kv_rows = qkv_rows - o_columns;
  if (o_columns <= 0 || kv_rows <= 0 || kv_rows % 2 != 0 || o_columns % (kv_rows / 2) != 0) return 0;
  return kv_rows / 2;
}

// The pair qkv_proj -> o_proj, and only that: any other reader of qkv_proj's rows would take a partial-rows rule
// of its own (q and k are not read by a linear at all).
absl::Status CheckFusedQkvPair(const runtime::DecoderLayer& layer, const ScalingLayer& pair,
                               const runtime::LinearLike& qkv, const std::string& path) {
  for (size_t i = 0; i < pair.layers.size(); ++i) {
    if (pair.layers[i] != kFusedQkvReader || i > 0) {
      return absl::InvalidArgumentError(StrCat(path, ".layers[", i, "]: \"", pair.layers[i], "\": \"", kFusedQkv,
                                               "\" scales only into [\"", kFusedQkvReader,
                                               "\"] (its v rows, which o_proj reads through the attention)"));
    }
  }
  auto o_proj = layer.FindLinear(kFusedQkvReader);
  if (o_proj == nullptr) {
    return absl::InvalidArgumentError(StrCat(path, ".layers[0]: \"", kFusedQkvReader, "\" is not a linear of ",
                                             layer.prefix()));
  }
  if (FusedQkvValueRows(qkv.out_features(), o_proj->in_features()) == 0) {
    return absl::InvalidArgumentError(StrCat(path, ".layers[0]: \"", kFusedQkvReader, "\" reads ",
                                             o_proj->in_features(), " channels, which do not fit the q | k | v rows",
                                             " of \"", kFusedQkv, "\" (", qkv.out_features(), ")"));
  }
  if (!pair.inp.empty() && pair.inp != kFusedQkvReader) {
    return absl::InvalidArgumentError(
        StrCat(path, ".inp: \"", pair.inp, "\" must be \"", kFusedQkvReader, "\" (or empty)"));
  }
  const std::string& m = pair.module2inspect;
  if (!m.empty() && m != kFusedQkvReader && m != "self_attn") {
    return absl::InvalidArgumentError(StrCat(path, ".module2inspect: \"", m, "\" must be \"", kFusedQkvReader,
                                             "\", \"self_attn\" or empty"));
  }
  return absl::OkStatus();
}

// qkv_proj's row scales (ones on q and k, the per-KV-head value scale on v) and o_proj's column scales.
absl::StatusOr<std::pair<at::Tensor, at::Tensor>> FusedQkvScales(const at::Tensor& scales, int64_t qkv_rows,
                                                                 const HeadLayout& heads) {
  const int64_t v_rows = FusedQkvValueRows(qkv_rows, scales.numel());
  if (v_rows == 0 || heads.kv_heads <= 0 || heads.heads % heads.kv_heads != 0 || scales.numel() % heads.heads != 0 ||
      v_rows * heads.heads != scales.numel() * heads.kv_heads) {
    return absl::InvalidArgumentError(StrCat(kFusedQkv, " -> ", kFusedQkvReader, ": ", qkv_rows,
                                             " q | k | v rows with ", heads.heads, " heads over ", heads.kv_heads,
                                             " KV heads cannot take ", scales.numel(), " scales"));
  }
  std::pair<at::Tensor, at::Tensor> v_and_o{scales, scales};
  if (heads.kv_heads != heads.heads) v_and_o = GroupedQueryScales(scales, heads);
  return std::make_pair(at::cat({at::ones({qkv_rows - v_rows}, scales.options()), v_and_o.first}), v_and_o.second);
}

// A linear prev_op's row scales and its readers' column scales for `scales` (one per reader input channel): the
// same scale on both, or the fused gate | up and q | k | v rules, or the per-KV-head reduction of v_proj -> o_proj.
absl::StatusOr<std::pair<at::Tensor, at::Tensor>> LinearPairScales(const runtime::DecoderLayer& layer,
                                                                   const ScalingLayer& pair, int64_t prev_rows,
                                                                   const at::Tensor& scales, const HeadLayout& heads) {
  if (IsFusedGateUp(pair.prev_op) && prev_rows == 2 * scales.numel()) {
    return std::make_pair(at::cat({at::ones_like(scales), scales}), scales);  // the gate rows keep their scale
  }
  if (pair.prev_op == kFusedQkv) return FusedQkvScales(scales, prev_rows, heads);
  if (prev_rows == scales.numel()) return std::make_pair(scales, scales);
  if (heads.kv_heads <= 0 || heads.heads % heads.kv_heads != 0 || scales.numel() % heads.heads != 0 ||
      prev_rows * heads.heads != scales.numel() * heads.kv_heads) {
    return absl::InvalidArgumentError(StrCat(layer.prefix(), pair.prev_op, " -> ", pair.layers[0], ": ", prev_rows,
                                             " rows cannot take ", scales.numel(), " scales"));
  }
  return GroupedQueryScales(scales, heads);
}

}  // namespace

absl::StatusOr<at::Tensor> LinearWeight(const runtime::DecoderLayer& layer, const std::string& relative_name) {
  auto linear = layer.FindLinear(relative_name);
  if (linear == nullptr) return absl::InvalidArgumentError(StrCat(relative_name, ": not a linear of ", layer.prefix()));
  return linear->weight();
}

absl::StatusOr<at::Tensor> ReaderWeight(const runtime::DecoderLayer& layer, const std::string& relative_name) {
  if (layer.FindLinear(relative_name) == nullptr && IsRouter(layer, relative_name)) {
    return RouterWeight(layer, relative_name);
  }
  return LinearWeight(layer, relative_name);
}

absl::Status SetReaderWeight(runtime::DecoderLayer& layer, const std::string& relative_name, at::Tensor weight) {
  if (layer.FindLinear(relative_name) == nullptr && IsRouter(layer, relative_name)) {
    return SetRouterWeight(layer, relative_name, std::move(weight));
  }
  return SetLinearWeight(layer, relative_name, std::move(weight));
}

absl::Status SetLinearWeight(runtime::DecoderLayer& layer, const std::string& relative_name, at::Tensor weight) {
  auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(layer.FindLinear(relative_name));
  if (linear == nullptr) {
    return absl::InvalidArgumentError(
        StrCat(layer.prefix(), relative_name, ": not a float linear (an algorithm edits weights before quantization)"));
  }
  linear->set_weight(std::move(weight));
  return absl::OkStatus();
}

std::map<std::string, at::Tensor> LayerTensors(const runtime::DecoderLayer& layer) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : layer.named_modules("", /*include_self=*/false)) {
    if (auto* rms = dynamic_cast<runtime::RmsNorm*>(item.value().get())) out[item.key() + ".weight"] = rms->weight();
    if (auto* norm = dynamic_cast<runtime::LayerNorm*>(item.value().get())) {
      if (norm->weight().defined()) out[item.key() + ".weight"] = norm->weight();
      if (norm->bias().defined()) out[item.key() + ".bias"] = norm->bias();
    }
  }
  for (const auto& linear : layer.NamedLinears()) {
    out[linear.relative_name + ".weight"] = linear.linear->weight();
    if (linear.linear->bias().defined()) out[linear.relative_name + ".bias"] = linear.linear->bias();
  }
  for (auto& [name, tensor] : RouterTensors(layer)) out[name] = tensor;
  return out;
}

absl::Status SetLayerTensors(runtime::DecoderLayer& layer, const std::map<std::string, at::Tensor>& tensors) {
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : layer.named_modules("", /*include_self=*/false)) modules[item.key()] = item.value();
  for (const auto& [name, tensor] : tensors) {
    const size_t dot = name.rfind('.');
    const std::string module = dot == std::string::npos ? "" : name.substr(0, dot);
    const std::string field = dot == std::string::npos ? name : name.substr(dot + 1);
    const auto unplaced = [&] {
      return absl::InvalidArgumentError(StrCat(layer.prefix(), name, ": no norm or float linear of the layer holds it"));
    };
    if (field != "weight" && field != "bias") return unplaced();
    if (field == "weight" && IsRouter(layer, module)) {
      QUARK_RETURN_IF_ERROR(SetRouterWeight(layer, module, tensor));
      continue;
    }
    if (auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(layer.FindLinear(module))) {
      field == "weight" ? linear->set_weight(tensor) : linear->set_bias(tensor);
      continue;
    }
    auto it = modules.find(module);
    if (it == modules.end()) return unplaced();
    if (auto* rms = dynamic_cast<runtime::RmsNorm*>(it->second.get()); rms != nullptr && field == "weight") {
      rms->set_weight(tensor);
    } else if (auto* norm = dynamic_cast<runtime::LayerNorm*>(it->second.get())) {
      field == "weight" ? norm->set_weight(tensor) : norm->set_bias(tensor);
    } else {
      return unplaced();
    }
  }
  return absl::OkStatus();
}

ScalingLayer ResolvedPair(const runtime::DecoderLayer& layer, const ScalingLayer& pair) {
  const std::optional<MoeBlockReaders> moe = MoeReadersOf(layer, pair.prev_op);
  return moe ? CompleteMoePair(*moe, pair) : pair;
}

absl::Status CheckScalingPair(const runtime::DecoderLayer& layer, const ScalingLayer& pair, const std::string& path) {
  const NormRef norm = FindNorm(layer, pair.prev_op);
  const auto prev_linear = layer.FindLinear(pair.prev_op);
  if (!norm.found() && prev_linear == nullptr) {
    return absl::InvalidArgumentError(StrCat(path, ".prev_op: \"", pair.prev_op, "\" is neither a norm nor a linear of ",
                                             layer.prefix()));
  }
  if (pair.layers.empty()) return absl::InvalidArgumentError(StrCat(path, ".layers: empty"));
  if (prev_linear != nullptr && pair.prev_op == kFusedQkv) return CheckFusedQkvPair(layer, pair, *prev_linear, path);
  // In front of an MoE block the routers read the norm too (moe_scaling.h).
  const std::optional<MoeBlockReaders> moe = MoeReadersOf(layer, pair.prev_op);
  const int64_t channels = norm.found() ? norm.weight().numel() : prev_linear->out_features();
  for (size_t i = 0; i < pair.layers.size(); ++i) {
    auto linear = layer.FindLinear(pair.layers[i]);
    int64_t in_features = 0;
    if (linear != nullptr) {
      in_features = linear->in_features();
    } else if (moe && IsRouter(layer, pair.layers[i])) {
      in_features = RouterWeight(layer, pair.layers[i])->size(1);
    } else {
      return absl::InvalidArgumentError(StrCat(path, ".layers[", i, "]: \"", pair.layers[i], "\" is not a linear",
                                               moe ? " or a router" : "", " of ", layer.prefix()));
    }
    // A linear -> linear pair may cross grouped KV heads (v_proj -> o_proj): o_proj is wider by the group factor.
    const bool up_half = prev_linear && IsFusedGateUp(pair.prev_op) && 2 * in_features == channels;
    if (in_features != channels && !(prev_linear && in_features % channels == 0) && !up_half) {
      return absl::InvalidArgumentError(StrCat(path, ".layers[", i, "]: \"", pair.layers[i], "\" reads ", in_features,
                                               " channels but \"", pair.prev_op, "\" gives ", channels));
    }
  }
  if (moe) return CheckMoePair(*moe, pair, path);
  if (!pair.inp.empty() && layer.FindLinear(pair.inp) == nullptr) {
    return absl::InvalidArgumentError(StrCat(path, ".inp: \"", pair.inp, "\" is not a linear of ", layer.prefix()));
  }
  if (!pair.module2inspect.empty() && pair.module2inspect != "self_attn" && pair.module2inspect != "mlp" &&
      layer.FindLinear(pair.module2inspect) == nullptr) {
    return absl::InvalidArgumentError(StrCat(path, ".module2inspect: \"", pair.module2inspect,
                                             "\" is not self_attn, mlp or a linear of ", layer.prefix()));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> ReaderScales(const runtime::DecoderLayer& layer, const ScalingLayer& pair,
                                        const at::Tensor& scales, const HeadLayout& heads) {
  if (FindNorm(layer, pair.prev_op).found()) return scales;
  auto prev = layer.FindLinear(pair.prev_op);
  if (prev == nullptr) return absl::InvalidArgumentError(StrCat(pair.prev_op, ": not a norm or linear"));
  QUARK_ASSIGN_OR_RETURN(auto row_and_column, LinearPairScales(layer, pair, prev->out_features(), scales, heads));
  return row_and_column.second;
}

absl::Status ApplyScaling(runtime::DecoderLayer& layer, const ScalingLayer& given, const at::Tensor& scales,
                          const HeadLayout& heads) {
  const ScalingLayer pair = ResolvedPair(layer, given);
  at::Tensor column_scales = scales;
  const NormRef norm = FindNorm(layer, pair.prev_op);
  if (norm.found()) {
    const at::Tensor s = scales.to(norm.weight().scalar_type());
    if (norm.rms) norm.rms->DivideOutputs(scales);  // Gemma's (1 + w) norms fold as (1 + w) / s - 1
    if (norm.layer_norm) {
      norm.layer_norm->set_weight(norm.layer_norm->weight() / s);
      if (norm.layer_norm->bias().defined()) norm.layer_norm->set_bias(norm.layer_norm->bias() / s);
    }
  } else {
    auto prev = std::dynamic_pointer_cast<runtime::FloatLinear>(layer.FindLinear(pair.prev_op));
    if (prev == nullptr) return absl::InvalidArgumentError(StrCat(pair.prev_op, ": not a float norm or linear"));
    at::Tensor row_scales;
    QUARK_ASSIGN_OR_RETURN(std::tie(row_scales, column_scales),
                           LinearPairScales(layer, pair, prev->out_features(), scales, heads));
    const at::Tensor s = row_scales.to(prev->weight().scalar_type());
    prev->set_weight(prev->weight() / s.view({-1, 1}));
    if (prev->bias().defined()) prev->set_bias(prev->bias() / s);
  }
  for (const std::string& name : pair.layers) {
    QUARK_ASSIGN_OR_RETURN(at::Tensor w, ReaderWeight(layer, name));
    QUARK_RETURN_IF_ERROR(SetReaderWeight(layer, name, w * column_scales.to(w.scalar_type()).view({1, -1})));
  }
  return absl::OkStatus();
}

at::Tensor LinearInputs::Concatenated(const std::string& name) const {
  auto it = inputs.find(name);
  if (it == inputs.end() || it->second.empty()) return {};
  return it->second.size() == 1 ? it->second[0] : at::cat(it->second, 0);
}

absl::StatusOr<LinearInputs> RecordLinearInputs(runtime::DecoderLayer& layer, const std::vector<at::Tensor>& samples,
                                                const LayerRunner& run, const std::vector<std::string>& names,
                                                bool keep_inputs, std::vector<at::Tensor>* outputs,
                                                int64_t min_expert_tokens, const runtime::ActivationHome& activations) {
  LinearInputs recorded;
  RecordingProgress progress;
  progress.total = names.size();
  progress.stop_when_done = outputs == nullptr;
  progress.keep = keep_inputs;
  progress.activations = &activations;
  {
    RestoreLinears restore(layer);
    ObservedBlocks observed;
    for (const std::string& name : names) {
      const InputRecord record{&recorded.inputs[name], &recorded.abs_max[name], &progress};
      auto linear = layer.FindLinear(name);
      if (linear == nullptr) {
        runtime::MoeBlock* block = FindMoeBlock(layer, name);
        if (block == nullptr) {
          return absl::InvalidArgumentError(StrCat(name, ": not a linear or an MoE block of ", layer.prefix()));
        }
        observed.Observe(block, record);
        continue;
      }
      QUARK_RETURN_IF_ERROR(layer.ReplaceLinear(name, std::make_shared<RecordingLinear>(linear, record)));
      restore.Remember(name, linear);
    }
    if (outputs) outputs->clear();
    layer.BeginCalibration(min_expert_tokens);
    for (const at::Tensor& sample : samples) {
      progress.StartForward();
      try {
        at::Tensor out = run(sample);
        if (outputs) outputs->push_back(std::move(out));
      } catch (const StopRecording&) {
        // every input recorded; the output was not wanted
      }
    }
    // MoE: the experts short of tokens run on their best-ranked other tokens (every top-up, not stopped early).
    progress.stop_when_done = false;
    progress.StartForward();
    try {
      recorded.coverage = layer.FinishCalibration();
    } catch (const std::exception& error) {
      return runtime::TorchErrorToStatus(error, StrCat("calibration top-up of ", layer.prefix()));
    }
  }
  for (const std::string& name : names) {
    if (!recorded.abs_max[name].defined()) {
      // Only an MoE expert's linear can be off every token's path.
      return runtime::NoExpertTokensError(layer.prefix() + name.substr(0, name.rfind('.')),
                                          StrCat("the scaling algorithm's input of ", layer.prefix(), name),
                                          min_expert_tokens);
    }
  }
  return recorded;
}

absl::StatusOr<at::Tensor> RunSubmodule(runtime::DecoderLayer& layer, const std::string& name, const at::Tensor& x,
                                        const runtime::LayerContext& context) {
  if (auto linear = layer.FindLinear(name)) return linear->forward(x);
  torch::nn::Module* module = FindModule(layer, name);
  if (auto* attention = dynamic_cast<runtime::LlamaAttention*>(module)) return attention->forward(x, context);
  if (auto* attention = dynamic_cast<runtime::OptAttention*>(module)) return attention->forward(x, context);
  if (auto* mlp = dynamic_cast<runtime::LlamaMlp*>(module)) return mlp->forward(x);
  if (auto* attention = dynamic_cast<runtime::Phi3Attention*>(module)) return attention->forward(x, context);
  if (auto* mlp = dynamic_cast<runtime::Phi3Mlp*>(module)) return mlp->forward(x);
  if (auto* attention = dynamic_cast<runtime::GemmaAttention*>(module)) return attention->forward(x, context);
  if (auto* mlp = dynamic_cast<runtime::GemmaMlp*>(module)) return mlp->forward(x);
  if (auto* moe = dynamic_cast<runtime::MoeBlock*>(module)) return moe->forward(x);
  return absl::InvalidArgumentError(StrCat(layer.prefix(), name, ": not a module an algorithm can run"));
}

}  // namespace quark::algorithms

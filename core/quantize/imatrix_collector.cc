#include "core/quantize/imatrix_collector.h"

#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/checkpoint/moe_layout.h"
#include "core/export/gguf_gemma.h"
#include "core/export/gguf_moe.h"
#include "core/quantize/observed_linear.h"
#include "core/runtime/moe_layer.h"

namespace quark::quantize {

// llama-imatrix's collect_imatrix skips a plain matrix multiplication (GGML_OP_MUL_MAT: the dense linears, the
// router) of fewer than 16 rows; the experts' indirect one (MUL_MAT_ID) counts whatever its size.
constexpr int64_t kSmallestCountedDenseBatch = 16;

// Σx² per input column (float64, on the input's device) and the rows seen.
struct ImatrixCollector::Sink {
  explicit Sink(bool expert) : expert(expert) {}
  const bool expert;  // an expert's slice of a stacked tensor: small batches count
  at::Tensor sum2;    // [in] float64, undefined before the first rows
  int64_t rows = 0;

  void Add(const at::Tensor& input) {  // [..., in]
    const at::Tensor flat = input.reshape({-1, input.size(-1)});
    if (!expert && flat.size(0) < kSmallestCountedDenseBatch) return;
    const at::Tensor s = flat.to(at::kDouble).square().sum(0);
    sum2 = sum2.defined() ? sum2 + s : s;
    rows += flat.size(0);
  }
};

namespace {

runtime::MoeBlock* MoeBlockOf(runtime::DecoderLayer& layer) {
  auto* moe = dynamic_cast<runtime::MoeDecoderLayer*>(&layer);
  return moe == nullptr ? nullptr : moe->moe.get();
}

}  // namespace

struct ImatrixCollector::Wrapped {
  std::string weight;  // full HF weight name
  std::shared_ptr<runtime::LinearLike> original;
  std::shared_ptr<Sink> sink;
};

ImatrixCollector::ImatrixCollector(checkpoint::ModelConfig model)
    : model_(std::move(model)), stats_(std::make_shared<exporter::gguf::ImatrixStats>()) {}

ImatrixCollector::~ImatrixCollector() = default;

ImatrixCollector::Slot ImatrixCollector::GgufSlotOf(const std::string& hf_weight) const {
  std::string gemma = exporter::gguf::GemmaGgufTensorName(model_, hf_weight);
  if (!gemma.empty()) return {std::move(gemma), -1};
  const exporter::gguf::GgufSlot slot = exporter::gguf::GgufTensorSlot(hf_weight);
  if (slot.name.rfind("blk.", 0) != 0) return {};  // llama-imatrix collects the decoder layers' matrices only
  return {slot.name, slot.expert};
}

absl::Status ImatrixCollector::Attach(runtime::DecoderLayer& layer) {
  if (attached_ != nullptr) {
    return absl::InvalidArgumentError(StrCat("imatrix: ", layer.prefix(), " attached while ", attached_->prefix(),
                                             " still is"));
  }
  for (const runtime::NamedLinear& l : layer.NamedLinears()) {
    const std::string weight = l.name + ".weight";
    if (GgufSlotOf(weight).name.empty()) continue;
    auto wrapped =
        std::make_unique<Wrapped>(Wrapped{weight, l.linear, std::make_shared<Sink>(GgufSlotOf(weight).expert >= 0)});
    auto observed = std::make_shared<ObservedLinear>(
        l.linear, [sink = wrapped->sink](const at::Tensor& input) { sink->Add(input); });
    if (auto s = layer.ReplaceLinear(l.relative_name, observed); !s.ok()) return s;
    wrapped_[l.relative_name] = std::move(wrapped);
  }
  if (runtime::MoeBlock* block = MoeBlockOf(layer)) {
    // llama.cpp multiplies the block's input by the router (ffn_gate_inp) and by qwen2_moe's shared-expert gate
    // (ffn_gate_inp_shexp): both see every token.
    const std::string name = layer.prefix() + checkpoint::MoeBlockName(model_);
    auto sink = std::make_shared<Sink>(false);
    routers_[name + ".gate.weight"] = sink;
    if (block->shared_gate().defined()) routers_[name + ".shared_expert_gate.weight"] = sink;
    block->set_input_observer([sink](const at::Tensor& flat) { sink->Add(flat); });
  }
  attached_ = &layer;
  return absl::OkStatus();
}

void ImatrixCollector::Add(const Slot& slot, const Sink& sink, int64_t ncols) {
  // A dense matrix llama-imatrix never counted has no entry; a stacked one has from its first multiplication on.
  if (slot.expert < 0 && sink.rows == 0 && !stats_->entries.count(slot.name)) return;
  exporter::gguf::ImatrixEntry& e = stats_->entries[slot.name];
  if (e.ncols == 0) {
    const int64_t n_mat = slot.expert >= 0 ? model_.num_experts : 1;
    e.ncols = ncols;
    e.sum2.assign(ncols * n_mat, 0.0f);
    e.counts.assign(n_mat, 0.0f);
  }
  const int64_t slice = slot.expert >= 0 ? slot.expert : 0;
  e.counts[slice] += static_cast<float>(sink.rows);
  if (!sink.sum2.defined()) return;  // an expert no token reached keeps zeros, as in llama-imatrix
  const at::Tensor sums = sink.sum2.to(at::kCPU).contiguous();
  const double* s = sums.data_ptr<double>();
  float* out = e.sum2.data() + slice * e.ncols;
  for (int64_t j = 0; j < e.ncols; ++j) out[j] = static_cast<float>(out[j] + s[j]);
}

absl::Status ImatrixCollector::Detach(runtime::DecoderLayer& layer) {
  if (attached_ != &layer) {
    return absl::FailedPreconditionError(StrCat("imatrix: ", layer.prefix(), " is not the attached layer"));
  }
  attached_ = nullptr;
  for (auto& [relative, w] : wrapped_) {
    if (auto s = layer.ReplaceLinear(relative, w->original); !s.ok()) return s;
  }
  if (runtime::MoeBlock* block = MoeBlockOf(layer)) block->set_input_observer(nullptr);
  for (const auto& [relative, w] : wrapped_) Add(GgufSlotOf(w->weight), *w->sink, w->original->in_features());
  for (const auto& [weight, sink] : routers_) Add(GgufSlotOf(weight), *sink, model_.hidden_size);
  wrapped_.clear();
  routers_.clear();
  return absl::OkStatus();
}

}  // namespace quark::quantize

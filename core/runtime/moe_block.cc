#include "core/runtime/moe_block.h"

#include <algorithm>
#include <utility>

#include "core/base/strings.h"
#include "core/runtime/matmul_precision.h"

namespace quark::runtime {

at::Tensor MoeExpert::forward(const at::Tensor& x) {
  // In this order, not the compiler's argument order: a recording pass stops after the input it needs.
  const at::Tensor g = at::silu(gate->forward(x));
  const at::Tensor u = up->forward(x);
  return down->forward(g * u);
}

MoeBlock::MoeBlock(at::Tensor router, int64_t top_k, bool norm_topk_prob, at::Tensor shared_gate)
    : router_(std::move(router)), shared_gate_(std::move(shared_gate)), top_k_(top_k), norm_topk_prob_(norm_topk_prob) {}

MoeBlock::Routing MoeBlock::SoftmaxTopK(const at::Tensor& flat) const {
  // HF: router_logits = gate(hidden) in the hidden dtype; softmax in float32; top-k; optional renormalization;
  // the weights cast back to the hidden dtype.
  const at::Tensor probs = at::softmax(ComputeLinear(flat, router_, at::Tensor()).to(at::kFloat), -1);  // [N, E]
  auto [weights, selected] = probs.topk(top_k_, -1);  // [N, k]
  if (norm_topk_prob_) weights = weights / weights.sum(-1, /*keepdim=*/true);
  return {probs, weights.to(flat.scalar_type()), selected};
}

at::Tensor MoeBlock::forward(const at::Tensor& x) { return ForwardSamples({x}, ActivationHome(x.device(), false)).front(); }

std::vector<at::Tensor> MoeBlock::ForwardSamples(const std::vector<at::Tensor>& xs, const ActivationHome& activations) {
  // Each sample's own computation, in the same order as a forward of that sample alone: the samples only interleave
  // at the experts, which walk the samples inside one expert (one load per expert when the experts stream in groups).
  // What crosses between the device and the host is only moved, never computed on the way: index_select and a single
  // add per token and expert in index_add_ give the same bits on either side.
  struct Sample {
    at::Tensor flat;     // [N, hidden], where activations are kept
    at::Tensor weights;  // the routing's [N * k], where activations are kept
    // Every expert's tokens: the positions t * k + slot of the routing's choices ordered by expert, token order within
    // an expert (a stable sort), and where each expert's run starts (E + 1 offsets, on the host). One copy of the
    // counts to the host a sample, where asking each expert for its tokens (nonzero) was a device sync an expert.
    at::Tensor by_expert;
    std::vector<int64_t> starts;
    int64_t top_k = 0;
    at::Tensor shared;  // the shared expert's output, undefined when none
    at::Tensor out;     // the routed experts' weighted sum, in the routing weights' dtype
  };
  const int64_t expert_count = static_cast<int64_t>(experts.size());
  std::vector<Sample> samples;
  samples.reserve(xs.size());
  for (const at::Tensor& x : xs) {
    const at::Tensor flat = activations.Place(x).reshape({-1, x.size(-1)});
    if (input_observer_) input_observer_(flat);
    const Routing routing = routing_ ? routing_(flat, router_) : SoftmaxTopK(flat);
    if (recording_) Record(flat, routing.scores, routing.selected);
    Sample s;
    // The shared expert first: it reads every token, as the router does (a capture pass for it stops here).
    if (shared_expert) {
      at::Tensor shared = shared_expert->forward(flat);
      if (shared_gate_.defined()) shared = at::sigmoid(ComputeLinear(flat, shared_gate_, at::Tensor())) * shared;
      s.shared = activations.Hold(shared);
    }
    s.flat = activations.Hold(flat);
    s.weights = activations.Hold(routing.weights).reshape({-1});
    const at::Tensor choices = activations.Hold(routing.selected).reshape({-1});
    s.by_expert = std::get<1>(choices.sort(/*stable=*/true, 0, /*descending=*/false));
    const at::Tensor counts = at::bincount(choices, {}, expert_count).to(at::kCPU).to(at::kLong).contiguous();
    const int64_t* count = counts.data_ptr<int64_t>();
    s.starts.assign(1, 0);
    for (int64_t e = 0; e < expert_count; ++e) s.starts.push_back(s.starts.back() + count[e]);
    s.top_k = routing.selected.size(1);
    s.out = at::zeros_like(s.flat, s.weights.scalar_type());
    samples.push_back(std::move(s));
  }
  for (int64_t e = 0; e < expert_count; ++e) {
    for (Sample& s : samples) {
      const int64_t n = s.starts[e + 1] - s.starts[e];
      if (n == 0) continue;
      const at::Tensor positions = s.by_expert.narrow(0, s.starts[e], n);  // an expert at most once a token
      const at::Tensor tokens = positions.div(s.top_k, "floor");
      const at::Tensor w = activations.Place(s.weights.index_select(0, positions).unsqueeze(1));  // [n, 1]
      const at::Tensor routed_tokens = activations.Place(s.flat.index_select(0, tokens));
      const at::Tensor contribution =
          weights_scale_inputs_ ? experts[e]->forward((routed_tokens * w).to(s.flat.scalar_type()))
                                : experts[e]->forward(routed_tokens) * w;
      s.out.index_add_(0, tokens, activations.Hold(contribution.to(s.out.scalar_type())));
    }
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    at::Tensor out = samples[i].out.to(samples[i].flat.scalar_type());
    if (samples[i].shared.defined()) out = out + samples[i].shared;
    outputs.push_back(out.view(xs[i].sizes()));
  }
  return outputs;
}

void MoeBlock::BeginCoverage(int64_t min_tokens) {
  recording_ = true;
  min_tokens_ = std::max<int64_t>(min_tokens, 0);
  routed_.assign(num_experts(), 0);
  candidates_.assign(num_experts(), Candidates{});
}

void MoeBlock::Record(const at::Tensor& flat, const at::Tensor& probs, const at::Tensor& selected) {
  const int64_t n = probs.size(0), e_count = probs.size(1);
  // On the routing's device; the counts cross to the host (the top-up's choices below depend on them).
  at::Tensor routed_mask = at::zeros({n, e_count}, selected.options().dtype(at::kBool)).scatter_(1, selected, true);
  const at::Tensor counts = routed_mask.sum(0).to(at::kLong).to(at::kCPU).contiguous();
  const int64_t* c = counts.data_ptr<int64_t>();
  for (int64_t e = 0; e < e_count; ++e) routed_[e] += c[e];
  if (min_tokens_ == 0) return;
  // rank[t, e]: the position of expert e in token t's router order (0 = its top choice). A candidate's key orders by
  // rank first, then by probability: rank - p with p in [0, 1) keeps the ranks apart.
  const at::Tensor order = probs.argsort(-1, /*descending=*/true);
  const at::Tensor rank = at::empty_like(order).scatter_(1, order, at::arange(e_count, order.options()).expand({n, e_count}));
  const at::Tensor keys = rank.to(at::kDouble) - probs.to(at::kDouble);
  // Each expert's other tokens (those not routed to it), in token order: a stable sort of the mask's column puts its
  // n - c[e] of them first. One sort for every expert, made at the first one that needs it, where asking each short
  // expert for them (nonzero) was a wait for the device per expert and sample; every count is already on the host.
  at::Tensor others_first;  // [E, n]
  for (int64_t e = 0; e < e_count; ++e) {
    if (routed_[e] >= min_tokens_) {
      candidates_[e] = Candidates{};  // enough routed tokens: this expert will never need a top-up
      continue;
    }
    if (n - c[e] == 0) continue;
    if (!others_first.defined()) {
      const at::Tensor by_mask = std::get<1>(routed_mask.to(at::kByte).sort(/*stable=*/true, 0, /*descending=*/false));
      others_first = by_mask.t().contiguous();
    }
    const at::Tensor others = others_first.select(0, e).narrow(0, 0, n - c[e]);
    at::Tensor k = keys.select(1, e).index_select(0, others);
    at::Tensor t = flat.index_select(0, others);
    Candidates& kept = candidates_[e];
    if (kept.keys.defined()) {
      k = at::cat({kept.keys, k});
      t = at::cat({kept.tokens, t});
    }
    if (k.size(0) > min_tokens_) {
      // Earlier tokens first on equal keys (a stable sort), so the result does not depend on sample boundaries.
      const at::Tensor best = std::get<1>(k.sort(/*stable=*/true, 0, /*descending=*/false)).narrow(0, 0, min_tokens_);
      k = k.index_select(0, best);
      t = t.index_select(0, best);
    }
    kept.keys = k;
    kept.tokens = t.clone();
  }
}

ExpertCoverage MoeBlock::FinishCoverage() {
  ExpertCoverage coverage;
  coverage.routed = recording_ ? std::move(routed_) : std::vector<int64_t>(num_experts(), 0);
  coverage.topped_up.assign(coverage.routed.size(), 0);
  routed_.clear();
  std::vector<Candidates> candidates = std::move(candidates_);
  const int64_t min_tokens = min_tokens_;
  recording_ = false;
  candidates_.clear();
  for (size_t e = 0; e < candidates.size(); ++e) {
    const int64_t need = min_tokens - coverage.routed[e];
    if (need <= 0 || !candidates[e].keys.defined()) continue;
    const Candidates& c = candidates[e];
    const at::Tensor best =
        std::get<1>(c.keys.sort(/*stable=*/true, 0, /*descending=*/false)).narrow(0, 0, std::min(need, c.keys.size(0)));
    coverage.topped_up[e] = best.size(0);
    experts[e]->forward(c.tokens.index_select(0, best));  // statistics only
  }
  return coverage;
}

absl::Status NoExpertTokensError(const std::string& expert, const std::string& consumer, int64_t min_expert_tokens) {
  return absl::FailedPreconditionError(StrCat(
      expert, ": no calibration tokens reached this expert (the router sent it none",
      min_expert_tokens > 0 ? " and no other token was left to top it up"
                            : " and the top-up is disabled: moe_min_expert_tokens = 0",
      "), which leaves ", consumer, " without statistics"));
}

}  // namespace quark::runtime

#include "core/search/sensitivity.h"

#include <ATen/core/grad_mode.h>  // at::NoGradGuard (LibTorch 2.11 no longer brings it with ATen.h)

#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "core/base/strings.h"
#include "core/config/layer_plan.h"
#include "core/config/fused_group.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/layer_forward.h"
#include "core/search/next_token_scores.h"

namespace quark::search {
namespace {

// One group quantized, the rest float: its hidden states from the layer where it was quantized on.
struct Branch {
  size_t group = 0;
  std::vector<at::Tensor> hidden;  // per sample [1, T, hidden]
};

int64_t BytesOf(const std::vector<at::Tensor>& tensors) {
  int64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += t.numel() * t.element_size();
  return bytes;
}

// The linears of one layer grouped as the search groups them, in forward order.
std::vector<std::pair<std::string, std::vector<runtime::NamedLinear>>> GroupsOf(const runtime::DecoderLayer& layer) {
  std::vector<std::pair<std::string, std::vector<runtime::NamedLinear>>> out;
  std::map<std::string, size_t> index;
  for (runtime::NamedLinear& l : layer.NamedLinears()) {
    const std::string key = FusedGroupKey(l.name);
    auto [it, added] = index.emplace(key, out.size());
    if (added) out.push_back({key, {}});
    out[it->second].second.push_back(std::move(l));
  }
  return out;
}

class CandidateRun {
 public:
  CandidateRun(runtime::LayerStreamer& streamer, const Candidate& candidate, SensitivityTable& table,
               const SensitivityOptions& options, bool record_groups)
      : streamer_(streamer), candidate_(candidate), table_(table), options_(options), record_groups_(record_groups) {}

  // The `after` hook: the layer still holds its float linears and `inputs` are the float model's.
  absl::Status AfterLayer(int64_t index, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
    try {
      at::NoGradGuard no_grad;
      for (Branch& b : branches_) {
        for (at::Tensor& h : b.hidden) h = runtime::ForwardAndHold(layer, h, streamer_.model());
      }
      if (!InRange(index)) return absl::OkStatus();  // a split pass: another range's child starts these branches
      std::vector<ModuleInfo> modules;
      for (const runtime::NamedLinear& l : layer.NamedLinears()) {
        modules.push_back({l.name, "Linear", {l.linear->out_features(), l.linear->in_features()}});
      }
      for (auto& [key, linears] : GroupsOf(layer)) {
        auto group = GroupIndex(index, key, linears);
        if (!group.ok()) return group.status();
        auto branch = QuantizedBranch(layer, linears, modules, inputs);
        if (!branch.ok()) {
          return absl::Status(branch.status().code(),
                              StrCat(key, " with ", candidate_.name, ": ", std::string(branch.status().message())));
        }
        branches_.push_back({*group, *std::move(branch)});
        bytes_ += BytesOf(branches_.back().hidden);
        if (bytes_ > options_.max_branch_bytes) {
          return absl::ResourceExhaustedError(
              StrCat("sensitivity: the branches' hidden states reach ", bytes_, " bytes at layer ", index,
                     ", over max_branch_bytes ", options_.max_branch_bytes, " (use fewer or shorter samples)"));
        }
      }
    } catch (const std::exception& error) {
      return runtime::TorchErrorToStatus(error, StrCat("sensitivity of layer ", index));
    }
    return absl::OkStatus();
  }

  std::vector<Branch>& branches() { return branches_; }

 private:
  bool InRange(int64_t index) const {
    if (options_.layer_count <= 0) return true;
    return index >= options_.first_layer && index < options_.first_layer + options_.layer_count;
  }

  absl::StatusOr<size_t> GroupIndex(int64_t layer, const std::string& key,
                                    const std::vector<runtime::NamedLinear>& linears) {
    if (record_groups_) {
      LinearGroup g{key, layer, {}, 0};
      for (const auto& l : linears) {
        g.modules.push_back({l.name, "Linear", {l.linear->out_features(), l.linear->in_features()}});
        g.params += l.linear->out_features() * l.linear->in_features();
      }
      table_.groups.push_back(std::move(g));
      return table_.groups.size() - 1;
    }
    if (next_group_ >= table_.groups.size() || table_.groups[next_group_].name != key) {
      return absl::InternalError(StrCat("sensitivity: group ", key, " was not seen in the first pass"));
    }
    return next_group_++;
  }

  // The layer's output on the float inputs with only `linears` quantized; the float linears are put back.
  absl::StatusOr<std::vector<at::Tensor>> QuantizedBranch(runtime::DecoderLayer& layer,
                                                          const std::vector<runtime::NamedLinear>& linears,
                                                          const std::vector<ModuleInfo>& modules,
                                                          const std::vector<at::Tensor>& inputs) {
    Config config;
    for (const auto& l : linears) config.layer_quant_config.push_back({l.name, candidate_.config});
    quantize::LayerQuantizer quantizer(config, BuildLayerPlan(config, modules));
    auto installed = quantizer.Calibrate(layer, inputs, streamer_.model());
    std::vector<at::Tensor> out;
    if (installed.ok()) {
      for (const at::Tensor& x : inputs) out.push_back(runtime::ForwardAndHold(layer, x, streamer_.model()));
    }
    for (const auto& l : linears) {
      if (auto s = layer.ReplaceLinear(l.relative_name, l.linear); !s.ok()) return s;
    }
    if (!installed.ok()) return installed.status();
    return out;
  }

  runtime::LayerStreamer& streamer_;
  const Candidate& candidate_;
  SensitivityTable& table_;
  const SensitivityOptions& options_;
  bool record_groups_;
  size_t next_group_ = 0;
  int64_t bytes_ = 0;
  std::vector<Branch> branches_;
};

absl::Status ScoreBranches(runtime::LayerStreamer& streamer, const NextTokenReference& ref,
                           std::vector<Branch>& branches, CandidatePass& pass) {
  for (Branch& b : branches) {
    auto loss = ref.Score(streamer, b.hidden);
    if (!loss.ok()) return loss.status();
    b.hidden.clear();  // released as soon as scored
    pass.kld[b.group] = loss->kld;
    pass.nll_increase[b.group] = loss->nll_increase;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SensitivityTable> MeasureSensitivity(runtime::LayerStreamer& streamer,
                                                    const std::vector<at::Tensor>& samples,
                                                    const std::vector<Candidate>& candidates,
                                                    const SensitivityOptions& options) {
  if (samples.empty()) return absl::InvalidArgumentError("sensitivity: no calibration samples");
  for (size_t s = 0; s < samples.size(); ++s) {
    if (samples[s].numel() < 2) {
      return absl::InvalidArgumentError(StrCat("sensitivity: sample ", s, " has fewer than 2 tokens"));
    }
  }
  if (candidates.empty()) return absl::InvalidArgumentError("sensitivity: no candidates");
  const int64_t layers = streamer.model().config().num_hidden_layers;
  if (options.layer_count < 0 || options.first_layer < 0 ||
      (options.layer_count > 0 && options.first_layer + options.layer_count > layers)) {
    return absl::InvalidArgumentError(StrCat("sensitivity: first_layer ", options.first_layer, " and layer_count ",
                                             options.layer_count, " do not lie within the model's ", layers,
                                             " decoder layers"));
  }
  SensitivityTable table;
  std::optional<NextTokenReference> ref;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const auto start = std::chrono::steady_clock::now();
    CandidateRun run(streamer, candidates[c], table, options, /*record_groups=*/c == 0);
    runtime::LayerHooks hooks;
    hooks.after = [&run](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs,
                         const std::vector<at::Tensor>&) { return run.AfterLayer(i, layer, inputs); };
    auto finals = streamer.Run(samples, hooks);
    if (!finals.ok()) return finals.status();
    at::NoGradGuard no_grad;
    if (!ref) {
      auto built = NextTokenReference::Build(streamer, samples, *finals);
      if (!built.ok()) return built.status();
      ref = *std::move(built);
    }
    CandidatePass pass;
    pass.candidate = candidates[c].name;
    pass.kld.assign(table.groups.size(), 0.0);
    pass.nll_increase.assign(table.groups.size(), 0.0);
    if (auto s = ScoreBranches(streamer, *ref, run.branches(), pass); !s.ok()) return s;
    pass.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    table.passes.push_back(std::move(pass));
  }
  table.float_nll = ref->mean_nll();
  table.tokens = ref->tokens();
  return table;
}

}  // namespace quark::search

#include "server/api/sweep_plan.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/search/recipe_space.h"
#include "server/api/model_fit.h"
#include "server/api/spec_validation.h"

namespace quark::server {
namespace {

constexpr size_t kMaxSchemeNameBytes = 64;

}  // namespace

absl::Status ValidateSweepSpec(const quark::v1::JobSpec& spec) {
  if (spec.sweep_size() > kMaxSweepCandidates) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec.sweep: ", spec.sweep_size(), " candidates; at most ", kMaxSweepCandidates, " per sweep"));
  }
  std::vector<std::string> names;
  for (int i = 0; i < spec.sweep_size(); ++i) {
    const std::string& name = spec.sweep(i);
    if (name.empty() || name.size() > kMaxSchemeNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat("spec.sweep[", i, "]: ", name.size(), " bytes; a preset name (1..",
                                                     kMaxSchemeNameBytes, " bytes, see ListPresets)"));
    }
    names.push_back(name);
  }
  // Unknown names (with suggestions), repeats and presets that quantize no weight, each naming spec.sweep[i].
  absl::StatusOr<std::vector<search::Candidate>> candidates = search::ResolveCandidates(names, "spec.sweep");
  if (!candidates.ok()) return candidates.status();
  if (spec.quantization_case() != quark::v1::JobSpec::QUANTIZATION_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.", spec.quantization_case() == quark::v1::JobSpec::kPreset ? "preset" : "config",
        ": a sweep sets each child's preset from spec.sweep; leave spec.preset and spec.config empty"));
  }
  if (spec.evaluation().uri().empty()) {
    return absl::InvalidArgumentError(
        "spec.evaluation.uri: required with spec.sweep (its table compares the candidates' perplexity)");
  }
  return absl::OkStatus();
}

quark::v1::JobSpec SweepChildSpec(const quark::v1::JobSpec& parent, const std::string& scheme) {
  quark::v1::JobSpec child = parent;
  child.clear_sweep();
  child.set_preset(scheme);
  return child;
}

CandidateFit FitCandidate(const estimate::ModelShape& shape, const quark::v1::JobSpec& child) {
  CandidateFit fit;
  absl::StatusOr<quark::Config> config =
      ResolveRequestConfig("spec.", nullptr, &child.preset(), child.kv_cache_dtype(), child.exclude());
  if (!config.ok()) {
    fit.problem = std::string(config.status().message());
    return fit;
  }
  fit.problem = ModelFitProblem(shape, *config, child);
  if (!fit.problem.empty()) return fit;
  absl::StatusOr<std::vector<search::Candidate>> candidate = search::ResolveCandidates({child.preset()}, "spec.sweep");
  if (!candidate.ok()) {
    fit.problem = std::string(candidate.status().message());
    return fit;
  }
  double bits = 0;
  int64_t params = 0;
  for (const search::LinearGroup& group : search::DecoderLinearGroups(shape.modules)) {
    bits += search::GroupBits(group, candidate->front().config, shape.model_dtype);
    params += group.params;
  }
  if (params > 0) fit.bits_per_weight = bits / static_cast<double>(params);
  return fit;
}

}  // namespace quark::server

// #36 sweep jobs at submission: the checks of spec.sweep and what each candidate makes of the model (its bits per
// weight, or why the model's shapes cannot take it). No gRPC, no store: QuantizationServiceImpl::SubmitSweep
// (quantization_service_sweep.cc) calls these, then hands the plan to the scheduler.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "core/estimate/model_shape.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

/// The most candidates one sweep may name.
inline constexpr int kMaxSweepCandidates = 16;

/// INVALID_ARGUMENT naming the field: more than kMaxSweepCandidates names, an empty, over-long, unknown (with the
/// preset lookup's suggestions) or repeated name (spec.sweep[i]), spec.preset or spec.config set beside it, no
/// spec.evaluation.uri (the table compares perplexities).
absl::Status ValidateSweepSpec(const quark::v1::JobSpec& spec);

/// The child job of `parent` for candidate `scheme`: the parent's spec with preset = scheme and sweep cleared
/// (calibration, evaluation, exports, algorithms, labels, priority, deadline and limits as the parent's).
quark::v1::JobSpec SweepChildSpec(const quark::v1::JobSpec& parent, const std::string& scheme);

/// What a candidate makes of the model's decoder layers.
struct CandidateFit {
  double bits_per_weight = 0;  // of the decoder linears, scales and zero points included (search::GroupBits)
  std::string problem;         // the first Config error against the model's modules; "" when it fits
};

/// `child` is a SweepChildSpec (its preset resolved with kv_cache_dtype and exclude, then checked against `shape` by
/// ModelFitProblem: the engine's ValidateConfig and the exporters' packing rules).
CandidateFit FitCandidate(const estimate::ModelShape& shape, const quark::v1::JobSpec& child);

}  // namespace quark::server

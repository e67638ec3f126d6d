// #36 item 4: an automatic search's sensitivity passes split by decoder-layer range, so that more workers than
// candidates all have a pass to run. A range's child starts branches only at its layers (the float stream still runs
// the whole model, core/search/sensitivity.h), so the figures of its groups are the whole pass's; the parent merges
// each candidate's ranges back into one pass before searching. Pure functions over the protos (no store, no lock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quark/v1/service.pb.h"

namespace quark::server {

/// `splits` contiguous ranges tiling [0, num_layers) (clamped to 1..num_layers), balanced by the work a range's
/// child does: a group quantized at layer j runs through the num_layers - j layers from j on, then is scored (about
/// one more layer), so layer j weighs num_layers - j + 1 and early ranges hold fewer layers.
std::vector<quark::v1::LayerRange> SplitPassLayers(int64_t num_layers, int splits);

/// INVALID_ARGUMENT naming spec.auto_search.pass_layer_ranges[i] unless the ranges tile [0, num_layers) in order:
/// the first starts at 0, each starts where the previous ended, none is empty, the last ends at num_layers.
absl::Status CheckPassRangesTile(const google::protobuf::RepeatedPtrField<quark::v1::LayerRange>& ranges,
                                 int64_t num_layers);

/// The ranges each candidate's pass is split into: spec.pass_layer_ranges (checked), else spec.pass_splits ranges
/// (past num_layers refused naming spec.auto_search.pass_splits), else quarkd's policy: ceil(live_workers /
/// candidates) ranges, at most num_layers, one (unsplit) when the candidates alone fill the live workers. One range
/// covering every layer means unsplit.
absl::StatusOr<std::vector<quark::v1::LayerRange>> PassLayerRanges(const quark::v1::AutoSearchSpec& spec,
                                                                   int64_t num_layers, int live_workers,
                                                                   int candidates);

/// `whole` (a SensitivityChildSpec) restricted to `range`.
quark::v1::JobSpec SplitPassSpec(const quark::v1::JobSpec& whole, const quark::v1::LayerRange& range);

/// One candidate's pass from its rows' jobs (in layer order; one job = returned as it is). All SUCCEEDED: SUCCEEDED,
/// metrics the union of the parts' "kld:GROUP" / "nll_increase:GROUP", their common sensitivity_float_nll and
/// sensitivity_tokens (parts that disagree make it FAILED: not one model and calibration), seconds_sensitivity
/// summed; id "job-a+job-b", deduplicated_from likewise from the parts that ran elsewhere. Else the first part that
/// did not succeed decides the state, its error prefixed with its layers and job.
quark::v1::Job MergeSplitPasses(const std::vector<quark::v1::Job>& parts);

/// The ranges' text for logs and tables: "layers 0..1".
std::string LayerRangeText(int32_t first, int32_t count);

}  // namespace quark::server

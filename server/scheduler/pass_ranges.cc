#include "server/scheduler/pass_ranges.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace quark::server {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::LayerRange;

namespace {

LayerRange Range(int64_t first, int64_t count) {
  LayerRange r;
  r.set_first(static_cast<int32_t>(first));
  r.set_count(static_cast<int32_t>(count));
  return r;
}

bool IsPerGroupFigure(const std::string& name) {
  return absl::StartsWith(name, "kld:") || absl::StartsWith(name, "nll_increase:");
}

}  // namespace

std::string LayerRangeText(int32_t first, int32_t count) {
  return absl::StrCat("layers ", first, "..", first + count - 1);
}

std::vector<LayerRange> SplitPassLayers(int64_t num_layers, int splits) {
  std::vector<LayerRange> out;
  if (num_layers <= 0) return out;
  const int64_t n = std::clamp<int64_t>(splits, 1, num_layers);
  double total = 0;
  for (int64_t j = 0; j < num_layers; ++j) total += static_cast<double>(num_layers - j + 1);
  int64_t first = 0;
  double done = 0;  // the work of the layers before `first`
  for (int64_t k = 1; k < n; ++k) {
    // End range k-1 where its cumulative work comes closest to k/n of the total, leaving a layer for each later one.
    const double target = total * static_cast<double>(k) / static_cast<double>(n);
    int64_t end = first + 1;
    double at_end = done + static_cast<double>(num_layers - first + 1);
    while (end < num_layers - (n - k)) {
      const double next = at_end + static_cast<double>(num_layers - end + 1);
      if (std::abs(next - target) >= std::abs(at_end - target)) break;
      at_end = next;
      ++end;
    }
    out.push_back(Range(first, end - first));
    first = end;
    done = at_end;
  }
  out.push_back(Range(first, num_layers - first));
  return out;
}

absl::Status CheckPassRangesTile(const google::protobuf::RepeatedPtrField<LayerRange>& ranges, int64_t num_layers) {
  int64_t next = 0;
  for (int i = 0; i < ranges.size(); ++i) {
    const LayerRange& r = ranges.Get(i);
    const std::string field = absl::StrCat("spec.auto_search.pass_layer_ranges[", i, "]");
    if (r.count() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": count ", r.count(), " is not positive"));
    }
    if (r.first() != next) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": starts at layer ", r.first(), ", not at ", next,
                                                     next == 0 ? " (the first layer)" : " (where the previous ended)",
                                                     ": the ranges must tile the model's ", num_layers,
                                                     " decoder layers in order"));
    }
    next = static_cast<int64_t>(r.first()) + r.count();
    if (next > num_layers) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": ends at layer ", next - 1, ", past the model's last (",
                                                     num_layers - 1, ")"));
    }
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("spec.auto_search.pass_layer_ranges: cover layers 0..", next - 1,
                                                   " of the model's ", num_layers, " decoder layers, not all of them"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LayerRange>> PassLayerRanges(const quark::v1::AutoSearchSpec& spec, int64_t num_layers,
                                                        int live_workers, int candidates) {
  if (num_layers <= 0) return std::vector<LayerRange>{};
  if (spec.pass_layer_ranges_size() > 0) {
    if (absl::Status s = CheckPassRangesTile(spec.pass_layer_ranges(), num_layers); !s.ok()) return s;
    return std::vector<LayerRange>(spec.pass_layer_ranges().begin(), spec.pass_layer_ranges().end());
  }
  if (spec.pass_splits() > num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("spec.auto_search.pass_splits: ", spec.pass_splits(),
                                                   " ranges of the model's ", num_layers,
                                                   " decoder layers; at most one per layer"));
  }
  int splits = spec.pass_splits();
  if (splits == 0) {  // the policy: every live worker has a range to run
    const int per = std::max(candidates, 1);
    splits = std::max(1, (live_workers + per - 1) / per);
  }
  return SplitPassLayers(num_layers, splits);
}

quark::v1::JobSpec SplitPassSpec(const quark::v1::JobSpec& whole, const LayerRange& range) {
  quark::v1::JobSpec spec = whole;
  spec.set_sensitivity_first_layer(range.first());
  spec.set_sensitivity_layer_count(range.count());
  return spec;
}

Job MergeSplitPasses(const std::vector<Job>& parts) {
  if (parts.size() == 1) return parts.front();
  Job merged;
  merged.set_state(JobState::JOB_STATE_FAILED);
  if (parts.empty()) {
    merged.set_error("no sensitivity pass");
    return merged;
  }
  std::vector<std::string> ids, ran;
  bool deduplicated = false;
  for (const Job& part : parts) {
    ids.push_back(part.id());
    ran.push_back(part.deduplicated_from().empty() ? part.id() : part.deduplicated_from());
    deduplicated = deduplicated || !part.deduplicated_from().empty();
    merged.set_needs_host_memory_bytes(std::max(merged.needs_host_memory_bytes(), part.needs_host_memory_bytes()));
  }
  merged.set_id(absl::StrJoin(ids, "+"));
  if (deduplicated) merged.set_deduplicated_from(absl::StrJoin(ran, "+"));
  *merged.mutable_spec() = parts.front().spec();
  merged.mutable_spec()->clear_sensitivity_first_layer();
  merged.mutable_spec()->clear_sensitivity_layer_count();
  for (const Job& part : parts) {
    if (part.state() == JobState::JOB_STATE_SUCCEEDED) continue;
    merged.set_state(part.state());
    merged.set_error(absl::StrCat(
        LayerRangeText(part.spec().sensitivity_first_layer(), part.spec().sensitivity_layer_count()), " (job ",
        part.id(), "): ", part.error()));
    return merged;
  }
  auto& metrics = *merged.mutable_result()->mutable_metrics();
  const auto& first = parts.front().result().metrics();
  double seconds = 0;
  for (const Job& part : parts) {
    const auto& m = part.result().metrics();
    for (const char* common : {"sensitivity_float_nll", "sensitivity_tokens"}) {
      auto a = first.find(common), b = m.find(common);
      if (a == first.end() || b == m.end() || a->second != b->second) {
        merged.set_error(absl::StrCat("the split passes ", ids.front(), " and ", part.id(), " disagree on ", common,
                                      ": not one model and calibration"));
        merged.mutable_result()->Clear();
        return merged;
      }
      metrics[common] = a->second;
    }
    for (const auto& [name, value] : m) {
      if (IsPerGroupFigure(name)) metrics[name] = value;
    }
    if (auto s = m.find("seconds_sensitivity"); s != m.end()) seconds += s->second;
  }
  metrics["seconds_sensitivity"] = seconds;
  metrics["sensitivity_parts"] = static_cast<double>(parts.size());
  merged.set_state(JobState::JOB_STATE_SUCCEEDED);
  return merged;
}

}  // namespace quark::server

// #36 item 4: the pure steps of sensitivity passes split by layer range (server/scheduler/pass_ranges.h): how
// the layers are split (balanced by work, tiling), the spec's ranges refused when they do not tile naming the
// field, quarkd's policy over the live workers, and the merge of a candidate's parts.
#include "server/scheduler/pass_ranges.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace quark::server {
namespace {

using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::LayerRange;

std::vector<std::pair<int, int>> Pairs(const std::vector<LayerRange>& ranges) {
  std::vector<std::pair<int, int>> out;
  for (const LayerRange& r : ranges) out.push_back({r.first(), r.count()});
  return out;
}

// The work model's cost of a range: layer j weighs num_layers - j + 1.
double Work(const LayerRange& r, int layers) {
  double w = 0;
  for (int j = r.first(); j < r.first() + r.count(); ++j) w += layers - j + 1;
  return w;
}

TEST(PassRangesTest, SplitsTileTheLayersWithEarlyRangesHoldingFewerLayers) {
  EXPECT_EQ(Pairs(SplitPassLayers(4, 1)), (std::vector<std::pair<int, int>>{{0, 4}}));
  EXPECT_EQ(Pairs(SplitPassLayers(4, 4)), (std::vector<std::pair<int, int>>{{0, 1}, {1, 1}, {2, 1}, {3, 1}}));
  EXPECT_EQ(Pairs(SplitPassLayers(4, 9)).size(), 4u);  // at most one range per layer
  EXPECT_EQ(Pairs(SplitPassLayers(4, 0)), (std::vector<std::pair<int, int>>{{0, 4}}));
  // 32 layers in 4: a group quantized early runs through more layers, so the first range is the shortest.
  const std::vector<LayerRange> ranges = SplitPassLayers(32, 4);
  ASSERT_EQ(ranges.size(), 4u);
  int next = 0;
  double lo = 1e9, hi = 0;
  for (const LayerRange& r : ranges) {
    EXPECT_EQ(r.first(), next);
    EXPECT_GT(r.count(), 0);
    next = r.first() + r.count();
    lo = std::min(lo, Work(r, 32));
    hi = std::max(hi, Work(r, 32));
  }
  EXPECT_EQ(next, 32);
  EXPECT_LT(ranges[0].count(), ranges[3].count());
  EXPECT_LE(hi - lo, 2 * 33.0) << "unbalanced: " << lo << " .. " << hi;  // within a layer's work of each side
}

TEST(PassRangesTest, RangesThatDoNotTileTheLayersAreRefusedNamingTheField) {
  auto check = [](std::vector<std::pair<int, int>> pairs) {
    google::protobuf::RepeatedPtrField<LayerRange> ranges;
    for (auto [first, count] : pairs) {
      LayerRange* r = ranges.Add();
      r->set_first(first);
      r->set_count(count);
    }
    return CheckPassRangesTile(ranges, 4);
  };
  EXPECT_TRUE(check({{0, 1}, {1, 3}}).ok());
  const absl::Status gap = check({{0, 1}, {2, 2}});
  EXPECT_EQ(gap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gap.message().find("spec.auto_search.pass_layer_ranges[1]: starts at layer 2, not at 1"),
            std::string::npos)
      << gap;
  EXPECT_NE(check({{0, 2}, {1, 3}}).message().find("pass_layer_ranges[1]"), std::string::npos);  // overlap
  EXPECT_NE(check({{1, 3}}).message().find("pass_layer_ranges[0]: starts at layer 1, not at 0"), std::string::npos);
  EXPECT_NE(check({{0, 2}, {2, 0}}).message().find("pass_layer_ranges[1]: count 0"), std::string::npos);
  EXPECT_NE(check({{0, 5}}).message().find("pass_layer_ranges[0]: ends at layer 4, past the model's last (3)"),
            std::string::npos);
  EXPECT_NE(check({{0, 3}}).message().find("cover layers 0..2 of the model's 4"), std::string::npos);
}

TEST(PassRangesTest, TheSpecsRangesOrSplitsElseOneRangePerFreeWorkerBeyondTheCandidates) {
  quark::v1::AutoSearchSpec spec;
  // The policy: 4 live workers, 3 candidates: 2 ranges each (6 children for 4 workers); 3 workers: unsplit.
  EXPECT_EQ(PassLayerRanges(spec, 4, 4, 3)->size(), 2u);
  EXPECT_EQ(PassLayerRanges(spec, 4, 3, 3)->size(), 1u);
  EXPECT_EQ(PassLayerRanges(spec, 4, 0, 3)->size(), 1u);  // no live worker (Slurm starts them): unsplit
  EXPECT_EQ(PassLayerRanges(spec, 4, 16, 1)->size(), 4u);  // at most one per layer
  spec.set_pass_splits(3);
  EXPECT_EQ(PassLayerRanges(spec, 4, 1, 3)->size(), 3u);
  spec.set_pass_splits(5);
  const auto many = PassLayerRanges(spec, 4, 1, 3);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(many.status().message().find("spec.auto_search.pass_splits: 5"), std::string::npos) << many.status();
  spec.clear_pass_splits();
  LayerRange* r = spec.add_pass_layer_ranges();
  r->set_first(0);
  r->set_count(3);
  EXPECT_NE(PassLayerRanges(spec, 4, 8, 1).status().message().find("pass_layer_ranges"), std::string::npos);
  r = spec.add_pass_layer_ranges();
  r->set_first(3);
  r->set_count(1);
  EXPECT_EQ(Pairs(*PassLayerRanges(spec, 4, 8, 1)), (std::vector<std::pair<int, int>>{{0, 3}, {3, 1}}));
}

Job Part(const std::string& id, int first, int count, std::map<std::string, double> metrics) {
  Job job;
  job.set_id(id);
  job.set_state(JobState::JOB_STATE_SUCCEEDED);
  job.mutable_spec()->set_preset("int8");
  job.mutable_spec()->set_sensitivity_pass(true);
  job.mutable_spec()->set_sensitivity_first_layer(first);
  job.mutable_spec()->set_sensitivity_layer_count(count);
  job.mutable_result()->mutable_metrics()->insert(metrics.begin(), metrics.end());
  return job;
}

TEST(PassRangesTest, ACandidatesPartsMergeIntoOnePassOrNameThePartThatFailed) {
  Job a = Part("job-a", 0, 1,
               {{"kld:l0", 0.5}, {"nll_increase:l0", 0.25}, {"sensitivity_float_nll", 2.0},
                {"sensitivity_tokens", 10}, {"seconds_sensitivity", 3}, {"seconds_total", 9}});
  Job b = Part("job-b", 1, 3,
               {{"kld:l1", 0.125}, {"nll_increase:l1", 0.0625}, {"sensitivity_float_nll", 2.0},
                {"sensitivity_tokens", 10}, {"seconds_sensitivity", 4}});
  b.set_deduplicated_from("job-old");
  const Job merged = MergeSplitPasses({a, b});
  ASSERT_EQ(merged.state(), JobState::JOB_STATE_SUCCEEDED) << merged.error();
  EXPECT_EQ(merged.id(), "job-a+job-b");
  EXPECT_EQ(merged.deduplicated_from(), "job-a+job-old");
  EXPECT_EQ(merged.spec().sensitivity_layer_count(), 0);
  const auto& m = merged.result().metrics();
  EXPECT_EQ(m.at("kld:l0"), 0.5);
  EXPECT_EQ(m.at("nll_increase:l1"), 0.0625);
  EXPECT_EQ(m.at("sensitivity_float_nll"), 2.0);
  EXPECT_EQ(m.at("seconds_sensitivity"), 7);
  EXPECT_EQ(m.count("seconds_total"), 0u);
  EXPECT_EQ(MergeSplitPasses({a}).id(), "job-a");  // one part: as it is

  Job other = b;
  (*other.mutable_result()->mutable_metrics())["sensitivity_float_nll"] = 2.5;
  const Job mixed = MergeSplitPasses({a, other});
  EXPECT_EQ(mixed.state(), JobState::JOB_STATE_FAILED);
  EXPECT_NE(mixed.error().find("disagree on sensitivity_float_nll"), std::string::npos) << mixed.error();

  Job failed = b;
  failed.set_state(JobState::JOB_STATE_FAILED);
  failed.set_error("out of memory");
  const Job broken = MergeSplitPasses({a, failed});
  EXPECT_EQ(broken.state(), JobState::JOB_STATE_FAILED);
  EXPECT_EQ(broken.error(), "layers 1..3 (job job-b): out of memory");
}

}  // namespace
}  // namespace quark::server

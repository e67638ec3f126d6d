// The streamed sensitivity pass on tinyllama-a: every (group, candidate) value equals a direct measurement (a plain
// streamed run with only that group quantized, scored against the float run), and its errors.
#include "core/search/sensitivity.h"

#include <gtest/gtest.h>

#include "core/config/layer_plan.h"
#include "core/quantize/layer_quantizer.h"
#include "core/runtime/calibration_data.h"
#include "core/runtime/tokenizer.h"
#include "tests/runtime/test_paths.h"

namespace quark::search {
namespace {

using runtime::testing::SharedDir;

std::string TinyLlama() { return SharedDir() + "/fixtures/tinyllama-a"; }

class SensitivityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { runtime::testing::InitTestEngine(); }
  void SetUp() override {
    auto streamer = runtime::LayerStreamer::Open(TinyLlama());
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    streamer_ = *std::move(streamer);
    auto tokenizer = runtime::Tokenizer::Open(TinyLlama(), 1, 2);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    runtime::CalibrationOptions c;
    c.path = runtime::testing::TinyStoriesText();
    c.format = runtime::CalibrationFormat::kText;
    c.num_samples = 3;
    c.seq_len = 48;
    auto set = runtime::LoadCalibrationSet(c, tokenizer->get());
    ASSERT_TRUE(set.ok()) << set.status();
    samples_ = set->samples;
  }

  // Mean KLD and NLL increase with only `group`'s linears quantized with `candidate`, by a plain streamed run.
  std::pair<double, double> Direct(const LinearGroup& group, const Candidate& candidate) {
    Config config;
    for (const ModuleInfo& m : group.modules) config.layer_quant_config.push_back({m.name, candidate.config});
    runtime::LayerHooks hooks;
    hooks.before = [&](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) -> absl::Status {
      if (i != group.layer) return absl::OkStatus();
      std::vector<ModuleInfo> modules;
      for (const auto& l : layer.NamedLinears()) {
        modules.push_back({l.name, "Linear", {l.linear->out_features(), l.linear->in_features()}});
      }
      quantize::LayerQuantizer q(config, BuildLayerPlan(config, modules));
      return q.Calibrate(layer, inputs, streamer_->model()).status();
    };
    auto quantized = streamer_->Run(samples_, hooks);
    auto reference = streamer_->Run(samples_);
    EXPECT_TRUE(quantized.ok() && reference.ok());
    double kld = 0, nll = 0;
    int64_t tokens = 0;
    for (size_t s = 0; s < samples_.size(); ++s) {
      const int64_t t = samples_[s].size(1);
      auto lq = at::log_softmax(*streamer_->model().Logits((*quantized)[s]), -1)[0].narrow(0, 0, t - 1);
      auto lp = at::log_softmax(*streamer_->model().Logits((*reference)[s]), -1)[0].narrow(0, 0, t - 1);
      const at::Tensor next = samples_[s].reshape({-1}).narrow(0, 1, t - 1).unsqueeze(1);
      kld += (lp.exp() * (lp - lq)).to(at::kDouble).sum().item<double>();
      nll += (lp.gather(1, next) - lq.gather(1, next)).to(at::kDouble).sum().item<double>();
      tokens += t - 1;
    }
    return {kld / tokens, nll / tokens};
  }

  std::unique_ptr<runtime::LayerStreamer> streamer_;
  std::vector<at::Tensor> samples_;
};

TEST_F(SensitivityTest, EveryValueIsTheDirectMeasurementOfThatGroupAlone) {
  auto candidates = ResolveCandidates({"uint4_wo_128", "int8"}, "--candidates");
  ASSERT_TRUE(candidates.ok());
  auto table = MeasureSensitivity(*streamer_, samples_, *candidates);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->groups.size(), 16u);  // 4 layers x (qkv, o, gate_up, down)
  EXPECT_EQ(table->groups[5].name, "model.layers.1.self_attn.o_proj");
  EXPECT_EQ(table->tokens, 3 * 47);
  ASSERT_EQ(table->passes.size(), 2u);
  double sum4 = 0, sum8 = 0;
  for (size_t g = 0; g < table->groups.size(); ++g) {
    EXPECT_GT(table->passes[0].kld[g], 0) << table->groups[g].name;
    sum4 += table->passes[0].kld[g];
    sum8 += table->passes[1].kld[g];
  }
  EXPECT_GT(sum4, sum8);  // 4-bit weights move the predictions more than 8-bit ones
  // Groups of the first, a middle and the last layer; both candidates (int8 calibrates a static input).
  for (size_t g : {0, 6, 15}) {
    for (size_t c = 0; c < 2; ++c) {
      const auto [kld, nll] = Direct(table->groups[g], (*candidates)[c]);
      // The same layers on the same inputs: equal up to the order of the float64 sums.
      EXPECT_NEAR(table->passes[c].kld[g], kld, 1e-6 * kld) << table->groups[g].name << " " << c;
      EXPECT_NEAR(table->passes[c].nll_increase[g], nll, 1e-9) << table->groups[g].name << " " << c;
    }
  }
}

// #36 item 4: a pass split by layer range (branches started only at its layers, the float stream over all of them)
// gives exactly the whole pass's figures for its groups: bit for bit, since every branch runs the same arithmetic.
TEST_F(SensitivityTest, PassesSplitByLayerRangeEqualTheWholePassBitForBit) {
  auto candidates = ResolveCandidates({"int8"}, "--candidates");
  ASSERT_TRUE(candidates.ok());
  auto whole = MeasureSensitivity(*streamer_, samples_, *candidates);
  ASSERT_TRUE(whole.ok()) << whole.status();
  size_t next = 0;  // the ranges tile the layers: together they hold every group once, in order
  for (auto [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, 2}, {3, 1}}) {
    SensitivityOptions range;
    range.first_layer = first;
    range.layer_count = count;
    auto part = MeasureSensitivity(*streamer_, samples_, *candidates, range);
    ASSERT_TRUE(part.ok()) << part.status();
    ASSERT_EQ(part->groups.size(), 4u * count);
    EXPECT_EQ(part->float_nll, whole->float_nll);
    EXPECT_EQ(part->tokens, whole->tokens);
    for (size_t g = 0; g < part->groups.size(); ++g, ++next) {
      ASSERT_LT(next, whole->groups.size());
      EXPECT_EQ(part->groups[g].name, whole->groups[next].name);
      EXPECT_EQ(part->groups[g].layer, first + static_cast<int64_t>(g / 4));
      EXPECT_EQ(part->passes[0].kld[g], whole->passes[0].kld[next]) << part->groups[g].name;
      EXPECT_EQ(part->passes[0].nll_increase[g], whole->passes[0].nll_increase[next]) << part->groups[g].name;
    }
  }
  EXPECT_EQ(next, whole->groups.size());
  SensitivityOptions outside;
  outside.first_layer = 3;
  outside.layer_count = 2;
  auto refused = MeasureSensitivity(*streamer_, samples_, *candidates, outside);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("layer_count 2"), std::string::npos) << refused.status();
}

TEST_F(SensitivityTest, BadInputsAreRefused) {
  auto candidates = ResolveCandidates({"uint4_wo_128"}, "--candidates");
  ASSERT_TRUE(candidates.ok());
  EXPECT_EQ(MeasureSensitivity(*streamer_, {}, *candidates).status().code(), absl::StatusCode::kInvalidArgument);
  auto one = MeasureSensitivity(*streamer_, {at::ones({1, 1}, at::kLong)}, *candidates);
  EXPECT_NE(one.status().message().find("sample 0"), std::string::npos) << one.status();
  SensitivityOptions tight;
  tight.max_branch_bytes = 1000;
  auto big = MeasureSensitivity(*streamer_, samples_, *candidates, tight);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("max_branch_bytes"), std::string::npos) << big.status();
}

}  // namespace
}  // namespace quark::search

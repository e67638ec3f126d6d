// #32 item 5: the routed experts of MoE layers streamed in groups of G (runtime/expert_streaming.h). On the tiny
// synthetic llama4, deepseek_v3, qwen3_moe and gpt_oss models (`quark make-model --arch ARCH --shape tiny --dtype f32`):
//   - QuantizeModel with expert_group_size G = 1, 3 and E writes the same export bytes, file for file, and the same
//     perplexities (float, fake-quantized, read back) as the whole-layer path (G = 0), for fp8, uint4_wo_32 and nvfp4;
//   - counted through the WeightSource seam (a source that keeps a weak reference to every expert tensor it hands
//     out), the streamed passes of a layer (float forward, calibration, freeze, the export's per-linear data, the
//     quantized forward) never hold more than G experts' tensors at once, where the whole-layer path holds all E;
//   - with G = 1 each pass over a layer (float forward, calibration, quantized forward, export data) loads each
//     expert at most once for all the samples (the samples are batched through each loaded expert);
//   - GPTQ (uint4_wo_32) with G = 1, 3 and E writes the same bytes and perplexities as GPTQ on whole layers, and
//     holds at most G experts at once (GPTQ's expert weights kept in an ExpertWeightSpill between loads);
//   - other algorithms, GPTQ beside another algorithm, GPTAQ and GPTQ with a layer checkpoint are refused naming
//     expert_group_size.
#include <gtest/gtest.h>

#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/checkpoint/model_modules.h"
#include "core/config/layer_plan.h"
#include "core/config/presets.h"
#include "core/quantize/expert_weight_spill.h"
#include "core/quantize/gptq_pass.h"
#include "core/quantize/layer_quantizer.h"
#include "core/quantize/weight_spill.h"
#include "core/quantize/linear_export_data.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/expert_streaming.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/mxfp4_expert_source.h"
#include "tests/quantize/tiny_pipeline_fixture.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;

// "model.layers.1.mlp.experts.5" for a tensor of that expert, "" for every other tensor.
std::string ExpertOfTensor(const std::string& name) {
  const size_t at = name.find(".experts.");
  if (at == std::string::npos) return "";
  const size_t end = name.find('.', at + 9);
  if (end == std::string::npos || end == at + 9) return "";
  return name.substr(0, end);
}

// A WeightSource that counts the routed experts whose tensors are alive (held by anyone) each time it hands one out:
// the experts in memory, whatever the streamer's own bookkeeping says.
class LiveExpertTensors : public runtime::WeightSource {
 public:
  explicit LiveExpertTensors(std::shared_ptr<const runtime::WeightSource> base) : base_(std::move(base)) {}
  absl::StatusOr<at::Tensor> Get(const std::string& name, at::ScalarType dtype) const override {
    auto tensor = base_->Get(name, dtype);
    const std::string expert = ExpertOfTensor(name);
    if (!tensor.ok() || expert.empty()) return tensor;
    live_.push_back({expert, Weak(tensor->getIntrusivePtr())});
    std::set<std::string> experts;
    for (const auto& [e, weak] : live_) {
      if (!weak.expired()) experts.insert(e);
    }
    peak_ = std::max<int64_t>(peak_, static_cast<int64_t>(experts.size()));
    ++loads_;
    return tensor;
  }
  absl::StatusOr<at::Tensor> GetStored(const std::string& name) const override { return base_->GetStored(name); }
  bool Has(const std::string& name) const override { return base_->Has(name); }
  std::string Location() const override { return base_->Location(); }

  int64_t peak() const { return peak_; }
  int64_t loads() const { return loads_; }

 private:
  using Weak = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  std::shared_ptr<const runtime::WeightSource> base_;
  mutable std::vector<std::pair<std::string, Weak>> live_;
  mutable int64_t peak_ = 0;
  mutable int64_t loads_ = 0;
};

// Every file under `dir` by relative path, with its bytes.
std::map<std::string, std::string> FilesOf(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    files[fs::relative(entry.path(), dir).string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return files;
}

template <const char* kArch>
class ExpertStreamingTest : public testing::TinyPipelineTest<kArch> {
 protected:
  using Base = testing::TinyPipelineTest<kArch>;

  int64_t Experts() const { return checkpoint::LoadModelConfig(*Base::dir_)->num_experts; }

  // G = 1, 3 and E against the whole layer: the same files and perplexities (with GPTQ first when `gptq`).
  void ExpectSameBytesForEveryGroupSize(const std::string& preset, bool gptq = false) {
    SCOPED_TRACE(preset + (gptq ? " + gptq" : ""));
    const std::string tag = preset + (gptq ? "_gptq" : "");
    QuantizeModelOptions whole = Base::Options(preset, tag + "_whole");
    if (gptq) whole.config.algo_config.push_back(GptqAlgo{});
    auto reference = QuantizeModel(*Base::dir_, whole);
    ASSERT_TRUE(reference.ok()) << reference.status();
    const auto reference_files = FilesOf(whole.output_dir);
    ASSERT_GT(reference_files.size(), 1u);
    const int64_t experts = Experts();
    ASSERT_GT(experts, 3);
    for (const int64_t group : {int64_t{1}, int64_t{3}, experts}) {
      SCOPED_TRACE("expert_group_size " + std::to_string(group));
      QuantizeModelOptions streamed = Base::Options(preset, tag + "_g" + std::to_string(group));
      streamed.config.algo_config = whole.config.algo_config;
      streamed.expert_group_size = group;
      auto report = QuantizeModel(*Base::dir_, streamed);
      ASSERT_TRUE(report.ok()) << report.status();
      for (const char* metric : {"ppl_before", "ppl_after", "ppl_reloaded"}) {
        EXPECT_EQ(report->metrics.at(metric), reference->metrics.at(metric)) << metric;
      }
      const auto files = FilesOf(streamed.output_dir);
      ASSERT_EQ(files.size(), reference_files.size());
      for (const auto& [name, bytes] : reference_files) {
        auto it = files.find(name);
        ASSERT_NE(it, files.end()) << name;
        EXPECT_TRUE(it->second == bytes) << name << " differs";
      }
    }
  }

  // The most experts alive at once over a streamed quantization of every layer as QuantizeRun does it (fp8: the float
  // forward, calibration with the coverage top-up, freeze, each linear's export data, the quantized forward; `gptq`:
  // uint4_wo_32 with GPTQ first), with `group` > 0 streamed in groups through ExpertStreamingWeights, 0 the whole layer.
  int64_t PeakExperts(int64_t group, int64_t* residency_peak = nullptr, bool gptq = false) {
    const std::string& dir = *Base::dir_;
    checkpoint::ModelConfig config = *checkpoint::LoadModelConfig(dir);
    std::shared_ptr<const runtime::WeightSource> checkpoint =
        runtime::CheckpointWeightsFor(config, *checkpoint::CheckpointReader::Open(dir));
    // GPTQ's expert weights are read back from the spill: counted as the checkpoint's are (the count sees the
    // overlay of both, which the streamer reads as its replaced weights too).
    std::shared_ptr<ExpertWeightSpill> spill = gptq ? *ExpertWeightSpill::Create() : nullptr;
    if (spill) checkpoint = std::make_shared<OverlayWeightSource>(checkpoint, std::vector<std::shared_ptr<const runtime::WeightSource>>{spill});
    auto counted = std::make_shared<LiveExpertTensors>(checkpoint);
    std::shared_ptr<const runtime::WeightSource> source = counted;
    std::shared_ptr<const runtime::ExpertStreamingWeights> streaming;
    if (group > 0) {
      source = streaming = std::make_shared<runtime::ExpertStreamingWeights>(counted, group, runtime::ComputeDevice{},
                                                                             spill ? counted : nullptr);
    }
    auto streamer = runtime::LayerStreamer::Create(config, source);
    EXPECT_TRUE(streamer.ok()) << streamer.status();
    if (!streamer.ok()) return -1;
    Config fp8 = *PresetConfig(gptq ? "uint4_wo_32" : "fp8");
    const LayerPlan plan = BuildLayerPlan(fp8, *ListModelModules(dir));
    LayerQuantizer quantizer(fp8, plan);
    quantizer.set_min_expert_tokens(4);
    std::unique_ptr<GptqPass> gptq_pass;
    if (gptq) {
      auto created = GptqPass::Create(ResolveGptqDefaults(GptqAlgo{}, config), plan, config, "algo_config[0]");
      EXPECT_TRUE(created.ok()) << created.status();
      if (!created.ok()) return -1;
      gptq_pass = *std::move(created);
      gptq_pass->set_min_expert_tokens(4);
      gptq_pass->set_expert_spill(spill);
    }
    std::vector<at::Tensor> samples;
    for (int s = 0; s < 3; ++s) samples.push_back(at::arange(3 + s, 3 + s + 24, at::kLong).mul(37).remainder(509));
    EXPECT_TRUE((*streamer)->Run(samples).ok());  // the float model
    std::vector<std::shared_ptr<QuantLinear>> current;
    runtime::LayerHooks hooks;
    hooks.before = [&](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
      CalibratedParams known;
      if (gptq_pass) {
        auto params = gptq_pass->Run(layer, inputs, (*streamer)->model(), {});
        if (!params.ok()) return params.status();
        known = *std::move(params);
      }
      auto linears = quantizer.Calibrate(layer, inputs, (*streamer)->model(), gptq_pass ? &known : nullptr);
      if (!linears.ok()) return linears.status();
      current = *std::move(linears);
      return absl::OkStatus();
    };
    hooks.after = [&](int64_t, runtime::DecoderLayer&, const std::vector<at::Tensor>&, const std::vector<at::Tensor>&) {
      for (const auto& q : current) {
        auto data = LinearExportDataOf(*q);
        if (!data.ok()) return data.status();
        q->ReleaseFloatWeight();
      }
      current.clear();
      return absl::OkStatus();
    };
    auto run = (*streamer)->Run(samples, hooks);
    EXPECT_TRUE(run.ok()) << run.status();
    EXPECT_GT(counted->loads(), 0);
    if (residency_peak != nullptr && streaming) *residency_peak = streaming->residency()->peak_resident();
    return counted->peak();
  }

  void ExpectAtMostGExpertsAlive(bool gptq = false) {
    const int64_t experts = Experts();
    EXPECT_EQ(PeakExperts(0, nullptr, gptq), experts)
        << "the whole-layer path holds every expert of a layer (the count sees them)";
    for (const int64_t group : {int64_t{1}, int64_t{3}}) {
      int64_t residency = -1;
      EXPECT_EQ(PeakExperts(group, &residency, gptq), group) << "expert_group_size " << group;
      EXPECT_EQ(residency, group);
    }
  }

  // Each pass over a layer with G < E loads every expert at most once for all the samples: the float forward, the
  // calibration (Install reads each weight to build its quantizer; then its forward, the coverage top-up and freeze
  // walk the experts once each), the quantized forward that
  // feeds the next layer and the export's per-linear data. Counted by the residency (loads of an expert not resident).
  void ExpectEachExpertLoadedOncePerPass() {
    const std::string& dir = *Base::dir_;
    const int64_t experts = Experts();
    checkpoint::ModelConfig config = *checkpoint::LoadModelConfig(dir);
    std::shared_ptr<const runtime::WeightSource> checkpoint =
        runtime::CheckpointWeightsFor(config, *checkpoint::CheckpointReader::Open(dir));
    auto streaming = std::make_shared<runtime::ExpertStreamingWeights>(checkpoint, 1);
    auto streamer = runtime::LayerStreamer::Create(config, streaming);
    ASSERT_TRUE(streamer.ok()) << streamer.status();
    const runtime::ExpertResidency& residency = *streaming->residency();
    const Config fp8 = *PresetConfig("fp8");
    LayerQuantizer quantizer(fp8, BuildLayerPlan(fp8, *ListModelModules(dir)));
    quantizer.set_min_expert_tokens(4);
    std::vector<at::Tensor> samples;  // 4 samples of 24 tokens: enough for every expert to be routed in each
    for (int s = 0; s < 4; ++s) samples.push_back(at::arange(3 + s, 3 + s + 24, at::kLong).mul(37).remainder(509));
    int64_t mark = 0, moe_layers = 0;
    std::vector<std::shared_ptr<QuantLinear>> current;
    const auto since_mark = [&](const char* pass, int64_t bound, int64_t layer) {
      const int64_t loads = residency.loads() - mark;
      EXPECT_LE(loads, bound) << pass << " of layer " << layer << " loaded experts " << loads << " times";
      mark = residency.loads();
      return loads;
    };
    runtime::LayerHooks float_pass;
    float_pass.before = [&](int64_t, runtime::DecoderLayer&, const std::vector<at::Tensor>&) {
      mark = residency.loads();
      return absl::OkStatus();
    };
    float_pass.after = [&](int64_t i, runtime::DecoderLayer&, const std::vector<at::Tensor>&,
                           const std::vector<at::Tensor>&) {
      if (since_mark("the float forward", experts, i) > 0) ++moe_layers;
      return absl::OkStatus();
    };
    ASSERT_TRUE((*streamer)->Run(samples, float_pass).ok());
    EXPECT_GT(moe_layers, 0) << "no layer loaded an expert";
    runtime::LayerHooks quantize_pass;
    quantize_pass.before = [&](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) {
      mark = residency.loads();
      auto linears = quantizer.Calibrate(layer, inputs, (*streamer)->model());
      if (!linears.ok()) return linears.status();
      current = *std::move(linears);
      since_mark("calibration (install, forward, top-up, freeze)", 4 * experts, i);
      return absl::OkStatus();
    };
    quantize_pass.after = [&](int64_t i, runtime::DecoderLayer&, const std::vector<at::Tensor>&,
                              const std::vector<at::Tensor>&) {
      since_mark("the quantized forward", experts, i);
      for (const auto& q : current) {
        auto data = LinearExportDataOf(*q);
        if (!data.ok()) return data.status();
        q->ReleaseFloatWeight();
      }
      since_mark("the export data", experts, i);
      current.clear();
      return absl::OkStatus();
    };
    auto run = (*streamer)->Run(samples, quantize_pass);
    EXPECT_TRUE(run.ok()) << run.status();
  }

  void ExpectRefused(QuantizeModelOptions o, const std::string& names) {
    o.expert_group_size = 2;
    auto refused = QuantizeModel(*Base::dir_, o);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(refused.status().message());
    EXPECT_NE(message.find("expert_group_size"), std::string::npos) << message;
    EXPECT_NE(message.find(names), std::string::npos) << message;
  }

  void ExpectAlgorithmsRefused() {
    QuantizeModelOptions awq = Base::Options("uint4_wo_32", "refused_awq");
    awq.config.algo_config.push_back(AwqAlgo{});
    ExpectRefused(awq, "awq");
    QuantizeModelOptions beside = Base::Options("uint4_wo_32", "refused_beside");
    beside.config.algo_config = {AwqAlgo{}, GptqAlgo{}};  // GPTQ after AWQ: AWQ's scales span the layer
    ExpectRefused(beside, "algo_config[0] is awq");
    QuantizeModelOptions gptaq = Base::Options("uint4_wo_32", "refused_gptaq");
    GptqAlgo asymmetric;
    asymmetric.method = HessianMethod::kGptaq;
    gptaq.config.algo_config.push_back(asymmetric);
    ExpectRefused(gptaq, "gptaq");
    QuantizeModelOptions checkpointed = Base::Options("uint4_wo_32", "refused_checkpoint");
    checkpointed.config.algo_config.push_back(GptqAlgo{});
    checkpointed.checkpoint_dir = checkpointed.output_dir + "_checkpoint";
    ExpectRefused(checkpointed, "checkpoint_dir");
  }
};

constexpr char kLlama4[] = "llama4";
constexpr char kDeepseek[] = "deepseek_v3";
constexpr char kQwen3Moe[] = "qwen3_moe";
constexpr char kGptOss[] = "gpt_oss";
using Llama4ExpertStreamingTest = ExpertStreamingTest<kLlama4>;
using DeepseekExpertStreamingTest = ExpertStreamingTest<kDeepseek>;
using Qwen3MoeExpertStreamingTest = ExpertStreamingTest<kQwen3Moe>;
using GptOssExpertStreamingTest = ExpertStreamingTest<kGptOss>;

#define QUARK_EXPERT_STREAMING_TESTS(Fixture)                                                                 \
  TEST_F(Fixture, Fp8ExportAndPerplexitiesEqualTheWholeLayers) { ExpectSameBytesForEveryGroupSize("fp8"); } \
  TEST_F(Fixture, Uint4ExportAndPerplexitiesEqualTheWholeLayers) {                                        \
    ExpectSameBytesForEveryGroupSize("uint4_wo_32");                                                       \
  }                                                                                                         \
  TEST_F(Fixture, Nvfp4ExportAndPerplexitiesEqualTheWholeLayers) { ExpectSameBytesForEveryGroupSize("nvfp4"); } \
  TEST_F(Fixture, AtMostGExpertsAreEverInMemory) { ExpectAtMostGExpertsAlive(); }                           \
  TEST_F(Fixture, EachExpertLoadsOncePerPassForAllSamples) { ExpectEachExpertLoadedOncePerPass(); }         \
  TEST_F(Fixture, GptqExportAndPerplexitiesEqualTheWholeLayers) {                                         \
    ExpectSameBytesForEveryGroupSize("uint4_wo_32", /*gptq=*/true);                                         \
  }                                                                                                         \
  TEST_F(Fixture, GptqHoldsAtMostGExperts) { ExpectAtMostGExpertsAlive(/*gptq=*/true); }                    \
  TEST_F(Fixture, OtherAlgorithmsAreRefused) { ExpectAlgorithmsRefused(); }

QUARK_EXPERT_STREAMING_TESTS(Llama4ExpertStreamingTest)
QUARK_EXPERT_STREAMING_TESTS(DeepseekExpertStreamingTest)
QUARK_EXPERT_STREAMING_TESTS(Qwen3MoeExpertStreamingTest)
QUARK_EXPERT_STREAMING_TESTS(GptOssExpertStreamingTest)

}  // namespace
}  // namespace quark::quantize

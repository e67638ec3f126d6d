// #35 item 4: the rotation's r4 (SpinQuant's R4: an online Hadamard on each down_proj's input, W H / sqrt(n) offline)
// end to end: the float forward with r4 is the float model; decoder layers see through the Hadamard; the
// compressed-tensors export carries transform_config and the per-module matrices as compressed-tensors writes them,
// reads back to the quantized model's perplexity and passes the checker (which catches a broken transform); the
// other exports, widths without a Hadamard matrix and smoothing pairs through the Hadamard are refused by name.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/algorithms/hadamard.h"
#include "core/algorithms/rotation.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/presets.h"
#include "core/export/ct_checker.h"
#include "core/export/ct_source.h"
#include "core/export/ct_transform.h"
#include "core/quantize/quantize_model.h"
#include "core/runtime/layer_streamer.h"
#include "core/runtime/online_hadamard_linear.h"
#include "core/runtime/tensor_view.h"
#include "core/runtime/tokenizer.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<runtime::CheckpointWeightSource> Weights(const std::string& dir) {
  auto reader = checkpoint::CheckpointReader::Open(dir);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return std::make_shared<runtime::CheckpointWeightSource>(
      std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
}

// The logits of `samples` (one window of held-out text) through `streamer` with `hooks`.
at::Tensor Logits(runtime::LayerStreamer& streamer, const at::Tensor& ids, const runtime::LayerHooks& hooks) {
  auto hidden = streamer.Run({ids}, hooks);
  EXPECT_TRUE(hidden.ok()) << hidden.status();
  if (!hidden.ok()) return at::Tensor();
  auto logits = streamer.model().Logits((*hidden)[0]);
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : at::Tensor();
}

at::Tensor HeldOutWindow(const std::string& dir, int64_t length) {
  auto model = checkpoint::LoadModelConfig(dir);
  EXPECT_TRUE(model.ok());
  auto tokenizer = runtime::Tokenizer::Open(dir, model->bos_token_id, model->eos_token_id);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto text = runtime::ReadTextFile(testing::SmallEvalText(4000));
  EXPECT_TRUE(text.ok());
  auto ids = (*tokenizer)->EncodeWithBos(*text);
  EXPECT_TRUE(ids.ok());
  std::vector<int64_t> window(ids->begin(), ids->begin() + length);
  return at::tensor(window, at::kLong);
}

TEST(OnlineR4Test, ForwardWithR4IsTheFloatModel) {
  const std::string dir = testing::FixturePath("tinyllama-a");  // MLP width 768 = 12 * 64 (Paley I base)
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok());
  auto original = runtime::LayerStreamer::Open(dir);
  ASSERT_TRUE(original.ok()) << original.status();
  algorithms::RotationOptions options;
  options.r4 = true;
  auto rotated = algorithms::RotatedWeightSource::Create(Weights(dir), *model, options, "algo_config[0]");
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  ASSERT_TRUE((*rotated)->r4().defined());
  EXPECT_EQ((*rotated)->r4().sizes(), (std::vector<int64_t>{768, 768}));
  auto streamer = runtime::LayerStreamer::Create((*rotated)->model(), *rotated);
  ASSERT_TRUE(streamer.ok()) << streamer.status();
  runtime::LayerHooks online;
  int64_t wrapped = 0;
  online.before = [&](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    if (auto s = runtime::InstallOnlineHadamard(layer, "mlp.down_proj", (*rotated)->r4()); !s.ok()) return s;
    // The layer looks through the wrapper: the linear it lists is the inner FloatLinear, the wrapper stays.
    EXPECT_EQ(dynamic_cast<runtime::OnlineHadamardLinear*>(layer.FindLinear("mlp.down_proj").get()), nullptr);
    EXPECT_TRUE(runtime::OnlineHadamardOf(layer, "mlp.down_proj").defined());
    ++wrapped;
    return absl::OkStatus();
  };
  const at::Tensor ids = HeldOutWindow(dir, 96);
  const at::Tensor reference = Logits(**original, ids, {});
  const at::Tensor with_r4 = Logits(**streamer, ids, online);
  EXPECT_EQ(wrapped, model->num_hidden_layers);
  const double scale = reference.abs().max().item<double>();
  const double diff = (with_r4 - reference).abs().max().item<double>();
  // float32 through 4 layers and two rotations: the logits (|max| ~ scale) agree to a few float32 ulps of the scale.
  EXPECT_LT(diff, 1e-5 * scale) << "max |logit difference| " << diff << " (largest logit " << scale << ")";
  // The weights alone (W H, no online H) are another model: the online transform is what makes it exact.
  const at::Tensor weights_only = Logits(**streamer, ids, {});
  EXPECT_GT((weights_only - reference).abs().max().item<double>(), 1e-2 * scale);
}

TEST(OnlineR4Test, ReplacingTheInnerLinearKeepsTheHadamard) {
  const std::string dir = testing::FixturePath("tinyllama-a");
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok());
  algorithms::RotationOptions options;
  options.r4 = true;
  auto rotated = algorithms::RotatedWeightSource::Create(Weights(dir), *model, options, "algo_config[0]");
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  auto streamer = runtime::LayerStreamer::Create((*rotated)->model(), *rotated);
  ASSERT_TRUE(streamer.ok());
  runtime::LayerHooks hooks;
  hooks.before = [&](int64_t i, runtime::DecoderLayer& layer, const std::vector<at::Tensor>&) {
    if (i != 0) return absl::OkStatus();
    EXPECT_TRUE(runtime::InstallOnlineHadamard(layer, "mlp.down_proj", (*rotated)->r4()).ok());
    // Installing the same matrix again is a no-op; another matrix is refused.
    EXPECT_TRUE(runtime::InstallOnlineHadamard(layer, "mlp.down_proj", (*rotated)->r4()).ok());
    EXPECT_EQ(runtime::InstallOnlineHadamard(layer, "mlp.down_proj", -(*rotated)->r4()).code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(runtime::InstallOnlineHadamard(layer, "mlp.up_proj", (*rotated)->r4()).code(),
              absl::StatusCode::kInvalidArgument);  // up_proj's input is 256 wide
    const auto inner = layer.FindLinear("mlp.down_proj");
    auto replacement = std::make_shared<runtime::FloatLinear>(inner->weight().clone(), inner->bias());
    EXPECT_TRUE(layer.ReplaceLinear("mlp.down_proj", replacement).ok());
    EXPECT_EQ(layer.FindLinear("mlp.down_proj"), replacement);
    EXPECT_TRUE(runtime::OnlineHadamardOf(layer, "mlp.down_proj").defined());
    return absl::OkStatus();
  };
  ASSERT_TRUE((*streamer)->Run({HeldOutWindow(dir, 16)}, hooks).ok());
}

TEST(OnlineR4Test, WidthWithoutHadamardIsRefused) {
  testing::SyntheticLlamaOptions make;
  make.intermediate = 92;  // a multiple of 4 that no construction here reaches
  const std::string dir = testing::WriteSyntheticLlama(make);
  auto model = checkpoint::LoadModelConfig(dir);
  ASSERT_TRUE(model.ok());
  algorithms::RotationOptions options;
  options.r4 = true;
  options.random = true;  // no random fallback for R4: its matrix must be a Hadamard vLLM can load
  auto refused = algorithms::RotatedWeightSource::Create(Weights(dir), *model, options, "algo_config[0]");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("algo_config[0].r4 (R4, intermediate_size): no Hadamard matrix of order 92"));
}

QuantizeModelOptions R4Run(const std::string& preset, std::vector<AlgoConfig> algos) {
  QuantizeModelOptions o;
  o.config = *PresetConfig(preset);
  o.config.algo_config = std::move(algos);
  o.calibration_file = testing::SmallEvalText();
  o.num_calibration_samples = 4;
  o.seq_len = 64;
  o.eval_text_file = testing::SmallEvalText();
  o.eval_seq_len = 64;
  o.eval_max_windows = 2;
  return o;
}

RotationAlgo R4() {
  RotationAlgo r;
  r.r4 = true;
  return r;
}

void RewriteConfig(const std::string& dir, const std::function<void(nlohmann::json&)>& edit) {
  const std::string path = dir + "/config.json";
  nlohmann::json config = nlohmann::json::parse(std::ifstream(path));
  edit(config);
  std::ofstream(path) << config.dump(2);
}

// GPTQ after R1 + R4 (its Hessian is of the rotated inputs x H): the compressed-tensors export reads back exactly.
TEST(OnlineR4PipelineTest, GptqAfterR4ReadsBackExactly) {
  QuantizeModelOptions o = R4Run("uint4_wo_128", {R4(), GptqAlgo{}});
  o.export_formats = {"compressed_tensors"};
  o.output_dir = testing::TempPath("online_r4_gptq");
  auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_TRUE(report.ok()) << report.status();
  const double after = report->metrics.at("ppl_after");
  EXPECT_NEAR(report->metrics.at("ppl_compressed_tensors"), after, 1e-6 * after);
  EXPECT_LT(after, 1.2 * report->metrics.at("ppl_before"));
}

// W4A4 (mxfp4: down_proj's input quantizer sees x H) with R1 + R4, exported as compressed-tensors. (Not nvfp4: its
// compressed-tensors read-back is 5e-4 off the quantized perplexity with or without R4, ct_source.h's divisor note.)
TEST(OnlineR4PipelineTest, CompressedTensorsExportCarriesTheTransformAndReadsBack) {
  QuantizeModelOptions o = R4Run("mxfp4", {R4()});
  o.export_formats = {"compressed_tensors"};
  o.output_dir = testing::TempPath("online_r4_ct");
  const std::string dir = testing::FixturePath("tinyllama-a");
  auto report = QuantizeModel(dir, o);
  ASSERT_TRUE(report.ok()) << report.status();
  const double after = report->metrics.at("ppl_after");
  EXPECT_NEAR(report->metrics.at("ppl_compressed_tensors"), after, 1e-6 * after);
  EXPECT_LT(after, 1.5 * report->metrics.at("ppl_before"));  // a working model, not a scrambled one

  const nlohmann::json config = nlohmann::json::parse(std::ifstream(o.output_dir + "/config.json"));
  const nlohmann::json& transform = config.at("quantization_config").at("transform_config");
  EXPECT_EQ(transform, exporter::CtR4TransformConfig()) << transform.dump(2);
  EXPECT_EQ(transform.dump(), R"({"config_groups":{"R4":{"apply":[{"ignore":[],"inverse":false,"location":"input",)"
                              R"("targets":["re:.*mlp.down_proj$"]},{"ignore":[],"inverse":true,"location":)"
                              R"("weight_input","targets":["re:.*mlp.down_proj$"]}],"head_dim":null,"precision":)"
                              R"("torch.float32","randomize":false,"requires_grad":false,"type":"random-hadamard"}}})");
  auto reader = checkpoint::CheckpointReader::Open(o.output_dir);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto h = algorithms::HadamardMatrix(768);
  ASSERT_TRUE(h.ok());
  // One shared matrix, stored under the first down_proj (the library's save keeps tied transform weights once).
  auto ref = (*reader)->Get("model.layers.0.mlp.down_proj.R4_input.weight");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->info->dtype, checkpoint::StDType::kF32);
  auto stored = runtime::ViewTensor(*ref);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(at::equal(*stored, h->to(at::kFloat)));
  for (int64_t i = 1; i < 4; ++i) EXPECT_FALSE((*reader)->Has(StrCat("model.layers.", i, ".mlp.down_proj.R4_input.weight")));
  EXPECT_FALSE((*reader)->Has("model.layers.0.mlp.up_proj.R4_input.weight"));
  EXPECT_TRUE(exporter::CheckCompressedTensorsExport(o.output_dir).ok());

  // The checker holds the export to vLLM's rules: "hadamard" (hadacore, Sylvester) cannot be 768 wide, and an
  // attention transform (R3's q_attn) is not implemented there.
  RewriteConfig(o.output_dir, [](nlohmann::json& c) {
    c["quantization_config"]["transform_config"]["config_groups"]["R4"]["type"] = "hadamard";
  });
  const absl::Status hadacore = exporter::CheckCompressedTensorsExport(o.output_dir);
  EXPECT_THAT(hadacore.message(), HasSubstr("model.layers.0.mlp.down_proj: transform R4 is type \"hadamard\""));
  RewriteConfig(o.output_dir, [](nlohmann::json& c) {
    auto& scheme = c["quantization_config"]["transform_config"]["config_groups"]["R4"];
    scheme["type"] = "random-hadamard";
    scheme["apply"][0]["location"] = "q_attn";
  });
  EXPECT_THAT(exporter::CheckCompressedTensorsExport(o.output_dir).message(),
              HasSubstr("transform_config.config_groups.R4.apply[0].location: q_attn"));
}

TEST(OnlineR4PipelineTest, ExportsWithoutAnOnlineTransformAreRefusedByName) {
  for (const std::string format : {"hf_quark", "gguf", "onnx"}) {
    QuantizeModelOptions o = R4Run("uint4_wo_128", {R4()});
    o.export_formats = {"compressed_tensors", format};
    o.output_dir = testing::TempPath("online_r4_refused");
    auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
    ASSERT_FALSE(report.ok()) << format;
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument) << report.status();
    EXPECT_THAT(report.status().message(),
                HasSubstr("export_formats[1]: " + format + " cannot carry the rotation's r4"));
  }
}

TEST(OnlineR4PipelineTest, SmoothingThroughTheHadamardIsRefused) {
  QuantizeModelOptions o = R4Run("uint4_wo_128", {R4(), AwqAlgo{}});
  auto report = QuantizeModel(testing::FixturePath("tinyllama-a"), o);
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(), HasSubstr("mlp.down_proj cannot be smoothed under the rotation's r4"));
}

// compressed-tensors' own transform classes as the peer (tests/peers/compressed_tensors/ct_transform.py in the trixie
// chroot): the library validates our transform_config and serialises it back identically, hangs its transforms on
// Linears of the same names, loads the export's stored matrix, and its down_proj output on a fixed input equals the
// engine's (the export read back by CtWeightSource, behind OnlineHadamardLinear).
TEST(OnlineR4PeerTest, TheLibrarysTransformGivesTheEnginesDownProjOutput) {
  QuantizeModelOptions o = R4Run("uint4_wo_128", {R4()});
  o.export_formats = {"compressed_tensors"};
  o.output_dir = testing::TempPath("online_r4_peer");
  ASSERT_TRUE(QuantizeModel(testing::FixturePath("tinyllama-a"), o).ok());
  auto source = exporter::CtWeightSource::Open(o.output_dir);
  ASSERT_TRUE(source.ok()) << source.status();
  at::manual_seed(5);
  const at::Tensor x = at::randn({6, 768});
  const std::vector<std::string> modules = {"model.layers.0.mlp.down_proj", "model.layers.3.mlp.down_proj"};
  std::vector<checkpoint::PlannedTensor> plan = {{"input", checkpoint::StDType::kF32, {6, 768}}};
  std::map<std::string, at::Tensor> weights, ours;
  for (const std::string& m : modules) {
    auto w = (*source)->Get(m + ".weight", at::kFloat);
    auto h = (*source)->InputTransform(m);
    ASSERT_TRUE(w.ok() && h.ok() && h->defined()) << m;
    weights[m] = w->contiguous();
    runtime::OnlineHadamardLinear linear(std::make_shared<runtime::FloatLinear>(weights[m], at::Tensor()), *h);
    ours[m] = linear.forward(x);
    plan.push_back({m + ".weight", checkpoint::StDType::kF32, w->sizes().vec()});
  }
  const std::string in_dir = testing::TempPath("online_r4_peer_in");
  auto writer = checkpoint::CheckpointWriter::Create(in_dir, plan);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const auto write = [&](const std::string& name, const at::Tensor& t) {
    ASSERT_TRUE((*writer)->Write(name, std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes())).ok());
  };
  write("input", x);
  for (const std::string& m : modules) write(m + ".weight", weights[m]);
  ASSERT_TRUE((*writer)->Finish().ok());
  const std::string in_file = in_dir + "/" + (*writer)->ShardFileNames().at(0);

  const std::string out = testing::TempPath("online_r4_peer_out") + ".safetensors";
  const char* source_dir = std::getenv("QUARK_SOURCE_DIR");
  const std::string cmd = StrCat("bash ", source_dir ? source_dir : ".", "/tests/peers/compressed_tensors/run_peer.sh ",
                                 o.output_dir, " ", out, " ct_transform.py ", in_file);
  std::string text;
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) text.append(buffer, n);
  const int status = pclose(pipe);
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc == 77) {
    GTEST_SKIP() << "compressed-tensors peer not provisioned on this machine (its source is on PyPI/GitHub only; "
                    "tests/peers/compressed_tensors/run_peer.sh says what is missing)";
  }
  ASSERT_EQ(rc, 0) << text;
  const auto report = nlohmann::json::parse(text.substr(text.rfind("{\"library_version\"")), nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << text;
  EXPECT_EQ(report["config_equal"], true) << report["library_config"].dump(2);
  EXPECT_EQ(report["modules"], 2);
  EXPECT_EQ(report["loaded"], nlohmann::json::array({"model.layers.0.mlp.down_proj.R4_input.weight"}));
  EXPECT_EQ(report["transforms"], nlohmann::json::array({"HadamardTransform"}));
  auto peer = checkpoint::CheckpointReader::OpenFile(out);
  ASSERT_TRUE(peer.ok()) << peer.status();
  for (const std::string& m : modules) {
    auto ref = (*peer)->Get(m + ".output");
    ASSERT_TRUE(ref.ok()) << m;
    auto view = runtime::ViewTensor(*ref);
    ASSERT_TRUE(view.ok()) << m;
    const at::Tensor theirs = view->to(at::kFloat);
    const double scale = ours[m].abs().max().item<double>();
    EXPECT_LT((theirs - ours[m]).abs().max().item<double>(), 1e-5 * scale) << m;
  }
}

}  // namespace
}  // namespace quark

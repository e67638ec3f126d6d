// core/estimate against measured runs: synthetic Llama checkpoints (random bf16 weights written with the
// CheckpointWriter) quantized by the real `quark quantize` in a child process; the export's bytes on disk and the
// child's peak RSS (wait4) are compared with the estimate. Times are not asserted (they depend on the machine's
// load); bench/quantize and docs/results.md compare them.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/estimate/job_estimate.h"
#include "core/export/gguf_file.h"
#include "tests/estimate/synthetic_model.h"

extern char** environ;

namespace quark::estimate {
namespace {

namespace fs = std::filesystem;

std::string Binary() {
  const char* dir = std::getenv("QUARK_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/core/cli/quark";
}

std::string TempDir(const std::string& stem) {
  return (fs::temp_directory_path() / (stem + "_" + std::to_string(getpid()) + "_" + std::to_string(rand()))).string();
}

std::string WriteModel(int64_t hidden, int64_t intermediate, int64_t layers) {
  const std::string dir = TempDir("estimate_model");
  testing::WriteBf16Llama(dir, hidden, intermediate, layers);
  return dir;
}

struct ChildRun {
  int exit_code = -1;
  uint64_t peak_rss_bytes = 0;
};

// Token ids (".ids": one sample per line) in `dir` for runs that calibrate; the synthetic models have no tokenizer.
std::string CalibrationIds(const std::string& dir) {
  fs::create_directories(dir);
  const std::string path = dir + "/calib.ids";
  std::ofstream out(path);
  for (int sample = 0; sample < 4; ++sample) {
    for (int t = 0; t < 64; ++t) out << (t ? " " : "") << 3 + (sample * 131 + t * 17) % 500;
    out << "\n";
  }
  return path;
}

ChildRun RunQuark(std::vector<std::string> args) {
  args.insert(args.begin(), Binary());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ChildRun run;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return run;
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  return run;
}

uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) total += e.is_regular_file() ? e.file_size() : 0;
  return total;
}

JobInputs Job(const std::string& preset, bool gptq) {
  JobInputs job;
  job.config = *PresetConfig(preset);
  if (gptq) job.config.algo_config.push_back(GptqAlgo{});
  job.calibration_samples = 2;
  job.calibration_seq_len = 32;
  return job;
}

// The seconds of `name` in an estimate (a failure and 0 when the estimate failed or has no such phase).
double PhaseSeconds(const absl::StatusOr<JobEstimate>& e, const std::string& name) {
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return 0.0;
  for (const auto& p : e->phases) {
    if (p.phase == name) return p.seconds;
  }
  ADD_FAILURE() << "no " << name << " phase";
  return 0.0;
}

class EstimateTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    for (const std::string& dir : cleanup_) fs::remove_all(dir, ec);
  }
  std::string Track(std::string dir) {
    cleanup_.push_back(dir);
    return dir;
  }
  // A model a GGUF export takes: GGUF carries the SentencePiece vocabulary, the stories260K tokenizer (512 pieces, the
  // synthetic models' vocab size).
  std::string GgufModel() {
    const std::string model_dir = Track(WriteModel(256, 768, 2));
    const char* shared = std::getenv("QUARK_SHARED_DIR");
    fs::copy_file(std::string(shared ? shared : "/work/shared") + "/fixtures/stories260K/tokenizer.model",
                  model_dir + "/tokenizer.model");
    return model_dir;
  }
  std::vector<std::string> cleanup_;
};

TEST(LayerIndexTest, ReadsTheDecoderLayer) {
  EXPECT_EQ(LayerIndex("model.layers.12.mlp.up_proj.weight"), 12);
  EXPECT_EQ(LayerIndex("model.decoder.layers.0.fc1"), 0);
  EXPECT_EQ(LayerIndex("model.embed_tokens.weight"), -1);
  EXPECT_EQ(LayerIndex("lm_head"), -1);
  EXPECT_EQ(LayerIndex("model.layers.x"), -1);
}

TEST(HfQuarkLinearBytesTest, CountsCodesScalesAndZeroPoints) {
  // uint4 per group of 128 on [256, 512]: codes 256*512/2, f16 scales 256*4*2, int32-packed zeros 256*4/2.
  EXPECT_EQ(HfQuarkLinearBytes(PresetConfig("uint4_wo_128")->global_quant_config, 256, 512, false,
                               checkpoint::StDType::kBF16),
            65536u + 2048u + 512u);
  // fp8 per tensor with a static per-tensor input: codes + weight scale + input scale (no zero points).
  EXPECT_EQ(HfQuarkLinearBytes(PresetConfig("fp8")->global_quant_config, 256, 512, false, checkpoint::StDType::kBF16),
            131072u + 4u + 4u);
  // int8 per tensor, static int8 input: + int8 zero points of weight and input.
  EXPECT_EQ(HfQuarkLinearBytes(PresetConfig("int8")->global_quant_config, 256, 512, true, checkpoint::StDType::kBF16),
            131072u + 5u + 5u + 512u);
  // #30 E8M0 tiles: fp8 codes + one byte per [32, 32] / [128, 128] tile (dynamic inputs: nothing more).
  EXPECT_EQ(HfQuarkLinearBytes(PresetConfig("mxfp8_2d")->global_quant_config, 256, 512, false,
                               checkpoint::StDType::kBF16),
            131072u + 8u * 16u);
  EXPECT_EQ(HfQuarkLinearBytes(PresetConfig("fp8_block_e8m0")->global_quant_config, 256, 512, false,
                               checkpoint::StDType::kBF16),
            131072u + 2u * 4u);
  // #30 per-channel uint4: codes + F32 scale per channel + zero points eight per int32 (as Quark packs them).
  EXPECT_EQ(HfQuarkLinearBytes(PresetConfig("uint4_wo_per_channel")->global_quant_config, 256, 512, false,
                               checkpoint::StDType::kBF16),
            65536u + 256u * 4u + 256u / 2u);
}

TEST(EstimateJobTest, RefusesRatesThatAreNotPositive) {
  ModelShape model;
  Throughput rates = ReferenceThroughput();
  rates.gemm_flops = 0;
  absl::StatusOr<JobEstimate> e = EstimateJob(model, Job("uint4_wo_128", false), rates);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("throughput.gemm"), std::string::npos) << e.status();
}

// Float formats (fp8 here) take one more pass over their weights at the probe's fp8-codes rate (the engine's codes
// for them come from a scalar path); integer formats do not.
TEST_F(EstimateTest, FloatFormatsPayTheirCodesPass) {
  absl::StatusOr<ModelShape> model = ReadModelShape(Track(WriteModel(256, 768, 2)));
  ASSERT_TRUE(model.ok()) << model.status();
  const auto export_seconds = [&](const std::string& preset, double float_codes_rate) {
    Throughput rates = ReferenceThroughput();
    rates.float_codes_bytes_per_s = float_codes_rate;
    return PhaseSeconds(EstimateJob(*model, Job(preset, false), rates), "quantize_export");
  };
  const double linear_f32_bytes = 4.0 * 2 * (4 * 256 * 256 + 3 * 256 * 768);
  EXPECT_NEAR(export_seconds("fp8", 1e8) - export_seconds("fp8", 0), linear_f32_bytes / 1e8, 1e-9);
  EXPECT_DOUBLE_EQ(export_seconds("uint4_wo_128", 1e8), export_seconds("uint4_wo_128", 0));
}

// The calibration tokens cross each layer as often as the pipeline runs them: once in the quantized forward whose
// outputs feed the next layer, once more before it when activations are observed (fp8's static inputs), and once in
// GPTQ's capture of the Hessians' inputs. (On the H200 one forward charged for fp8 was 2.5x below the measured time.)
// GPTQ's captures on WriteModel(256, 768, 2) over samples x 32 tokens (capture_cost.h): q/k/v's input costs nothing,
// o_proj's the three projections and the attention, gate/up's also o_proj, down_proj's also gate and up; two layers.
double CaptureSeconds(int samples, const Throughput& rates) {
  const double tokens = samples * 32.0, attention = 4.0 * 32 * 32 * 256 * samples;
  const double qkv = 2.0 * tokens * 3 * 256 * 256, o = 2.0 * tokens * 256 * 256, gate_up = 2.0 * tokens * 2 * 768 * 256;
  return 2 * ((qkv + attention) + (qkv + o + attention) + (qkv + o + gate_up + attention)) / rates.gemm_flops;
}

TEST_F(EstimateTest, CalibrationChargesEveryForwardThePipelineRuns) {
  absl::StatusOr<ModelShape> model = ReadModelShape(Track(WriteModel(256, 768, 2)));
  ASSERT_TRUE(model.ok()) << model.status();
  const Throughput rates = ReferenceThroughput();
  const auto phase = [&](const JobInputs& job, const std::string& name) {
    return PhaseSeconds(EstimateJob(*model, job, rates), name);
  };
  // One forward of both layers over samples x 32 tokens: the linears, then the attention scores.
  const auto forward_seconds = [&](int samples) {
    const double linear_params = 2.0 * (4 * 256 * 256 + 3 * 256 * 768);
    return (2.0 * linear_params * samples * 32 + 4.0 * 32 * 32 * 256 * samples * 2) / rates.gemm_flops;
  };
  JobInputs fp8 = Job("fp8", false);
  EXPECT_NEAR(phase(fp8, "calibrate"), 2 * forward_seconds(2), 1e-12);
  JobInputs gptq2 = Job("uint4_wo_128", true);
  EXPECT_NEAR(phase(gptq2, "calibrate"), forward_seconds(2), 1e-12);
  // GPTQ's captures and its Hessians grow with the tokens; its factor and column loop do not.
  JobInputs gptq4 = gptq2;
  gptq4.calibration_samples = 4;
  const double hessians_per_token = 2.0 * 2 * (3 * 256 * 256 + 768 * 768) / rates.gemm_flops;  // qkv, o, gate_up, down
  EXPECT_NEAR(phase(gptq4, "gptq") - phase(gptq2, "gptq"),
              CaptureSeconds(4, rates) - CaptureSeconds(2, rates) + hessians_per_token * 2 * 32, 1e-9);
}

// On a GPU, GPTQ is launch-bound: integer, float and MXINT8 grids and W4A8's two stages run fused blocks
// (kGptqOpsPerFusedBlock launches a block of 128 columns); the legacy MX spelling without an element type runs the
// column loop (kGptqOpsPerColumn a column). Each op costs device_op_seconds.
TEST_F(EstimateTest, OnAGpuGptqPaysItsLaunchesPerFusedBlockOrPerColumn) {
  absl::StatusOr<ModelShape> model = ReadModelShape(Track(WriteModel(256, 768, 2)));
  ASSERT_TRUE(model.ok()) << model.status();
  // The launches' share of the GPTQ phase: the phase with each device op costing 1 s, less the phase without.
  const auto launch_seconds = [&](const JobInputs& job) {
    Throughput rates = ReferenceThroughput();
    rates.device_op_seconds = 0;
    const double without = PhaseSeconds(EstimateJob(*model, job, rates), "gptq");
    rates.device_op_seconds = 1.0;
    return PhaseSeconds(EstimateJob(*model, job, rates), "gptq") - without;
  };
  // Per layer: six linears read 256 columns (2 blocks each), down_proj 768 (6 blocks); two layers.
  const double blocks = 2.0 * (6 * 2 + 6);
  for (const char* fused : {"uint4_wo_128", "fp8", "nvfp4_weight_only", "mxfp4", "mxint8", "int4_fp8"}) {
    EXPECT_NEAR(launch_seconds(Job(fused, true)), blocks * kGptqOpsPerFusedBlock, 1e-6) << fused;
  }
  JobInputs legacy_mx = Job("mxfp4", true);
  legacy_mx.config.global_quant_config.weight->dtype = DType::kMx;
  legacy_mx.config.global_quant_config.weight->mx_element_dtype.reset();
  const double columns = 2.0 * (6 * 256 + 768);
  EXPECT_NEAR(launch_seconds(legacy_mx), columns * kGptqOpsPerColumn, 1e-6);
}

// GPTAQ and Qronos (algorithms/asymmetric_gptq.h) are GPTQ plus their asymmetric work: a second K x K statistic per
// input over the tokens, GPTAQ's products for P on the blocks of its triangles once per input and its second lazy
// GEMM (Qronos: the factor chain per weight rather than per input, and its re-solve), the float model's forward
// beside the quantized one; and in memory the second statistic, Qronos's third K x K matrix and the float stream's
// activations.
TEST_F(EstimateTest, GptaqAndQronosPayTheirAsymmetricWork) {
  absl::StatusOr<ModelShape> model = ReadModelShape(Track(WriteModel(256, 768, 2)));
  ASSERT_TRUE(model.ok()) << model.status();
  const Throughput rates = ReferenceThroughput();
  const JobInputs gptq = Job("uint4_wo_128", true);
  const absl::StatusOr<JobEstimate> base = EstimateJob(*model, gptq, rates);
  ASSERT_TRUE(base.ok()) << base.status();
  const double gptq_seconds = PhaseSeconds(base, "gptq");
  const double tokens = 2.0 * 32, cube = [] {
    // Per layer: six linears read 256 columns, down_proj 768; two layers.
    return 2.0 * (6 * 256.0 * 256 * 256 + 768.0 * 768 * 768);
  }();
  const double inputs_squared = 2.0 * (3 * 256.0 * 256 + 768.0 * 768);  // qkv, o, gate_up, down per layer
  const double forward = PhaseSeconds(base, "calibrate") * rates.gemm_flops;  // one forward of the layers
  const double per_input_chain = 1.35 * 2.0 * (3 * 256.0 * 256 * 256 + 768.0 * 768 * 768);
  // out x in x in over the linears: q, k, v, o (256 x 256), gate and up (768 x 256), down (256 x 768); two layers.
  const double nk2 = 2.0 * (4 * 256.0 * 256 * 256 + 2 * 768.0 * 256 * 256 + 256.0 * 768 * 768);
  const auto phase_bytes = [](const absl::StatusOr<JobEstimate>& e, const std::string& name) -> uint64_t {
    for (const auto& p : e->phases) {
      if (p.phase == name) return p.peak_host_bytes;
    }
    ADD_FAILURE() << "no " << name << " phase";
    return 0;
  };
  const uint64_t matrix = 4ull * 768 * 768;
  uint64_t held[2] = {0, 0};  // [gptaq]: the phase's peak
  for (HessianMethod method : {HessianMethod::kGptaq, HessianMethod::kQronos}) {
    const bool gptaq = method == HessianMethod::kGptaq;
    SCOPED_TRACE(gptaq ? "gptaq" : "qronos");
    JobInputs job = gptq;
    std::get<GptqAlgo>(job.config.algo_config[0]).method = method;
    const absl::StatusOr<JobEstimate> e = EstimateJob(*model, job, rates);
    ASSERT_TRUE(e.ok()) << e.status();
    // GPTAQ's P: Quark's two K^3 GEMMs where K = 256 fits one block of its triangular products; at down_proj's 768,
    // blocks [0, 512) and [512, 768): dXX L's block columns, then (I, J) = (0, 0), (0, 1), (1, 1) of T L^T.
    const double down_p = 2.0 * 512 * 768 * 512 + 2.0 * 768 * 256 * 256 + 2.0 * 512 * 512 * 512 +
                          2.0 * 512 * 768 * 256 + 2.0 * 256 * 256 * 256;
    const double gptaq_p = 2.0 * (3 * 4.0 * 256 * 256 * 256 + down_p);  // once per input: qkv, o, gate_up at 256
    // Qronos's re-solve: G A first where the weight has at least as many rows as inputs, the rows first (down_proj)
    // else.
    const double qronos_resolve = 2.0 * (4 * (2.0 * 256 * 255 * 255 + 2.0 * 256 * 256 * 255) +
                                         2 * (2.0 * 256 * 255 * 255 + 2.0 * 768 * 256 * 255) +
                                         (2.0 * 256 * 767 * 767 + 2.0 * 256 * 768 * 767));
    // The float stream: its captures beside the quantized stream's, and its forward for the next layer's inputs.
    const double extra_gemm = 2.0 * tokens * inputs_squared + CaptureSeconds(2, rates) * rates.gemm_flops + forward +
                              (gptaq ? gptaq_p + nk2 : qronos_resolve);
    const double extra_factor = gptaq ? 0 : 1.35 * cube - per_input_chain;  // Qronos: the chain per weight
    EXPECT_NEAR(PhaseSeconds(e, gptaq ? "gptaq" : "qronos") - gptq_seconds,
                extra_gemm / rates.gemm_flops + extra_factor / rates.cholesky_flops, 1e-9);
    // dXX or G beside H (down_proj's K = 768), Qronos's inverse as a third K x K matrix, and the float stream's
    // activations.
    held[gptaq] = phase_bytes(e, gptaq ? "gptaq" : "qronos");
    EXPECT_GE(held[gptaq], phase_bytes(base, "gptq") + (gptaq ? 1 : 2) * matrix);
  }
  EXPECT_EQ(held[false] - held[true], matrix);  // only Qronos holds the third matrix
}

// The hf_quark export of a real run has the estimated size up to the safetensors headers' JSON (< 1%).
TEST_F(EstimateTest, ArtifactBytesMatchTheExportWritten) {
  const std::string model_dir = Track(WriteModel(256, 768, 2));
  const std::string calib = CalibrationIds(Track(TempDir("estimate_calib")));
  absl::StatusOr<ModelShape> model = ReadModelShape(model_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->num_layers, 2);
  EXPECT_EQ(model->max_layer_params, 4 * 256 * 256 + 3 * 256 * 768 + 2 * 256);
  for (const std::string preset :
       {"uint4_wo_128", "fp8", "int8", "int4_wo_32", "mxfp4", "int4_fp8", "mxfp8_2d", "fp8_block_e8m0"}) {
    SCOPED_TRACE(preset);
    const std::string out = Track(TempDir("estimate_out"));
    ChildRun run = RunQuark({"quantize", "--model", model_dir, "--scheme", preset, "--output", out, "--calib",
                             calib, "--num-calib-samples", "2", "--seq-len", "16"});
    ASSERT_EQ(run.exit_code, 0);
    absl::StatusOr<JobEstimate> e = EstimateJob(*model, Job(preset, false), ReferenceThroughput());
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->artifacts.size(), 1u);
    const double measured = static_cast<double>(DirBytes(out));
    const double estimated = static_cast<double>(e->artifacts[0].bytes);
    EXPECT_NEAR(estimated / measured, 1.0, 0.01) << "estimated " << estimated << " measured " << measured;
  }
}

// compressed_tensors: the same packing density as hf_quark, without symmetric zero points, with weight_shape.
TEST_F(EstimateTest, CompressedTensorsBytesMatchTheExportWritten) {
  const std::string model_dir = Track(WriteModel(256, 768, 2));
  const std::string calib = CalibrationIds(Track(TempDir("estimate_calib")));
  absl::StatusOr<ModelShape> model = ReadModelShape(model_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  for (const std::string preset :
       {"uint4_wo_128", "int4_wo_32", "uint4_wo_per_channel", "fp8", "int8", "nvfp4", "mxfp4", "mxfp8"}) {
    SCOPED_TRACE(preset);
    const std::string out = Track(TempDir("estimate_ct"));
    ChildRun run = RunQuark({"quantize", "--model", model_dir, "--scheme", preset, "--export", "compressed_tensors",
                             "--output", out, "--calib", calib, "--num-calib-samples", "2", "--seq-len", "16"});
    ASSERT_EQ(run.exit_code, 0);
    JobInputs job = Job(preset, false);
    job.formats = {ExportKind::kCompressedTensors};
    absl::StatusOr<JobEstimate> e = EstimateJob(*model, job, ReferenceThroughput());
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->artifacts.size(), 1u);
    const double measured = static_cast<double>(DirBytes(out));
    const double estimated = static_cast<double>(e->artifacts[0].bytes);
    EXPECT_NEAR(estimated / measured, 1.0, 0.01) << "estimated " << estimated << " measured " << measured;
  }
}

// GGUF: quantized linears in their llama.cpp block type (Q4_1, Q4_0), the rest in its own dtype; the metadata
// (vocabulary, hyperparameters) is not counted, hence a looser bound.
TEST_F(EstimateTest, GgufBytesMatchTheExportWritten) {
  const std::string model_dir = GgufModel();
  absl::StatusOr<ModelShape> model = ReadModelShape(model_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  for (const std::string preset : {"uint4_wo_32", "int4_wo_32"}) {
    SCOPED_TRACE(preset);
    const std::string out = Track(TempDir("estimate_gguf"));
    ChildRun run = RunQuark({"quantize", "--model", model_dir, "--scheme", preset, "--export", "gguf", "--output", out});
    ASSERT_EQ(run.exit_code, 0);
    JobInputs job = Job(preset, false);
    job.formats = {ExportKind::kGguf};
    absl::StatusOr<JobEstimate> e = EstimateJob(*model, job, ReferenceThroughput());
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->artifacts.size(), 1u);
    const double measured = static_cast<double>(DirBytes(out));
    const double estimated = static_cast<double>(e->artifacts[0].bytes);
    EXPECT_NEAR(estimated / measured, 1.0, 0.03) << "estimated " << estimated << " measured " << measured;
  }
}

// K-quant files (#37): the float weights take llama-quantize's per-tensor mixture for the file type (or its default
// type everywhere with --pure), engine codes keep their block type. The estimate's tensor data is the writer's, byte
// for byte: the GGUF's data section (its size after the header) equals GgufArtifactSize's data_bytes.
TEST_F(EstimateTest, KQuantGgufDataIsTheWritersByteForByte) {
  const std::string model_dir = GgufModel();
  absl::StatusOr<ModelShape> model = ReadModelShape(model_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  struct Case {
    std::string preset;  // "" = no scheme: llama-quantize's rules for every weight
    std::string type;
    bool pure;
  };
  const Case cases[] = {{"", "Q4_K_M", false}, {"", "Q4_K_M", true}, {"", "Q2_K", false}, {"", "Q3_K_S", false},
                        {"", "Q5_K_M", false}, {"", "Q6_K", false},  {"", "IQ4_XS", false}, {"", "Q8_0", false},
                        {"uint4_wo_32", "Q4_K_M", false}, {"int4_wo_32", "Q6_K", true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.preset + " " + c.type + (c.pure ? " pure" : ""));
    const std::string out = Track(TempDir("estimate_kquant"));
    std::vector<std::string> args = {"quantize", "--model", model_dir, "--export", "gguf", "--gguf-type", c.type,
                                     "--output", out};
    if (!c.preset.empty()) args.insert(args.end(), {"--scheme", c.preset});
    if (c.pure) args.push_back("--gguf-pure");
    ASSERT_EQ(RunQuark(args).exit_code, 0);
    JobInputs job;
    if (!c.preset.empty()) job.config = *PresetConfig(c.preset);
    GgufArtifactOptions options;
    options.type = c.type;
    options.pure = c.pure;
    absl::StatusOr<GgufSize> size = GgufArtifactSize(*model, BuildLayerPlan(job.config, model->modules), options);
    ASSERT_TRUE(size.ok()) << size.status();
    absl::StatusOr<std::unique_ptr<exporter::gguf::GgufFile>> file = exporter::gguf::GgufFile::Open(out + "/model.gguf");
    ASSERT_TRUE(file.ok()) << file.status();
    const uint64_t measured = fs::file_size(out + "/model.gguf");
    EXPECT_EQ(size->data_bytes, measured - (*file)->data_offset());
    EXPECT_NEAR(static_cast<double>(size->data_bytes + size->header_bytes) / measured, 1.0, 0.03);
  }
  // What the writer refuses, the estimate refuses: a scheme of no GGUF block type, an unknown file type.
  GgufArtifactOptions options;
  options.type = "Q4_K_M";
  const absl::StatusOr<GgufSize> g128 =
      GgufArtifactSize(*model, BuildLayerPlan(*PresetConfig("uint4_wo_128"), model->modules), options);
  EXPECT_EQ(g128.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g128.status().message().find("cannot be held by GGUF"), std::string::npos) << g128.status();
  options.type = "Q4_K_X";
  EXPECT_EQ(GgufArtifactSize(*model, BuildLayerPlan(Config{}, model->modules), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Peak RSS of real runs: within 25% of the estimate, and GPTQ's extra memory (the Hessian, factored and permuted in
// its own memory, less the float32 copy GPTQ does not make) within 40% of the estimated extra, which a constant offset
// alone could not match. An 8192-wide MLP input makes that extra (a 256 MiB Hessian) large against the run-to-run
// noise of peak RSS; with a 4096-wide one it is about 20 MB.
TEST_F(EstimateTest, PeakMemoryMatchesMeasuredRuns) {
  const std::string model_dir = Track(WriteModel(1024, 8192, 1));
  const std::string calib = CalibrationIds(Track(TempDir("estimate_calib")));
  absl::StatusOr<ModelShape> model = ReadModelShape(model_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  // RTN, GPTQ, and GPTAQ (its second K x K statistic, a third matrix and the float stream beside GPTQ's).
  const std::vector<std::string> algos = {"", "gptq", "gptaq"};
  std::vector<uint64_t> measured, estimated;
  for (const std::string& algo : algos) {
    SCOPED_TRACE("uint4_wo_128" + (algo.empty() ? "" : "+" + algo));
    const std::string out = Track(TempDir("estimate_mem"));
    std::vector<std::string> args = {"quantize", "--model", model_dir, "--scheme", "uint4_wo_128", "--output", out,
                                     "--calib", calib, "--num-calib-samples", "2", "--seq-len", "32"};
    if (!algo.empty()) args.insert(args.end(), {"--quant-algo", algo});
    ChildRun run = RunQuark(args);
    ASSERT_EQ(run.exit_code, 0);
    JobInputs job = Job("uint4_wo_128", !algo.empty());
    if (algo == "gptaq") std::get<GptqAlgo>(job.config.algo_config[0]).method = HessianMethod::kGptaq;
    absl::StatusOr<JobEstimate> e = EstimateJob(*model, job, ReferenceThroughput());
    ASSERT_TRUE(e.ok()) << e.status();
    measured.push_back(run.peak_rss_bytes);
    estimated.push_back(e->peak_host_bytes);
    EXPECT_NEAR(static_cast<double>(estimated.back()) / measured.back(), 1.0, 0.25)
        << "estimated " << estimated.back() << " measured " << measured.back();
  }
  for (size_t i = 1; i < algos.size(); ++i) {
    const double measured_extra = static_cast<double>(measured[i]) - measured[0];
    const double estimated_extra = static_cast<double>(estimated[i]) - estimated[0];
    ASSERT_GT(measured_extra, 0) << algos[i];
    EXPECT_NEAR(estimated_extra / measured_extra, 1.0, 0.4)
        << algos[i] << " extra: estimated " << estimated_extra << " measured " << measured_extra;
  }
}

}  // namespace
}  // namespace quark::estimate

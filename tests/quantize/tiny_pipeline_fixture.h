// The fixture of a family's pipeline test: `quark make-model --arch ARCH --shape tiny --dtype f32 --seed 21` with
// stories260K's tokenizer (512 pieces), made once per suite; QuantizeModelOptions on the TinyStories text (2 windows of
// 64 evaluated, 4 calibration samples of 32, every expert topped up to 4 tokens), each run's output folder removed
// after its test; the GPTQ-versus-RTN run every family's test makes.
#pragma once

#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/config/presets.h"
#include "core/export/hf_quark_checker.h"
#include "core/quantize/quantize_model.h"
#include "tests/quantize/tiny_family_model.h"
#include "tests/runtime/test_paths.h"

namespace quark::quantize::testing {

template <const char* kArch>
class TinyPipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runtime::testing::InitTestEngine();
    dir_ = new std::string(Temp("").string());
    ASSERT_TRUE(quark::testing::MakeTinyFamilyModel(kArch, *dir_).ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void TearDown() override {
    for (const std::string& out : outputs_) std::filesystem::remove_all(out);
  }

  QuantizeModelOptions Options(const std::string& preset, const std::string& name) {
    QuantizeModelOptions o;
    o.config = PresetConfig(preset).value();
    o.eval_text_file = runtime::testing::TinyStoriesText();
    o.eval_seq_len = 64;
    o.eval_max_windows = 2;
    o.num_calibration_samples = 4;
    o.seq_len = 32;
    o.moe_min_expert_tokens = 4;
    o.output_dir = Temp(name).string();
    std::filesystem::remove_all(o.output_dir);
    outputs_.push_back(o.output_dir);
    return o;
  }

  // uint4_wo_32 RTN (no export) and the same with GPTQ (the family's template; 8 calibration samples of TinyStories,
  // exported and checked): GPTQ's perplexity is closer to the float model's, and its export reloads to it.
  void ExpectGptqBeatsRtn() {
    QuantizeModelOptions rtn = Options("uint4_wo_32", "rtn");
    rtn.output_dir.clear();
    auto rtn_report = QuantizeModel(*dir_, rtn);
    ASSERT_TRUE(rtn_report.ok()) << rtn_report.status();
    QuantizeModelOptions gptq = Options("uint4_wo_32", "gptq");
    gptq.config.algo_config.push_back(GptqAlgo{});
    gptq.calibration_file = runtime::testing::TinyStoriesText();
    gptq.num_calibration_samples = 8;
    auto gptq_report = QuantizeModel(*dir_, gptq);
    ASSERT_TRUE(gptq_report.ok()) << gptq_report.status();
    auto check = exporter::CheckHfQuarkExport(gptq.output_dir);
    ASSERT_TRUE(check.ok()) << check;
    const double before = rtn_report->metrics.at("ppl_before");
    const double rtn_gap = std::abs(rtn_report->metrics.at("ppl_after") - before);
    const double gptq_gap = std::abs(gptq_report->metrics.at("ppl_after") - before);
    std::cout << "ppl before " << before << ", rtn " << rtn_report->metrics.at("ppl_after") << ", gptq "
              << gptq_report->metrics.at("ppl_after") << "\n";
    EXPECT_LT(gptq_gap, rtn_gap);
    EXPECT_NEAR(gptq_report->metrics.at("ppl_reloaded"), gptq_report->metrics.at("ppl_after"),
                1e-3 * gptq_report->metrics.at("ppl_after"));
  }

  // SmoothQuant, AWQ and rotation (a family without their templates) each refused naming algo_config[0].
  void ExpectScalingAndRotationRefused() {
    for (const auto& [preset, algo] : std::vector<std::pair<std::string, AlgoConfig>>{
             {"int8", SmoothQuantAlgo{}}, {"uint4_wo_32", AwqAlgo{}}, {"uint4_wo_32", RotationAlgo{}}}) {
      QuantizeModelOptions o = Options(preset, "refused");
      o.config.algo_config.push_back(algo);
      auto refused = QuantizeModel(*dir_, o);
      ASSERT_FALSE(refused.ok());
      EXPECT_NE(std::string(refused.status().message()).find("algo_config[0]"), std::string::npos) << refused.status();
    }
  }

  // "quark_ARCH_pipeline_NAME<pid>" in the temporary folder.
  static std::filesystem::path Temp(const std::string& name) {
    return std::filesystem::temp_directory_path() /
           (std::string("quark_") + kArch + "_pipeline_" + name + std::to_string(::getpid()));
  }

  static inline std::string* dir_ = nullptr;
  std::vector<std::string> outputs_;
};

}  // namespace quark::quantize::testing

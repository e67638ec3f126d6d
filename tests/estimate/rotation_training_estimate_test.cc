// #35: the estimator charges a trainable rotation entry its training (SpinQuant's Cayley SGD holds the whole float
// model and one step's graph, and runs max_steps forward and backward passes before the layers stream), with the
// same memory figure the trainer refuses to exceed (estimate::RotationTrainingBytes).
#include <gtest/gtest.h>

#include "core/config/presets.h"
#include "core/estimate/job_estimate.h"
#include "core/estimate/model_shape.h"
#include "core/estimate/rotation_training_cost.h"
#include "core/estimate/throughput.h"
#include "tests/estimate/find_phase.h"

namespace quark::estimate {
namespace {

using testing::Find;

JobInputs RotationJob(RotationAlgo rotation) {
  JobInputs job;
  job.config = *PresetConfig("uint4_wo_128");
  job.config.algo_config.push_back(rotation);
  job.calibration_samples = 8;
  job.calibration_seq_len = 128;
  return job;
}

TEST(RotationTrainingEstimateTest, ATrainableEntryAddsItsTrainingPhase) {
  absl::StatusOr<ModelShape> model = ReadModelShape(QUARK_TEST_SOURCE_DIR "/../shared/fixtures/tinyllama-a");
  ASSERT_TRUE(model.ok()) << model.status();
  const Throughput rates = ReferenceThroughput();
  auto hadamard = EstimateJob(*model, RotationJob(RotationAlgo{}), rates);
  ASSERT_TRUE(hadamard.ok()) << hadamard.status();
  EXPECT_EQ(Find(*hadamard, "rotation_training"), nullptr);
  ASSERT_NE(Find(*hadamard, "rotation"), nullptr);

  RotationAlgo trained;
  trained.trainable = true;
  trained.max_steps = 10;
  auto ten = EstimateJob(*model, RotationJob(trained), rates);
  ASSERT_TRUE(ten.ok()) << ten.status();
  const PhaseEstimate* training = Find(*ten, "rotation_training");
  ASSERT_NE(training, nullptr);
  // The trainer's own bound over the job's windows, held beside the process.
  EXPECT_EQ(training->peak_host_bytes,
            kProcessBaseBytes + static_cast<uint64_t>(RotationTrainingBytes(model->config, 128, 1)));
  EXPECT_GE(ten->peak_host_bytes, training->peak_host_bytes);
  EXPECT_DOUBLE_EQ(training->seconds, RotationTrainingFlops(model->config, 128, 1, 10, true) / rates.gemm_flops);
  EXPECT_NEAR(ten->total_seconds - hadamard->total_seconds, training->seconds, 1e-9 * ten->total_seconds);

  // Steps, windows a step and R2 each change the work.
  trained.max_steps = 20;
  auto twenty = EstimateJob(*model, RotationJob(trained), rates);
  ASSERT_TRUE(twenty.ok());
  EXPECT_NEAR(Find(*twenty, "rotation_training")->seconds, 2 * training->seconds, 1e-9 * training->seconds);
  trained.train_batch_size = 4;
  auto batched = EstimateJob(*model, RotationJob(trained), rates);
  ASSERT_TRUE(batched.ok());
  EXPECT_GT(Find(*batched, "rotation_training")->seconds, Find(*twenty, "rotation_training")->seconds);
  EXPECT_GT(Find(*batched, "rotation_training")->peak_host_bytes, training->peak_host_bytes);
  trained.r2 = false;
  auto r1_only = EstimateJob(*model, RotationJob(trained), rates);
  ASSERT_TRUE(r1_only.ok());
  EXPECT_LT(Find(*r1_only, "rotation_training")->seconds, Find(*batched, "rotation_training")->seconds);
}

TEST(RotationTrainingEstimateTest, FlopsFollowTheModelsShapes) {
  checkpoint::ModelConfig m;
  m.hidden_size = 4096;
  m.intermediate_size = 11008;
  m.num_hidden_layers = 32;
  m.num_attention_heads = 32;
  m.num_key_value_heads = 32;
  m.head_dim = 128;
  m.vocab_size = 32000;
  // One step, one window of 2048: the forward's 2 x params x tokens dominates, times three with the backward; the
  // rotation of every weight by R1 adds 2 x params x hidden each pass.
  const double params = 32.0 * (4096.0 * 4 * 4096 + 3 * 4096.0 * 11008) + 32000.0 * 4096;
  const double flops = RotationTrainingFlops(m, 2048, 1, 1, false);
  EXPECT_GT(flops, 3 * (2 * params * 2048 + 2 * params * 4096));
  EXPECT_LT(flops, 1.2 * 3 * (2 * params * 2048 + 2 * params * 4096));
  EXPECT_GT(RotationTrainingBytes(m, 2048, 1), int64_t{8} << 30);  // a 7B model is refused at the default budget
}

}  // namespace
}  // namespace quark::estimate

// learned_rotation_bench --model DIR --calib TEXT --scheme PRESET --output DIR [--samples 32] [--seq-len 256]
//                        [--steps 100] [--lr 1.5] [--batch 1] [--seed 0] [--train-r2] [--hadamard]
//
// #35 item 4: trains R1 (learned_rotation.h) on `--samples` windows of the calibration text for the scheme's weights
// (and inputs), folds it into the weights with RotatedWeightSource, exactly as the rotation algorithm folds its
// Hadamard R1, and writes the rotated float model (config.json with untied embeddings, the tokenizer files) to
// --output, so that `quark quantize --model OUTPUT --scheme PRESET` quantizes and exports it like any model.
// --train-r2 trains one R2 per layer beside R1 (SpinQuant's default); without it R2 stays Hadamard. --hadamard writes
// the Hadamard-folded model instead (no training). Prints one JSON line: the loss of the first and
// last steps, the mean loss of the first and last 10% of steps, train_s, the estimate of the held memory, and the
// process's peak RSS.
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/algorithms/learned_rotation.h"
#include "core/estimate/rotation_training_cost.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/config/presets.h"
#include "core/runtime/calibration_data.h"
#include "core/runtime/tensor_view.h"
#include "core/runtime/tokenizer.h"

namespace fs = std::filesystem;
using namespace quark;

namespace {

int Fail(const absl::Status& status) {
  std::cerr << "learned_rotation_bench: " << status << "\n";
  return 1;
}

// Every tensor of the rotated source (lm_head too when the original ties it), in float32, plus the folder's other
// files; config.json with tie_word_embeddings false.
absl::Status WriteFolded(const std::string& model_dir, const std::string& out_dir,
                         const algorithms::RotatedWeightSource& rotated) {
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> names = (*reader)->Names();
  if (!(*reader)->Has("lm_head.weight")) names.push_back("lm_head.weight");
  std::vector<checkpoint::PlannedTensor> plan;
  std::vector<at::Tensor> tensors;
  for (const std::string& name : names) {
    auto t = rotated.Get(name, at::kFloat);
    if (!t.ok()) return t.status();
    tensors.push_back(t->contiguous());
    plan.push_back({name, checkpoint::StDType::kF32, tensors.back().sizes().vec()});
  }
  auto writer = checkpoint::CheckpointWriter::Create(out_dir, plan);
  if (!writer.ok()) return writer.status();
  for (size_t i = 0; i < names.size(); ++i) {
    auto bytes = runtime::HostBytes(tensors[i], names[i]);
    if (!bytes.ok()) return bytes.status();
    if (auto s = (*writer)->Write(names[i], *bytes); !s.ok()) return s;
  }
  if (auto s = (*writer)->Finish(); !s.ok()) return s;
  for (const fs::directory_entry& e : fs::directory_iterator(model_dir)) {
    const std::string file = e.path().filename().string();
    if (!e.is_regular_file() || e.path().extension() == ".safetensors" || file == "model.safetensors.index.json") {
      continue;
    }
    if (file == "config.json") {
      std::ifstream in(e.path());
      nlohmann::ordered_json config = nlohmann::ordered_json::parse(in);
      config["tie_word_embeddings"] = false;
      config["torch_dtype"] = "float32";
      std::ofstream(fs::path(out_dir) / file) << config.dump(2);
      continue;
    }
    fs::copy_file(e.path(), fs::path(out_dir) / file);
  }
  return absl::OkStatus();
}

double MeanLoss(const std::vector<algorithms::RotationTrainingStep>& steps, size_t from, size_t to) {
  double sum = 0;
  for (size_t i = from; i < to; ++i) sum += steps[i].loss;
  return sum / static_cast<double>(to - from);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Train SpinQuant's R1 by Cayley SGD and write the model with it folded");
  std::string model_dir, calib, scheme_name, out_dir;
  int64_t samples = 32, seq_len = 256;
  algorithms::LearnedRotationOptions options;
  bool hadamard = false;
  app.add_option("--model", model_dir)->required();
  app.add_option("--calib", calib)->required();
  app.add_option("--scheme", scheme_name)->required();
  app.add_option("--output", out_dir)->required();
  app.add_option("--samples", samples);
  app.add_option("--seq-len", seq_len);
  app.add_option("--steps", options.max_steps);
  app.add_option("--lr", options.learning_rate);
  app.add_option("--batch", options.train_batch_size);
  app.add_option("--seed", options.seed);
  app.add_flag("--train-r2", options.train_r2, "train one R2 per layer beside R1");
  app.add_flag("--hadamard", hadamard, "write the Hadamard-folded model, no training");
  CLI11_PARSE(app, argc, argv);

  auto model = checkpoint::LoadModelConfig(model_dir);
  if (!model.ok()) return Fail(model.status());
  auto reader = checkpoint::CheckpointReader::Open(model_dir);
  if (!reader.ok()) return Fail(reader.status());
  auto base = std::make_shared<runtime::CheckpointWeightSource>(
      std::shared_ptr<const checkpoint::CheckpointReader>(*std::move(reader)));
  auto config = PresetConfig(scheme_name);
  if (!config.ok()) return Fail(config.status());
  const algorithms::RotationTrainingScheme scheme{config->global_quant_config.weight,
                                                  config->global_quant_config.input_tensors};
  nlohmann::ordered_json report;
  algorithms::RotationOptions fold;
  if (!hadamard) {
    auto tokenizer = runtime::Tokenizer::Open(model_dir, model->bos_token_id, model->eos_token_id);
    if (!tokenizer.ok()) return Fail(tokenizer.status());
    runtime::CalibrationOptions calibration;
    calibration.path = calib;
    calibration.num_samples = samples;
    calibration.seq_len = seq_len;
    calibration.seed = 42;
    auto set = runtime::LoadCalibrationSet(calibration, tokenizer->get());
    if (!set.ok()) return Fail(set.status());
    auto trainer = algorithms::RotationTrainingModel::Load(*base, *model, {}, seq_len, options, "learned_rotation");
    if (!trainer.ok()) return Fail(trainer.status());
    auto learned = algorithms::TrainRotation(**trainer, {}, set->samples, scheme, options, "learned_rotation");
    if (!learned.ok()) return Fail(learned.status());
    const auto& steps = learned->steps;
    const size_t tenth = std::max<size_t>(1, steps.size() / 10);
    report["steps"] = steps.size();
    report["first_loss"] = steps.front().loss;
    report["last_loss"] = steps.back().loss;
    report["first_10pct_loss"] = MeanLoss(steps, 0, tenth);
    report["last_10pct_loss"] = MeanLoss(steps, steps.size() - tenth, steps.size());
    report["train_s"] = learned->seconds;
    report["estimate_mib"] = estimate::RotationTrainingBytes(*model, seq_len, options.train_batch_size) >> 20;
    const at::Tensor& r = learned->r1;
    report["orthogonality_error"] = (at::matmul(r.t(), r) - at::eye(r.size(0), r.options())).abs().max().item<double>();
    fold.r1 = learned->r1;
    fold.r2_per_layer = learned->r2;
  }
  auto rotated = algorithms::RotatedWeightSource::Create(base, *model, fold, "learned_rotation");
  if (!rotated.ok()) return Fail(rotated.status());
  if (auto s = WriteFolded(model_dir, out_dir, **rotated); !s.ok()) return Fail(s);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  report["peak_rss_mib"] = usage.ru_maxrss / 1024;
  std::cout << report.dump() << "\n";
  return 0;
}

// quark sensitivity --model DIR --candidates uint4_wo_128,int8,fp8 --calib FILE [--num-calib-samples N]
//                   [--seq-len L] [--seed S] [--cache-dir DIR] [--output FILE.json]
// Per linear group of every decoder layer (q/k/v, o, gate/up, down) and per candidate scheme: the mean KLD from the
// float model (and the NLL increase) on the calibration samples when only that group is quantized, measured in one
// streamed pass per candidate (core/search/sensitivity.h). With --cache-dir the table is stored under its content
// key (model, samples, candidates) and a later run, or `quark quantize --auto --sensitivity-cache`, reuses it.
// Bad input: exit 2 naming the option.
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/cli/auto_search_options.h"
#include "core/cli/command_registry.h"
#include "core/search/sensitivity_cache.h"

namespace quark::cli {
namespace {

struct SensitivityCommandOptions {
  AutoSearchContext input;  // model, calibration
  std::string candidates;
  std::string cache_dir;
  std::string output;
};

int Fail(const absl::Status& status) {
  std::cerr << "quark sensitivity: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument || status.code() == absl::StatusCode::kNotFound
             ? kExitBadInput
             : kExitFailure;
}

void PrintTable(const search::SensitivityTable& t, bool from_cache) {
  std::cout << fmt::format("{:<40}", "group (mean KLD, nats)");
  for (const auto& p : t.passes) std::cout << fmt::format(" {:>14}", p.candidate);
  std::cout << "\n";
  for (size_t g = 0; g < t.groups.size(); ++g) {
    std::cout << fmt::format("{:<40}", t.groups[g].name);
    for (const auto& p : t.passes) std::cout << fmt::format(" {:>14.6g}", p.kld[g]);
    std::cout << "\n";
  }
  std::cout << fmt::format("{:<40}", from_cache ? "pass seconds (cached run)" : "pass seconds");
  for (const auto& p : t.passes) std::cout << fmt::format(" {:>14.2f}", p.seconds);
  std::cout << fmt::format("\nfloat NLL {:.6f} over {} tokens; key {}\n", t.float_nll, t.tokens,
                           t.key.empty() ? "-" : t.key);
}

int RunSensitivity(const SensitivityCommandOptions& o) {
  const search::AutoQuantizeOptions options = EngineSearchOptions(o.candidates, o.cache_dir, o.input);
  auto candidates = search::ResolveCandidates(options.candidates, "--candidates");
  if (!candidates.ok()) return Fail(candidates.status());
  const std::string& model = o.input.model;
  auto samples = search::AutoCalibrationSamples(model, options);
  if (!samples.ok()) return Fail(samples.status());
  auto streamer = runtime::LayerStreamer::Open(model);
  if (!streamer.ok()) return Fail(absl::InvalidArgumentError("--model: " + std::string(streamer.status().message())));
  bool from_cache = false;
  auto table = search::LoadOrMeasureSensitivity(model, **streamer, *samples, *candidates, options, &from_cache);
  if (!table.ok()) return Fail(table.status());
  PrintTable(*table, from_cache);
  if (!o.output.empty()) {
    std::ofstream out(o.output);
    out << search::SensitivityToJson(*table).dump(1) << "\n";
    if (!out) return Fail(absl::InternalError("--output: cannot write " + o.output));
  }
  return kExitOk;
}

const CommandRegistration kSensitivity([](CLI::App& app) {
  auto o = std::make_shared<SensitivityCommandOptions>();
  auto* command = app.add_subcommand("sensitivity", "per-group sensitivity of a model to candidate schemes (KLD)");
  command->add_option("--model", o->input.model, "the float HF model folder")->required();
  command->add_option("--candidates", o->candidates, "schemes, e.g. uint4_wo_128,int8,fp8")->required();
  command->add_option("--calib", o->input.calib, "calibration text / JSONL (\"text\") / token-id file")->required();
  command->add_option("--num-calib-samples", o->input.num_samples, "calibration samples (default 16)")
      ->check(CLI::PositiveNumber);
  command->add_option("--seq-len", o->input.seq_len, "sample length in tokens (default 256)")->check(CLI::PositiveNumber);
  command->add_option("--seed", o->input.seed, "seed of the calibration windows");
  command->add_option("--cache-dir", o->cache_dir, "reuse / store the table here under its content key");
  command->add_option("--output", o->output, "write the table as JSON");
  command->callback([o] { SetExitCode(RunSensitivity(*o)); });
});

}  // namespace
}  // namespace quark::cli

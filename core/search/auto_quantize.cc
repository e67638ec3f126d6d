#include "core/search/auto_quantize.h"

#include <chrono>
#include <cmath>

#include "core/base/strings.h"
#include "core/config/layer_plan.h"
#include "core/config/quark_json.h"
#include "core/estimate/model_shape.h"
#include "core/quantize/calibration_input.h"
#include "core/quantize/layer_quantizer.h"
#include "core/search/sensitivity_cache.h"

namespace quark::search {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::vector<ModuleInfo> LinearsOf(const runtime::DecoderLayer& layer) {
  std::vector<ModuleInfo> modules;
  for (const runtime::NamedLinear& l : layer.NamedLinears()) {
    modules.push_back({l.name, "Linear", {l.linear->out_features(), l.linear->in_features()}});
  }
  return modules;
}

bool Meets(const Budget& budget, const Recipe& recipe, const NextTokenReference::Loss& measured) {
  switch (budget.kind) {
    case BudgetKind::kTargetBits:
      return recipe.bits_per_weight <= budget.value;
    case BudgetKind::kMaxKld:
      return measured.kld <= budget.value;
    case BudgetKind::kMaxPplIncrease:
      return std::expm1(measured.nll_increase) <= budget.value;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::vector<at::Tensor>> AutoCalibrationSamples(const std::string& model_dir,
                                                               const AutoQuantizeOptions& options) {
  if (options.calibration_file.empty()) {
    return absl::InvalidArgumentError("calibration_file: the sensitivity pass needs calibration data (text, JSONL or "
                                      "token ids)");
  }
  auto shape = estimate::ReadModelShape(model_dir);
  if (!shape.ok()) return shape.status();
  const std::string& f = options.calibration_file;
  const bool token_ids = (f.size() > 4 && f.compare(f.size() - 4, 4, ".ids") == 0) ||
                         (f.size() > 7 && f.compare(f.size() - 7, 7, ".tokens") == 0);
  std::unique_ptr<runtime::Tokenizer> tokenizer;
  if (!token_ids) {
    auto opened = runtime::Tokenizer::Open(model_dir, shape->config.bos_token_id, shape->config.eos_token_id);
    if (!opened.ok()) return opened.status();
    tokenizer = *std::move(opened);
  }
  return quantize::LoadCalibrationSamples(f, shape->config, tokenizer.get(), options.num_samples, options.seq_len,
                                          options.seed);
}

absl::StatusOr<SensitivityTable> LoadOrMeasureSensitivity(const std::string& model_dir,
                                                          runtime::LayerStreamer& streamer,
                                                          const std::vector<at::Tensor>& samples,
                                                          const std::vector<Candidate>& candidates,
                                                          const AutoQuantizeOptions& options, bool* from_cache) {
  if (from_cache != nullptr) *from_cache = false;
  std::string key;
  if (!options.cache_dir.empty()) {
    auto digest = ModelDigest(model_dir);
    if (!digest.ok()) return digest.status();
    std::vector<std::vector<int64_t>> ids;
    for (const at::Tensor& s : samples) {
      const at::Tensor c = s.reshape({-1}).to(at::kLong).contiguous().cpu();
      ids.emplace_back(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
    }
    key = SensitivityKey(*digest, ids, candidates);
    auto cached = LoadCachedSensitivity(options.cache_dir, key);
    if (!cached.ok()) return cached.status();
    if (cached->has_value()) {
      if (from_cache != nullptr) *from_cache = true;
      return **std::move(cached);
    }
  }
  auto table = MeasureSensitivity(streamer, samples, candidates, options.sensitivity);
  if (!table.ok()) return table.status();
  table->key = key;
  if (!options.cache_dir.empty()) {
    if (auto s = StoreSensitivity(options.cache_dir, *table); !s.ok()) return s;
  }
  return table;
}

absl::StatusOr<NextTokenReference::Loss> MeasureRecipe(runtime::LayerStreamer& streamer,
                                                       const std::vector<at::Tensor>& samples, const Config& config,
                                                       const NextTokenReference& reference) {
  runtime::LayerHooks hooks;
  hooks.before = [&](int64_t, runtime::DecoderLayer& layer, const std::vector<at::Tensor>& inputs) -> absl::Status {
    quantize::LayerQuantizer quantizer(config, BuildLayerPlan(config, LinearsOf(layer)));
    return quantizer.Calibrate(layer, inputs, streamer.model()).status();
  };
  auto finals = streamer.Run(samples, hooks);
  if (!finals.ok()) return finals.status();
  return reference.Score(streamer, *finals);
}

absl::StatusOr<AutoQuantizeResult> AutoQuantize(const std::string& model_dir, const AutoQuantizeOptions& options) {
  auto candidates = ResolveCandidates(options.candidates, "--candidates");
  if (!candidates.ok()) return candidates.status();
  if (options.max_rounds < 1) return absl::InvalidArgumentError("max_rounds: must be at least 1");
  auto shape = estimate::ReadModelShape(model_dir);
  if (!shape.ok()) return shape.status();
  // A size no recipe reaches is refused before anything is measured.
  if (auto s = CheckSizeBudget(DecoderLinearGroups(shape->modules), *candidates, shape->model_dtype, options.budget);
      !s.ok()) {
    return s;
  }
  auto samples = AutoCalibrationSamples(model_dir, options);
  if (!samples.ok()) return samples.status();
  auto streamer = runtime::LayerStreamer::Open(model_dir);
  if (!streamer.ok()) return streamer.status();

  AutoQuantizeResult result;
  auto start = Clock::now();
  auto table = LoadOrMeasureSensitivity(model_dir, **streamer, *samples, *candidates, options, &result.table_from_cache);
  if (!table.ok()) return table.status();
  result.table = *std::move(table);
  result.sensitivity_seconds = SecondsSince(start);
  auto space = MakeSearchSpace(result.table, *candidates, shape->model_dtype, "--candidates");
  if (!space.ok()) return space.status();
  result.space = *std::move(space);
  auto recipe = SearchRecipe(result.space, options.budget);
  if (!recipe.ok()) return recipe.status();

  auto floats = (*streamer)->Run(*samples);
  if (!floats.ok()) return floats.status();
  auto reference = NextTokenReference::Build(**streamer, *samples, *floats);
  if (!reference.ok()) return reference.status();
  for (int round = 0; round < options.max_rounds; ++round) {
    start = Clock::now();
    auto measured = MeasureRecipe(**streamer, *samples, RecipeConfig(result.space, *candidates, *recipe), *reference);
    if (!measured.ok()) return measured.status();
    result.rounds.push_back({*recipe, *measured, SecondsSince(start)});
    result.met = Meets(options.budget, *recipe, *measured);
    if (result.met) break;
    auto refined = RefineRecipe(result.space, *recipe, options.budget.kind);
    if (!refined.ok()) break;  // nothing left to move up: reported as not met
    recipe = *std::move(refined);
  }
  result.config = RecipeConfig(result.space, *candidates, result.rounds.back().recipe);
  return result;
}

nlohmann::ordered_json AutoQuantizeJson(const AutoQuantizeResult& result) {
  using Json = nlohmann::ordered_json;
  const SearchSpace& s = result.space;
  const Recipe& r = result.rounds.back().recipe;
  Json plan = Json::array();
  for (size_t g = 0; g < s.groups.size(); ++g) {
    Json modules = Json::array();
    for (const ModuleInfo& m : s.groups[g].modules) modules.push_back(m.name);
    const int c = r.choice[g];
    plan.push_back({{"group", s.groups[g].name},
                    {"scheme", s.candidates[c]},
                    {"bits_per_weight", s.bits[g][c] / static_cast<double>(s.groups[g].params)},
                    {"predicted_kld", s.kld[g][c]},
                    {"modules", modules}});
  }
  Json rounds = Json::array();
  for (const VerifiedRound& v : result.rounds) {
    rounds.push_back({{"bits_per_weight", v.recipe.bits_per_weight},
                      {"predicted_kld", v.recipe.predicted_kld},
                      {"measured_kld", v.measured.kld},
                      {"predicted_ppl_increase", std::expm1(v.recipe.predicted_nll_increase)},
                      {"measured_ppl_increase", std::expm1(v.measured.nll_increase)},
                      {"seconds", v.seconds}});
  }
  Json passes = Json::array();
  for (const CandidatePass& p : result.table.passes) passes.push_back({{"candidate", p.candidate}, {"seconds", p.seconds}});
  return Json{{"met", result.met},
              {"bits_per_weight", r.bits_per_weight},
              {"weights", s.params},
              {"rounds", rounds},
              {"sensitivity", {{"key", result.table.key},
                               {"from_cache", result.table_from_cache},
                               {"seconds", result.sensitivity_seconds},
                               {"float_nll", result.table.float_nll},
                               {"tokens", result.table.tokens},
                               {"passes", passes}}},
              {"plan", plan},
              {"quantization_config", ConfigToQuarkJson(result.config)}};
}

}  // namespace quark::search

// The search space (candidates, groups, sizes), the knapsack search against exhaustive enumeration, its refusals,
// refinement, the recipe as a Quark Config, and the sensitivity tables' JSON and content key. No LibTorch.
#include "core/search/budget_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "core/config/layer_plan.h"
#include "core/estimate/artifact_size.h"
#include "core/search/sensitivity_cache.h"

namespace quark::search {
namespace {

std::vector<ModuleInfo> LlamaModules(int layers, int64_t hidden, int64_t inter) {
  std::vector<ModuleInfo> m;
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"}) {
      m.push_back({p + n, "Linear", {hidden, hidden}});
    }
    m.push_back({p + "mlp.gate_proj", "Linear", {inter, hidden}});
    m.push_back({p + "mlp.up_proj", "Linear", {inter, hidden}});
    m.push_back({p + "mlp.down_proj", "Linear", {hidden, inter}});
  }
  m.push_back({"model.embed_tokens", "Embedding", {512, hidden}});
  m.push_back({"lm_head", "Linear", {512, hidden}});
  return m;
}

// A table over LlamaModules with the given per-candidate losses drawn from `seed`.
SensitivityTable RandomTable(const std::vector<std::string>& candidates, int layers, uint32_t seed) {
  SensitivityTable t;
  t.groups = DecoderLinearGroups(LlamaModules(layers, 256, 768));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double scale = 1.0;
  for (const std::string& c : candidates) {
    CandidatePass p;
    p.candidate = c;
    for (size_t g = 0; g < t.groups.size(); ++g) {
      p.kld.push_back(scale * (0.001 + 0.01 * u(rng)));
      p.nll_increase.push_back(scale * (0.002 * u(rng) - 0.0005));
    }
    scale *= 0.1;  // later (larger) candidates lose less
    t.passes.push_back(p);
  }
  t.tokens = 100;
  t.float_nll = 2.5;
  t.key = "k";
  return t;
}

std::vector<Candidate> Resolve(const std::vector<std::string>& names) {
  auto c = ResolveCandidates(names, "--candidates");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : std::vector<Candidate>{};
}

// The best choice by enumeration: least loss within the bits, or least bits within the loss.
Recipe BruteForce(const SearchSpace& s, const Budget& budget) {
  const size_t groups = s.groups.size(), cands = s.candidates.size();
  std::vector<int> choice(groups, 0);
  Recipe best;
  bool found = false;
  const auto& loss = budget.kind == BudgetKind::kMaxPplIncrease ? s.nll_increase : s.kld;
  const double limit = budget.kind == BudgetKind::kMaxPplIncrease ? std::log1p(budget.value) : budget.value;
  for (;;) {
    Recipe r = Evaluate(s, choice);
    double l = 0;
    for (size_t g = 0; g < groups; ++g) l += loss[g][choice[g]];
    const bool fits = budget.kind == BudgetKind::kTargetBits ? r.bits_per_weight <= budget.value + 1e-12 : l <= limit + 1e-15;
    if (fits) {
      double bl = 0;
      if (found) {
        for (size_t g = 0; g < groups; ++g) bl += loss[g][best.choice[g]];
      }
      const bool better = !found || (budget.kind == BudgetKind::kTargetBits ? l < bl : r.bits_per_weight < best.bits_per_weight);
      if (better) best = r, found = true;
    }
    size_t g = 0;
    while (g < groups && ++choice[g] == static_cast<int>(cands)) choice[g++] = 0;
    if (g == groups) break;
  }
  return best;
}

TEST(RecipeSpaceTest, CandidatesAreNamedPresetsAndBadListsNameTheField) {
  auto ok = ResolveCandidates(SplitCandidateList(" uint4_wo_128, int8 ,,fp8"), "--candidates");
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[1].name, "int8");
  EXPECT_TRUE((*ok)[1].config.input_tensors.has_value());  // W8A8: the static activation comes with it
  auto empty = ResolveCandidates({}, "--candidates");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("--candidates"), std::string::npos);
  auto unknown = ResolveCandidates({"int8", "uint4_wo_127"}, "--candidates");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--candidates[1]"), std::string::npos) << unknown.status();
  EXPECT_NE(unknown.status().message().find("uint4_wo_127"), std::string::npos);
  auto twice = ResolveCandidates({"int8", "int8"}, "--candidates");
  EXPECT_NE(twice.status().message().find("--candidates[1]"), std::string::npos) << twice.status();
}

TEST(RecipeSpaceTest, GroupsFuseQkvAndGateUpAndSkipTheHead) {
  const auto groups = DecoderLinearGroups(LlamaModules(2, 256, 768));
  ASSERT_EQ(groups.size(), 8u);
  EXPECT_EQ(groups[0].name, "model.layers.0.self_attn.qkv");
  EXPECT_EQ(groups[0].modules.size(), 3u);
  EXPECT_EQ(groups[1].name, "model.layers.0.self_attn.o_proj");
  EXPECT_EQ(groups[2].name, "model.layers.0.mlp.gate_up");
  EXPECT_EQ(groups[2].params, 2 * 768 * 256);
  EXPECT_EQ(groups[3].name, "model.layers.0.mlp.down_proj");
  EXPECT_EQ(groups[7].layer, 1);
}

TEST(RecipeSpaceTest, GroupBitsAreTheEstimatorsHfQuarkBytes) {
  const auto groups = DecoderLinearGroups(LlamaModules(1, 256, 768));
  const auto c = Resolve({"uint4_wo_128", "int8"});
  // uint4 per group of 128: 4 bits of code, a 16-bit scale and a 4-bit zero point per 128 weights.
  EXPECT_DOUBLE_EQ(GroupBits(groups[3], c[0].config, checkpoint::StDType::kF32), 768.0 * 256 * (4 + 20.0 / 128));
  EXPECT_DOUBLE_EQ(GroupBits(groups[1], c[1].config, checkpoint::StDType::kF32),
                   8.0 * estimate::HfQuarkLinearBytes(c[1].config, 256, 256, false, checkpoint::StDType::kF32));
}

TEST(BudgetSearchTest, MatchesExhaustiveSearchOnSmallModels) {
  const std::vector<std::string> names = {"uint4_wo_128", "uint4_wo_32", "int8"};
  const auto cands = Resolve(names);
  int optimal = 0, runs = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const SensitivityTable t = RandomTable(names, 1, seed);  // 4 groups x 3 candidates: 81 recipes
    auto space = MakeSearchSpace(t, cands, checkpoint::StDType::kF32, "--candidates");
    ASSERT_TRUE(space.ok()) << space.status();
    for (double bits : {4.2, 4.5, 5.0, 6.0, 7.5}) {
      const Budget b{BudgetKind::kTargetBits, bits, "--target-bits"};
      auto r = SearchRecipe(*space, b);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_LE(r->bits_per_weight, bits + 1e-12);
      const Recipe best = BruteForce(*space, b);
      EXPECT_GE(r->predicted_kld, best.predicted_kld - 1e-15);
      // The programme's steps (1/50,000 of the budget) can cost at most a rounding's worth.
      EXPECT_LE(r->predicted_kld, best.predicted_kld * (1 + 1e-3)) << seed << " " << bits;
      optimal += r->predicted_kld <= best.predicted_kld + 1e-15;
      ++runs;
    }
    const double min_kld = BruteForce(*space, {BudgetKind::kTargetBits, 100, ""}).predicted_kld;
    const Budget lb{BudgetKind::kMaxKld, min_kld * 3, "--max-kld"};
    auto r = SearchRecipe(*space, lb);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(r->predicted_kld, lb.value * (1 + 1e-12));
    EXPECT_LE(r->bits_per_weight, BruteForce(*space, lb).bits_per_weight * (1 + 1e-3));
  }
  EXPECT_GE(optimal, runs - 2) << optimal << " of " << runs;
}

TEST(BudgetSearchTest, UnreachableBudgetsNameTheSmallestAchievable) {
  const auto cands = Resolve({"uint4_wo_128", "int8"});
  auto space = MakeSearchSpace(RandomTable({"uint4_wo_128", "int8"}, 2, 3), cands, checkpoint::StDType::kF32,
                               "--candidates");
  ASSERT_TRUE(space.ok());
  auto low = SearchRecipe(*space, {BudgetKind::kTargetBits, 4.0, "--target-bits"});
  EXPECT_EQ(low.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(low.status().message().find("--target-bits: 4 bits per weight is below 4.15"), std::string::npos)
      << low.status();
  // The same refusal from the shapes alone, before any measurement.
  const auto early = CheckSizeBudget(space->groups, cands, checkpoint::StDType::kF32,
                                     {BudgetKind::kTargetBits, 4.0, "--target-bits"});
  EXPECT_EQ(early.message(), low.status().message());
  EXPECT_TRUE(CheckSizeBudget(space->groups, cands, checkpoint::StDType::kF32,
                              {BudgetKind::kTargetBits, 4.2, "--target-bits"}).ok());
  auto kld = SearchRecipe(*space, {BudgetKind::kMaxKld, 1e-9, "--max-kld"});
  EXPECT_NE(kld.status().message().find("--max-kld"), std::string::npos) << kld.status();
  EXPECT_NE(kld.status().message().find("smallest predicted loss"), std::string::npos);
  auto bad = SearchRecipe(*space, {BudgetKind::kTargetBits, std::nan(""), "--target-bits"});
  EXPECT_NE(bad.status().message().find("--target-bits"), std::string::npos);
  auto all_int8 = SearchRecipe(*space, {BudgetKind::kTargetBits, 9.0, "--target-bits"});
  ASSERT_TRUE(all_int8.ok());
  for (int c : all_int8->choice) EXPECT_EQ(c, 1);  // room for everything: the least lossy everywhere
  auto missing = MakeSearchSpace(RandomTable({"int8"}, 1, 1), cands, checkpoint::StDType::kF32, "--candidates");
  EXPECT_NE(missing.status().message().find("--candidates[0]: \"uint4_wo_128\" was not measured"), std::string::npos)
      << missing.status();
}

TEST(BudgetSearchTest, RefineMovesTheWorstGroupUp) {
  const auto cands = Resolve({"uint4_wo_128", "int8"});
  auto space = MakeSearchSpace(RandomTable({"uint4_wo_128", "int8"}, 2, 5), cands, checkpoint::StDType::kF32,
                               "--candidates");
  ASSERT_TRUE(space.ok());
  Recipe r = Evaluate(*space, std::vector<int>(space->groups.size(), 0));
  size_t worst = 0;
  for (size_t g = 0; g < r.choice.size(); ++g) {
    if (space->kld[g][0] > space->kld[worst][0]) worst = g;
  }
  auto up = RefineRecipe(*space, r, BudgetKind::kMaxKld);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->choice[worst], 1);
  EXPECT_LT(up->predicted_kld, r.predicted_kld);
  EXPECT_GT(up->bits_per_weight, r.bits_per_weight);
  Recipe top = Evaluate(*space, std::vector<int>(space->groups.size(), 1));
  EXPECT_EQ(RefineRecipe(*space, top, BudgetKind::kMaxKld).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BudgetSearchTest, RecipeConfigResolvesEveryLinearToItsChoice) {
  const auto cands = Resolve({"uint4_wo_128", "int8"});
  const auto modules = LlamaModules(2, 256, 768);
  auto space = MakeSearchSpace(RandomTable({"uint4_wo_128", "int8"}, 2, 9), cands, checkpoint::StDType::kF32,
                               "--candidates");
  ASSERT_TRUE(space.ok());
  auto r = SearchRecipe(*space, {BudgetKind::kTargetBits, 5.0, "--target-bits"});
  ASSERT_TRUE(r.ok());
  const Config config = RecipeConfig(*space, cands, *r);
  const LayerPlan plan = BuildLayerPlan(config, modules);
  for (size_t g = 0; g < space->groups.size(); ++g) {
    for (const ModuleInfo& m : space->groups[g].modules) {
      const LayerAssignment* a = plan.Find(m.name);
      ASSERT_NE(a, nullptr);
      EXPECT_EQ(a->config, cands[r->choice[g]].config) << m.name;
    }
  }
  EXPECT_EQ(plan.Find("lm_head")->source, ConfigSource::kExcluded);
}

TEST(SensitivityCacheTest, JsonRoundTripsAndTheKeyFollowsItsInputs) {
  SensitivityTable t = RandomTable({"uint4_wo_128", "int8"}, 2, 4);
  const auto cands = Resolve({"uint4_wo_128", "int8"});
  t.key = SensitivityKey("m", {{1, 2, 3}}, cands);
  EXPECT_NE(t.key, SensitivityKey("m", {{1, 2, 4}}, cands));
  EXPECT_NE(t.key, SensitivityKey("n", {{1, 2, 3}}, cands));
  EXPECT_NE(t.key, SensitivityKey("m", {{1, 2, 3}}, Resolve({"uint4_wo_128", "fp8"})));
  EXPECT_EQ(t.key, SensitivityKey("m", {{1, 2, 3}}, cands));
  const std::string dir = ::testing::TempDir() + "/sens_cache";
  std::filesystem::remove_all(dir);
  auto none = LoadCachedSensitivity(dir, t.key);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(StoreSensitivity(dir, t).ok());
  auto back = LoadCachedSensitivity(dir, t.key);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ(SensitivityToJson(**back).dump(), SensitivityToJson(t).dump());
  EXPECT_EQ((*back)->groups[2].modules[1].weight_shape, (std::vector<int64_t>{768, 256}));
  auto j = SensitivityToJson(t);
  j["passes"][1]["kld"].erase(0);
  auto bad = SensitivityFromJson(j, "t.json");
  EXPECT_NE(bad.status().message().find("t.json.passes[1].kld"), std::string::npos) << bad.status();
  j = SensitivityToJson(t);
  j["groups"][0]["modules"][0]["shape"] = "x";
  EXPECT_NE(SensitivityFromJson(j, "t.json").status().message().find("t.json.groups[0].modules[0].shape"),
            std::string::npos);
}

}  // namespace
}  // namespace quark::search

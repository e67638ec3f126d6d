#include "core/export/ct_targets.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "core/base/strings.h"
#include "core/config/fused_group.h"

namespace quark::exporter {
namespace {

// "<prefix>layers.<N>.<suffix>": a decoder layer's module.
struct LayerModule {
  std::string prefix;  // "model.layers."
  int layer = -1;
  std::string suffix;  // "mlp.down_proj"
};

std::optional<LayerModule> ParseLayerModule(const std::string& module) {
  static const std::regex kLayer(R"(^(.*\blayers\.)(\d+)\.(.+)$)");
  std::smatch m;
  if (!std::regex_match(module, m, kLayer)) return std::nullopt;
  return LayerModule{m[1].str(), std::stoi(m[2].str()), m[3].str()};
}

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// Patterns of one group's modules (see CtGroupTargets), before the check against the whole model.
std::vector<std::string> Patterns(const std::vector<std::string>& modules,
                                  const std::map<std::pair<std::string, std::string>, std::set<int>>& everywhere) {
  std::vector<std::string> exact;
  std::vector<std::pair<std::string, std::string>> order;  // (prefix, suffix) in first-seen order
  std::map<std::pair<std::string, std::string>, std::set<int>> held;
  for (const std::string& module : modules) {
    const std::optional<LayerModule> m = ParseLayerModule(module);
    if (!m) {
      exact.push_back(module);
      continue;
    }
    const auto key = std::make_pair(m->prefix, m->suffix);
    if (!held.count(key)) order.push_back(key);
    held[key].insert(m->layer);
  }
  std::vector<std::string> out;
  // Suffixes held in only some layers, grouped by their set of layers: one pattern per set.
  std::vector<std::pair<std::pair<std::string, std::set<int>>, std::vector<std::string>>> partial;
  for (const auto& key : order) {
    const std::set<int>& layers = held[key];
    if (layers == everywhere.at(key)) {
      out.push_back(StrCat("re:.*\\.", Escape(key.second), "$"));
      continue;
    }
    const auto set_key = std::make_pair(key.first, layers);
    auto it = std::find_if(partial.begin(), partial.end(), [&](const auto& p) { return p.first == set_key; });
    if (it == partial.end()) it = partial.insert(partial.end(), {set_key, {}});
    it->second.push_back(Escape(key.second));
  }
  for (const auto& [set_key, suffixes] : partial) {
    const std::string layers = StrJoin(std::vector<int>(set_key.second.begin(), set_key.second.end()), "|");
    const std::string tail = suffixes.size() == 1 ? suffixes[0] : StrCat("(?:", StrJoin(suffixes, "|"), ")");
    out.push_back(StrCat("re:", Escape(set_key.first), set_key.second.size() == 1 ? layers : StrCat("(?:", layers, ")"),
                         "\\.", tail, "$"));
  }
  for (std::string& name : exact) out.push_back(std::move(name));
  return out;
}

}  // namespace

bool CtNameMatches(const std::string& target, const std::string& module) {
  if (target.rfind("re:", 0) != 0) return target == module;
  return std::regex_search(module, std::regex(target.substr(3)), std::regex_constants::match_continuous);
}

absl::Status CheckCtFusedShards(const Config& config, const LayerPlan& plan) {
  std::map<std::string, const LayerAssignment*> first;  // fused linear -> its first shard
  for (const LayerAssignment& a : plan.layers) {
    if (a.module_type != "Linear") continue;
    const std::string key = FusedGroupKey(a.module);
    if (key == a.module) continue;  // vLLM loads it alone
    const std::string fused = key + "_proj";
    auto [it, inserted] = first.insert({fused, &a});
    if (inserted) continue;
    const LayerAssignment& ref = *it->second;
    auto ignored = [](const LayerAssignment& x) { return x.source == ConfigSource::kExcluded || x.config.Empty(); };
    auto scheme = [&](const LayerAssignment& x) {
      LayerQuantConfig c = x.config;
      if (KvCacheSpecFor(config, x.module)) c.output_tensors.reset();  // the KV cache's spec is no linear scheme
      return c;
    };
    if (ignored(a) == ignored(ref) && (ignored(a) || scheme(a) == scheme(ref))) continue;
    return absl::InvalidArgumentError(StrCat(
        a.module, " (", a.SourceLabel(), ") and ", ref.module, " (", ref.SourceLabel(), "): ",
        ignored(a) != ignored(ref) ? "one is left in float and the other is not" : "different schemes",
        "; vLLM loads them as one linear, ", fused, ", with one compressed-tensors config group: give them the same "
        "config (compressed-tensors cannot express it)"));
  }
  return absl::OkStatus();
}

std::vector<std::vector<std::string>> CtGroupTargets(const std::vector<std::vector<std::string>>& groups,
                                                     const std::vector<std::string>& linears) {
  std::map<std::pair<std::string, std::string>, std::set<int>> everywhere;
  for (const std::string& module : linears) {
    if (auto m = ParseLayerModule(module)) everywhere[{m->prefix, m->suffix}].insert(m->layer);
  }
  for (const auto& modules : groups) {
    for (const std::string& module : modules) {
      if (auto m = ParseLayerModule(module)) everywhere[{m->prefix, m->suffix}].insert(m->layer);
    }
  }
  std::vector<std::vector<std::string>> targets;
  std::map<std::string, int> group_of;
  for (size_t g = 0; g < groups.size(); ++g) {
    targets.push_back(Patterns(groups[g], everywhere));
    for (const std::string& module : groups[g]) group_of[module] = static_cast<int>(g);
  }
  // As vLLM resolves a module: the first target over every group in order.
  bool resolves = true;
  for (const std::string& module : linears) {
    int found = -1;
    for (size_t g = 0; g < targets.size() && found < 0; ++g) {
      for (const std::string& t : targets[g]) {
        if (CtNameMatches(t, module)) {
          found = static_cast<int>(g);
          break;
        }
      }
    }
    auto it = group_of.find(module);
    resolves = resolves && found == (it == group_of.end() ? -1 : it->second);
  }
  return resolves ? targets : groups;
}

}  // namespace quark::exporter

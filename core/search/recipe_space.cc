#include "core/search/recipe_space.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/base/strings.h"
#include "core/config/presets.h"
#include "core/estimate/artifact_size.h"
#include "core/estimate/model_shape.h"
#include "core/config/fused_group.h"

namespace quark::search {

absl::StatusOr<std::vector<Candidate>> ResolveCandidates(const std::vector<std::string>& names,
                                                         const std::string& field) {
  if (names.empty()) return absl::InvalidArgumentError(StrCat(field, ": no candidate schemes given"));
  std::vector<Candidate> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string at = StrCat(field, "[", i, "]");
    auto config = PresetConfig(names[i]);
    if (!config.ok()) return absl::InvalidArgumentError(StrCat(at, ": ", std::string(config.status().message())));
    if (!seen.insert(names[i]).second) {
      return absl::InvalidArgumentError(StrCat(at, ": \"", names[i], "\" is listed twice"));
    }
    if (!config->global_quant_config.weight) {
      return absl::InvalidArgumentError(StrCat(at, ": \"", names[i], "\" quantizes no weight"));
    }
    out.push_back({names[i], config->global_quant_config});
  }
  return out;
}

std::vector<std::string> SplitCandidateList(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

std::vector<LinearGroup> DecoderLinearGroups(const std::vector<ModuleInfo>& modules) {
  std::vector<LinearGroup> groups;
  std::map<std::string, size_t> index;
  for (const ModuleInfo& m : modules) {
    const int64_t layer = estimate::LayerIndex(m.name);
    if (m.type != "Linear" || layer < 0 || m.weight_shape.size() != 2) continue;
    const std::string key = FusedGroupKey(m.name);
    auto [it, added] = index.emplace(key, groups.size());
    if (added) groups.push_back({key, layer, {}, 0});
    LinearGroup& g = groups[it->second];
    g.modules.push_back(m);
    g.params += m.weight_shape[0] * m.weight_shape[1];
  }
  return groups;
}

double GroupBits(const LinearGroup& group, const LayerQuantConfig& config, checkpoint::StDType model_dtype) {
  double bits = 0;
  for (const ModuleInfo& m : group.modules) {
    bits += 8.0 * static_cast<double>(estimate::HfQuarkLinearBytes(config, m.weight_shape[0], m.weight_shape[1],
                                                                     /*has_bias=*/false, model_dtype));
  }
  return bits;
}

}  // namespace quark::search

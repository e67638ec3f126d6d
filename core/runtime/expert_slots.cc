#include "core/runtime/expert_slots.h"

#include "core/base/strings.h"

namespace quark::runtime {
namespace {

// A plain holder for the experts, so that their children read "experts.3.gate_proj" as in HF's ModuleList.
class ExpertList : public torch::nn::Module {};

}  // namespace

void AddSwigluSlots(LinearSlots& slots, const std::string& base, torch::nn::Module& owner, std::shared_ptr<LinearLike>* gate,
                    std::shared_ptr<LinearLike>* up, std::shared_ptr<LinearLike>* down) {
  slots[base + ".gate_proj"] = {&owner, gate};
  slots[base + ".up_proj"] = {&owner, up};
  slots[base + ".down_proj"] = {&owner, down};
}

void AddMoeSlots(LinearSlots& slots, const std::string& block, const std::string& shared_name, MoeBlock& moe) {
  MoeExpert& shared = *moe.shared_expert;
  AddSwigluSlots(slots, block + "." + shared_name, shared, &shared.gate, &shared.up, &shared.down);
  for (size_t e = 0; e < moe.experts.size(); ++e) {
    MoeExpert& expert = *moe.experts[e];
    AddSwigluSlots(slots, StrCat(block, ".experts.", e), expert, &expert.gate, &expert.up, &expert.down);
  }
}

std::vector<std::string> AddExperts(MoeBlock& moe, int64_t count, const std::string& shared_name, const std::string& name_prefix) {
  std::vector<std::string> names;
  auto list = std::make_shared<ExpertList>();
  for (int64_t e = 0; e < count; ++e) {
    moe.experts.push_back(list->register_module(std::to_string(e), std::make_shared<MoeExpert>()));
    names.push_back(StrCat(name_prefix, ".experts.", e));
  }
  moe.register_module("experts", list);
  moe.shared_expert = moe.register_module(shared_name, std::make_shared<MoeExpert>());
  return names;
}

}  // namespace quark::runtime

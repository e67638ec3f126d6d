#include "core/quantize/child_replacement.h"

#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include "core/base/strings.h"

namespace quark::quantize {
namespace {

using torch::nn::Module;
using torch::nn::ModuleDictImpl;
using torch::nn::ModuleListImpl;
using torch::nn::SequentialImpl;

// The rebuilt contents are assigned into the existing object (whose address every holder shares); Module keeps
// enable_shared_from_this's link across the assignment. Checked here so that a LibTorch that made these Impl types
// non-assignable fails the build instead of silently falling back to replace_module().
static_assert(std::is_copy_assignable_v<SequentialImpl>, "SequentialImpl must be assignable for in-place rebuilding");
static_assert(std::is_copy_assignable_v<ModuleListImpl>, "ModuleListImpl must be assignable for in-place rebuilding");

// Module::train() recurses, and a rebuilt container starts in training mode: the modes of the whole subtree are
// recorded before and put back after, in pre-order (a parent's train() resets its children, which come later).
class TrainingModes {
 public:
  explicit TrainingModes(const Module& root) : root_mode_(root.is_training()) {
    for (const auto& m : root.modules(/*include_self=*/false)) modes_.emplace_back(m, m->is_training());
  }
  void Restore(Module& root) const {
    root.train(root_mode_);
    for (const auto& [m, mode] : modes_) {
      if (m->is_training() != mode) m->train(mode);
    }
  }

 private:
  bool root_mode_;
  std::vector<std::pair<std::shared_ptr<Module>, bool>> modes_;
};

void RebuildSequential(SequentialImpl& seq, const std::string& name, const torch::nn::AnyModule& replacement) {
  const std::vector<std::string> names = seq.named_children().keys();  // registration order = forward order
  SequentialImpl rebuilt;
  auto it = seq.begin();
  for (size_t i = 0; i < names.size(); ++i, ++it) {
    rebuilt.push_back(names[i], names[i] == name ? replacement : *it);
  }
  seq = rebuilt;
}

void RebuildModuleList(ModuleListImpl& list, const std::string& name, const torch::nn::AnyModule& replacement) {
  const std::vector<std::string> names = list.named_children().keys();  // "0", "1", ...: push_back names them again
  ModuleListImpl rebuilt;
  for (size_t i = 0; i < names.size(); ++i) rebuilt.push_back(names[i] == name ? replacement.ptr() : list.ptr(i));
  list = rebuilt;
}

std::string ParentPath(const std::string& child_path) {
  const size_t dot = child_path.rfind('.');
  return dot == std::string::npos ? "the root module" : StrCat("'", child_path.substr(0, dot), "'");
}

}  // namespace

absl::Status CanReplaceChildOf(const Module& parent, const std::string& child_path) {
  if (dynamic_cast<const SequentialImpl*>(&parent) || dynamic_cast<const ModuleListImpl*>(&parent) ||
      dynamic_cast<const ModuleDictImpl*>(&parent) || dynamic_cast<const ReplaceableParent*>(&parent)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      StrCat(child_path, ": cannot be replaced in place: its parent ", ParentPath(child_path), " is a ", parent.name(),
             ", which is neither a Sequential, ModuleList or ModuleDict nor a quark::quantize::ReplaceableParent "
             "(replace_module() alone would leave its forward() calling the float module)"));
}

absl::Status ReplaceChildInPlace(Module& parent, const std::string& name, const std::string& child_path,
                                 const torch::nn::AnyModule& replacement) {
  if (auto s = CanReplaceChildOf(parent, child_path); !s.ok()) return s;
  const auto children = parent.named_children();
  if (!children.contains(name)) {
    return absl::NotFoundError(StrCat(child_path, ": ", parent.name(), " has no child named '", name, "'"));
  }
  const bool child_mode = children[name]->is_training();
  const TrainingModes modes(parent);
  if (auto* seq = dynamic_cast<SequentialImpl*>(&parent)) {
    RebuildSequential(*seq, name, replacement);
  } else if (auto* list = dynamic_cast<ModuleListImpl*>(&parent)) {
    RebuildModuleList(*list, name, replacement);
  } else if (auto* dict = dynamic_cast<ModuleDictImpl*>(&parent)) {
    dict->update(std::vector<std::pair<std::string, std::shared_ptr<Module>>>{{name, replacement.ptr()}});
  } else {
    auto* custom = dynamic_cast<ReplaceableParent*>(&parent);
    if (auto s = custom->ReplaceChild(name, replacement); !s.ok()) {
      return absl::Status(s.code(), StrCat(child_path, ": ", parent.name(), "::ReplaceChild: ", std::string(s.message())));
    }
    parent.replace_module(name, replacement.ptr());
  }
  modes.Restore(parent);
  replacement.ptr()->train(child_mode);
  return absl::OkStatus();
}

}  // namespace quark::quantize

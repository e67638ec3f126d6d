// Swapping a child module for another one *in place*, so that the parent's next forward() calls the new child.
//
// Module::replace_module() alone is not enough: it only swaps the entry in the parent's children_ list, while
// torch::nn::Sequential forwards through its own vector of AnyModules, ModuleList keeps its own vector, and a custom
// module calls the typed holder fields it owns. So:
//   Sequential, ModuleList: the container's contents are rebuilt with the new child at the same position and name,
//     and assigned into the existing Impl object (every holder of the container sees the change);
//   ModuleDict: ModuleDictImpl::update() overwrites the entry in place (same key, same position);
//   any other parent: it implements ReplaceableParent and points its own field at the new child.
// Anything else is refused, naming the module path and the parent's type.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace quark::quantize {

/// Implemented by a user module that calls a child through a field of its own: the field must be able to hold the
/// replacement, e.g. a torch::nn::AnyModule (whose forward() works for the float and the quantized module alike).
class ReplaceableParent {
 public:
  virtual ~ReplaceableParent() = default;
  /// Points the field that forward() uses for direct child `name` at `replacement`; an error (e.g. NOT_FOUND for a
  /// name it does not own) is passed on. The caller then updates the children list (replace_module).
  virtual absl::Status ReplaceChild(const std::string& name, const torch::nn::AnyModule& replacement) = 0;
};

/// Whether ReplaceChildInPlace can replace a direct child of `parent` (an error naming `child_path` and the
/// parent's type when not).
absl::Status CanReplaceChildOf(const torch::nn::Module& parent, const std::string& child_path);

/// Replaces direct child `name` of `parent` by `replacement` in place (see above); `child_path` is the child's
/// full name, for messages. The replacement takes the replaced child's training mode. NOT_FOUND for an unknown child.
absl::Status ReplaceChildInPlace(torch::nn::Module& parent, const std::string& name, const std::string& child_path,
                                 const torch::nn::AnyModule& replacement);

}  // namespace quark::quantize

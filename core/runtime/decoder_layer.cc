#include "core/runtime/decoder_layer.h"

#include "core/base/strings.h"
#include "core/runtime/online_hadamard_linear.h"

namespace quark::runtime {
namespace {

// A slot behind an online Hadamard (online_hadamard_linear.h) shows its inner linear: every pass that observes,
// captures or replaces a linear then works on the rotated input without knowing about the rotation.
std::shared_ptr<LinearLike> Unwrapped(const std::shared_ptr<LinearLike>& linear) {
  if (const auto* online = dynamic_cast<const OnlineHadamardLinear*>(linear.get())) return online->inner();
  return linear;
}

}  // namespace

void DecoderLayer::AddLinear(const std::string& relative_name, torch::nn::Module& parent, const std::string& child,
                             std::shared_ptr<LinearLike>* slot) {
  parent.register_module(child, *slot);
  slots_.push_back({relative_name, &parent, child, slot});
}

void DecoderLayer::AddLinears(const std::vector<checkpoint::LinearSpec>& specs, const std::vector<LinearSlot>& slots) {
  for (size_t i = 0; i < specs.size() && i < slots.size(); ++i) {
    const std::string& relative_name = specs[i].relative_name;
    AddLinear(relative_name, *slots[i].parent, relative_name.substr(relative_name.rfind('.') + 1), slots[i].member);
  }
}

std::vector<NamedLinear> DecoderLayer::NamedLinears() const {
  std::vector<NamedLinear> out;
  out.reserve(slots_.size());
  for (const Slot& s : slots_) out.push_back({prefix_ + s.relative_name, s.relative_name, Unwrapped(*s.slot)});
  return out;
}

std::shared_ptr<LinearLike> DecoderLayer::FindLinear(const std::string& relative_name) const {
  for (const Slot& s : slots_) {
    if (s.relative_name == relative_name) return Unwrapped(*s.slot);
  }
  return nullptr;
}

absl::Status DecoderLayer::ReplaceLinear(const std::string& relative_name, std::shared_ptr<LinearLike> replacement) {
  if (replacement == nullptr) return absl::InvalidArgumentError(StrCat("null replacement for ", prefix_, relative_name));
  for (Slot& s : slots_) {
    if (s.relative_name != relative_name) continue;
    const LinearLike& old = **s.slot;
    if (old.in_features() != replacement->in_features() || old.out_features() != replacement->out_features()) {
      return absl::InvalidArgumentError(StrCat(prefix_, relative_name, ": replacement is [", replacement->out_features(), ", ",
                                               replacement->in_features(), "], the layer needs [", old.out_features(), ", ",
                                               old.in_features(), "]"));
    }
    // The inner linear of an online Hadamard is replaced behind it; a new OnlineHadamardLinear takes the slot.
    auto* online = dynamic_cast<OnlineHadamardLinear*>(s.slot->get());
    if (online != nullptr && dynamic_cast<const OnlineHadamardLinear*>(replacement.get()) == nullptr) {
      online->set_inner(std::move(replacement));
      return absl::OkStatus();
    }
    s.parent->replace_module(s.child, replacement);
    *s.slot = std::move(replacement);
    return absl::OkStatus();
  }
  std::vector<std::string> names;
  for (const Slot& s : slots_) names.push_back(s.relative_name);
  return absl::InvalidArgumentError(StrCat(prefix_, ": no linear \"", relative_name, "\" (has: ", StrJoin(names, ", "), ")"));
}

}  // namespace quark::runtime

#include "core/config/fused_group.h"

#include <cstring>

namespace quark {
namespace {

bool EndsWith(const std::string& n, const char* suffix) {
  const size_t k = std::strlen(suffix);
  return n.size() >= k && n.compare(n.size() - k, k, suffix) == 0;
}

// A routed expert's linear ("mlp.experts.3.up_proj", "block_sparse_moe.experts.0.w1"); a shared expert's
// ("mlp.shared_experts.up_proj") is a dense MLP's.
bool IsRoutedExpert(const std::string& n) { return n.find(".experts.") != std::string::npos; }

}  // namespace

std::string FusedGroupKey(const std::string& n) {
  if (IsRoutedExpert(n)) return n;
  const std::string parent = n.substr(0, n.rfind('.') + 1);
  if (EndsWith(n, ".q_proj") || EndsWith(n, ".k_proj") || EndsWith(n, ".v_proj")) return parent + "qkv";
  if (EndsWith(n, ".gate_proj") || EndsWith(n, ".up_proj")) return parent + "gate_up";
  if (EndsWith(n, ".q_a_proj") || EndsWith(n, ".kv_a_proj_with_mqa")) return parent + "fused_qkv_a";
  return n;
}

std::string Nvfp4GlobalScaleKey(const std::string& n) {
  if (IsRoutedExpert(n)) {
    for (const char* p : {".gate_proj", ".up_proj", ".w1", ".w3"}) {
      if (EndsWith(n, p)) return n.substr(0, n.size() - std::strlen(p)) + ".w13";
    }
  }
  return FusedGroupKey(n);
}

}  // namespace quark

#include "core/config/fused_group.h"

#include <cstring>

namespace quark {

std::string FusedGroupKey(const std::string& n) {
  auto ends = [&](const char* s) {
    const size_t k = std::strlen(s);
    return n.size() >= k && n.compare(n.size() - k, k, s) == 0;
  };
  if (n.find("experts.") == std::string::npos) {
    if (ends("q_proj") || ends("k_proj") || ends("v_proj")) return n.substr(0, n.size() - 6) + "qkv";
    if (ends("gate_proj") || ends("up_proj")) return n.substr(0, n.rfind('.') + 1) + "gate_up";
  }
  return n;
}

std::string Nvfp4GlobalScaleKey(const std::string& n) {
  if (n.find("experts.") != std::string::npos) {
    for (const char* p : {".gate_proj", ".up_proj", ".w1", ".w3"}) {
      const size_t k = std::strlen(p);
      if (n.size() >= k && n.compare(n.size() - k, k, p) == 0) return n.substr(0, n.size() - k) + ".w13";
    }
  }
  return FusedGroupKey(n);
}

}  // namespace quark

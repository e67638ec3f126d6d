#include "core/export/gguf_mixture.h"

#include <cctype>
#include <iterator>
#include <string_view>
#include <cstdio>
#include <vector>

#include "core/base/strings.h"
#include "core/export/gguf_file_type_names.h"

// The rules of llama_tensor_get_type / tensor_type_fallback in llama.cpp's src/llama-quant.cpp (the build in
// node-llama-cpp 3.22.1's llama/gitRelease.bundle), for the file types accepted here; Falcon's branches and the
// 70B attn_v bump (an 80-layer GQA llama) are left out: the exporter writes neither.

namespace quark::exporter::gguf {
namespace {

constexpr FileType kFileTypes[] = {
    {"F32", 0, GgmlType::kF32},       {"F16", 1, GgmlType::kF16},       {"BF16", 32, GgmlType::kBF16},
    {"Q4_0", 2, GgmlType::kQ4_0},     {"Q4_1", 3, GgmlType::kQ4_1},     {"Q5_0", 8, GgmlType::kQ5_0},
    {"Q5_1", 9, GgmlType::kQ5_1},     {"Q8_0", 7, GgmlType::kQ8_0},     {"Q2_K", 10, GgmlType::kQ2_K},
    {"Q3_K_S", 11, GgmlType::kQ3_K},  {"Q3_K_M", 12, GgmlType::kQ3_K},  {"Q3_K_L", 13, GgmlType::kQ3_K},
    {"Q4_K_S", 14, GgmlType::kQ4_K},  {"Q4_K_M", 15, GgmlType::kQ4_K},  {"Q5_K_S", 16, GgmlType::kQ5_K},
    {"Q5_K_M", 17, GgmlType::kQ5_K},  {"Q6_K", 18, GgmlType::kQ6_K},    {"IQ4_NL", 25, GgmlType::kIQ4_NL},
    {"IQ4_XS", 30, GgmlType::kIQ4_XS},
};

constexpr bool NamesAreTheHeaders() {
  if (std::size(kFileTypes) != std::size(kFileTypeNames)) return false;
  for (size_t i = 0; i < std::size(kFileTypes); ++i) {
    if (std::string_view(kFileTypes[i].name) != kFileTypeNames[i]) return false;
  }
  return true;
}
static_assert(NamesAreTheHeaders(), "gguf_file_type_names.h must list kFileTypes' names in order");

enum Ftype : uint32_t {
  kQ4_0 = 2, kQ5_0 = 8, kQ2_K = 10, kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15,
  kQ5_K_M = 17, kIQ4_NL = 25, kIQ4_XS = 30,
};

enum class Category { kOutput, kTokenEmbd, kAttnV, kAttnK, kAttnQ, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOther };

bool Has(const std::string& name, const char* part) { return name.find(part) != std::string::npos; }

// tensor_get_category; attn_qkv and attn_kv_b count as attn_v (category_is_attn_v is tested first in this build).
Category CategoryOf(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (Has(name, "attn_qkv.weight") || Has(name, "attn_kv_b.weight") || Has(name, "attn_v.weight")) {
    return Category::kAttnV;
  }
  if (Has(name, "attn_k.weight")) return Category::kAttnK;
  if (Has(name, "attn_q.weight")) return Category::kAttnQ;
  if (Has(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Has(name, "ffn_up")) return Category::kFfnUp;
  if (Has(name, "ffn_gate")) return Category::kFfnGate;
  if (Has(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The layer of "blk.N.…": llama-quantize counts attn_v and ffn_down tensors in file order, one per layer.
int LayerOf(const std::string& name) {
  int layer = 0;
  return std::sscanf(name.c_str(), "blk.%d.", &layer) == 1 ? layer : 0;
}

int64_t BlockOf(GgmlType type) { return FindType(type)->block_size; }

GgmlType AttnV(uint32_t ft, GgmlType t, const MixtureModel& m, int i, int n_gqa) {
  if (ft == kQ2_K) {
    t = n_gqa >= 4 ? GgmlType::kQ4_K : GgmlType::kQ3_K;
  } else if (ft == kQ3_K_M) {
    t = i < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
  } else if (ft == kQ3_K_L) {
    t = GgmlType::kQ5_K;
  } else if ((ft == kIQ4_NL || ft == kIQ4_XS) && n_gqa >= 4) {
    t = GgmlType::kQ5_K;
  } else if ((ft == kQ4_K_M || ft == kQ5_K_M) && UseMoreBits(i, m.n_layer)) {
    t = GgmlType::kQ6_K;
  } else if (ft == kQ4_K_S && i < 4) {
    t = GgmlType::kQ5_K;
  }
  if (m.n_expert == 8) t = GgmlType::kQ8_0;
  return t;
}

GgmlType FfnDown(uint32_t ft, GgmlType t, bool has_imatrix, int i, int n) {
  if (ft == kQ2_K) return GgmlType::kQ3_K;
  if (ft == kQ3_K_M) return i < n / 16 ? GgmlType::kQ5_K : GgmlType::kQ4_K;
  if (ft == kQ3_K_L) return GgmlType::kQ5_K;
  if (ft == kQ4_K_M) return UseMoreBits(i, n) ? GgmlType::kQ6_K : t;
  if (i < n / 8 && (ft == kIQ4_NL || ft == kIQ4_XS) && !has_imatrix) return GgmlType::kQ5_K;
  if (ft == kQ5_K_M && UseMoreBits(i, n)) return GgmlType::kQ6_K;
  if (ft == kQ4_K_S && i < n / 8) return GgmlType::kQ5_K;
  if ((ft == kQ4_0 || ft == kQ5_0) && has_imatrix && i < n / 8) return ft == kQ4_0 ? GgmlType::kQ4_1 : GgmlType::kQ5_1;
  return t;
}

GgmlType AttnOutput(uint32_t ft, GgmlType t, const MixtureModel& m) {
  if (m.n_expert == 8) {
    const bool bump = ft == kQ2_K || ft == kQ3_K_S || ft == kQ3_K_M || ft == kIQ4_NL || ft == kQ4_K_S ||
                      ft == kQ4_K_M || ft == kIQ4_XS;
    return bump ? GgmlType::kQ5_K : t;
  }
  if (ft == kQ2_K) return GgmlType::kQ3_K;
  if (ft == kQ3_K_M) return GgmlType::kQ4_K;
  if (ft == kQ3_K_L) return GgmlType::kQ5_K;
  return t;
}

// llama_tensor_get_type_impl for the file types above.
GgmlType MixtureType(const FileType& ft, bool has_imatrix, const MixtureModel& m, const std::string& name,
                     int64_t ncols) {
  GgmlType t = ft.default_type;
  const Category c = CategoryOf(name);
  const int n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 0;
  if (c == Category::kOutput || (m.tied_embeddings && c == Category::kTokenEmbd)) {
    if (ncols % BlockOf(t) != 0) return GgmlType::kQ8_0;
    return t != GgmlType::kQ8_0 ? GgmlType::kQ6_K : t;
  }
  switch (c) {
    case Category::kAttnV: return AttnV(ft.ftype, t, m, LayerOf(name), n_gqa);
    case Category::kAttnK: return m.n_expert == 8 ? GgmlType::kQ8_0 : t;
    case Category::kFfnDown: return FfnDown(ft.ftype, t, has_imatrix, LayerOf(name), m.n_layer);
    case Category::kAttnOutput: return AttnOutput(ft.ftype, t, m);
    default: return t;
  }
}

}  // namespace

absl::StatusOr<const FileType*> ParseFileType(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<std::string> names;
  for (const FileType& f : kFileTypes) {
    if (upper == f.name) return &f;
    names.push_back(f.name);
  }
  return absl::InvalidArgumentError(StrCat("gguf_type: \"", name, "\" is not one of ", StrJoin(names, ", ")));
}

TensorTypeChoice ChooseTensorType(const FileType& ft, bool pure, bool has_imatrix, const MixtureModel& model,
                                  const std::string& name, int64_t ncols) {
  if (!FindType(ft.default_type)->quantized) return {ft.default_type, ""};
  const GgmlType wanted = pure ? ft.default_type : MixtureType(ft, has_imatrix, model, name, ncols);
  if (ncols % BlockOf(wanted) == 0) return {wanted, ""};
  // tensor_type_fallback: the 32-block type of about the same size, F16 when even that does not divide.
  GgmlType fallback = wanted;
  switch (wanted) {
    case GgmlType::kIQ4_XS: fallback = GgmlType::kIQ4_NL; break;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K: fallback = GgmlType::kQ4_0; break;
    case GgmlType::kQ4_K: fallback = GgmlType::kQ5_0; break;
    case GgmlType::kQ5_K: fallback = GgmlType::kQ5_1; break;
    case GgmlType::kQ6_K: fallback = GgmlType::kQ8_0; break;
    default: break;
  }
  if (ncols % BlockOf(fallback) != 0) fallback = GgmlType::kF16;
  return {fallback, StrCat(name, " - ncols ", ncols, " not divisible by ", BlockOf(wanted), " (required for type ",
                           FindType(wanted)->name, ") -> falling back to ", FindType(fallback)->name)};
}

}  // namespace quark::exporter::gguf

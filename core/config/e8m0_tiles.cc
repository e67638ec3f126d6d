#include "core/config/e8m0_tiles.h"

#include "core/base/strings.h"

namespace quark {

std::optional<E8m0TileForm> E8m0TileFormOf(const QuantSpec& w) {
  if (!IsE8m0Tiles(w) || w.block_size.size() != 2 || w.block_size[0] <= 0) return std::nullopt;
  if (w.block_size[1] == 32) return E8m0TileForm::kMxfp8;
  if (w.block_size[0] == 128 && w.block_size[1] == 128) return E8m0TileForm::kFp8Block;
  return std::nullopt;
}

std::vector<E8m0TileIssue> E8m0TileIssues(const QuantSpec& w, const QuantSpec* in, const std::string& path) {
  std::vector<E8m0TileIssue> out;
  const std::string wp = path + ".weight";
  auto error = [&out](std::string field, std::string message) { out.push_back({std::move(field), std::move(message)}); };
  if (w.dtype != DType::kFp8E4M3) {
    error(wp + ".dtype", StrCat("E8M0 tile scales (scale_type float8_e8m0fnu) are for fp8_e4m3 weights, got ",
                                Name(w.dtype)));
  }
  if (!w.symmetric) error(wp + ".symmetric", "E8M0 tiles are symmetric (vLLM checks symmetric is True)");
  if (w.is_dynamic) error(wp + ".is_dynamic", "E8M0 tiles are static weight scales");
  if (w.observer != ObserverKind::kMinMax) {
    error(wp + ".observer", StrCat("E8M0 tiles take each tile's amax (min_max), got ", Name(w.observer)));
  }
  if (w.group_size) error(wp + ".group_size", "per_block E8M0 tiles take block_size [rows, cols], not a group size");
  const bool two = w.block_size.size() == 2 && w.block_size[0] > 0 && w.block_size[1] > 0;
  if (!two) {
    error(wp + ".block_size", "per_block needs block_size [rows, cols] of two positive integers");
    return out;
  }
  const int rows = w.block_size[0], cols = w.block_size[1];
  if (!E8m0TileFormOf(w)) {
    error(wp + ".block_size",
          StrCat("[", rows, ", ", cols, "] is neither MXFP8's [R, 32] (vLLM QuarkW8A8Mxfp8) nor [128, 128] ",
                 "(QuarkW8A8Fp8PerBlock, kFp8Static128BlockE8M0Sym): cols must be 32, or the block [128, 128]"));
  }
  const std::string ip = path + ".input_tensors";
  const std::string want =
      E8m0TileFormOf(w) == E8m0TileForm::kMxfp8
          ? StrCat("vLLM loads E8M0 weight tiles [", rows, ", ", cols, "] (QuarkW8A8Mxfp8) only with dynamic symmetric ",
                   "fp8_e4m3 per_group 32 inputs and quantizes them as MXFP8 (E8M0 scales): the input must be MX ",
                   "fp8_e4m3")
          : StrCat("vLLM loads E8M0 weight tiles [", rows, ", ", cols, "] only with dynamic symmetric fp8_e4m3 ",
                   "per_group ", cols, " inputs");
  if (in == nullptr) {
    error(ip, StrCat("none; ", want));
    return out;
  }
  // MXFP8's [R, 32] tiles: vLLM's QuarkW8A8Mxfp8 quantizes the input with E8M0 scales per 32 (kMxfp8Dynamic) whatever
  // the input spec's scale format says, and Quark reads an MX input spec with its PerBlockMXObserver; so the input
  // must be MX fp8_e4m3 (a float-scaled one would be evaluated here as neither consumer runs it). The [128, 128] form
  // takes float-scaled token groups (QuarkW8A8Fp8PerBlock).
  const bool mxfp8 = E8m0TileFormOf(w) == E8m0TileForm::kMxfp8;
  const bool fp8_elements = in->ElementType() == DType::kFp8E4M3 && !in->IsNvfp4();
  if (!fp8_elements || (mxfp8 ? !in->IsMx() : in->IsMx())) {
    error(ip + ".dtype", StrCat(Name(in->ElementType()), in->IsMx() ? " (MX)" : " (float scales)", "; ", want));
  }
  if (in->qscheme != QScheme::kPerGroup) error(ip + ".qscheme", StrCat(Name(in->qscheme), "; ", want));
  if (in->group_size.value_or(0) != cols) {
    error(ip + ".group_size",
          StrCat(in->group_size ? StrCat(*in->group_size) : std::string("none"), " is not the tile's cols ", cols,
                 "; ", want));
  }
  if (!in->is_dynamic) error(ip + ".is_dynamic", StrCat("false; ", want));
  if (!in->symmetric) error(ip + ".symmetric", StrCat("false; ", want));
  return out;
}

}  // namespace quark

#include "core/config/online_rotation.h"

#include <string>
#include <variant>

namespace quark {

bool HasOnlineR4(const Config& config) {
  for (const AlgoConfig& algo : config.algo_config) {
    if (const auto* rotation = std::get_if<RotationAlgo>(&algo); rotation != nullptr && rotation->r4) return true;
  }
  return false;
}

absl::Status CheckR4ExportFormat(std::string_view format) {
  // Each reader's reason (what its loader would do with the rotated down_proj weights W H: compute x (W H)^T without
  // the x H that undoes it, a different model).
  std::string why;
  if (format == "hf_quark") {
    why = "vLLM's quark loader (QuarkConfig) reads no rotation, so down_proj's online Hadamard would be lost; export "
          "compressed_tensors, whose transform_config vLLM applies";
  } else if (format == "gguf") {
    why = "llama.cpp's graph has no online transform on ffn_down's input";
  } else if (format == "onnx") {
    why = "the ONNX decoder graph written here has no online Hadamard before down_proj";
  } else {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(std::string(format) + " cannot carry the rotation's r4 (an online Hadamard on "
                                    "down_proj's input): " + why);
}

}  // namespace quark

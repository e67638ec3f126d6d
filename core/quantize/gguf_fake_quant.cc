#include "core/quantize/gguf_fake_quant.h"

#include <ATen/Parallel.h>

#include <vector>

#include "core/base/strings.h"

namespace quark::quantize {

namespace gguf = exporter::gguf;

absl::StatusOr<at::Tensor> GgufFakeQuantize(const at::Tensor& w, gguf::GgmlType type) {
  const gguf::TypeTraits* traits = gguf::FindType(type);
  if (traits == nullptr) return absl::InvalidArgumentError(StrCat("GGUF type ", static_cast<int>(type), " is unknown"));
  if (w.dim() != 2) return absl::InvalidArgumentError(StrCat("GGUF fake quantization of a ", w.dim(), "-D tensor"));
  const int64_t rows = w.size(0), cols = w.size(1);
  if (cols % traits->block_size != 0) {
    return absl::InvalidArgumentError(
        StrCat(traits->name, ": rows of ", cols, " are not a multiple of its block of ", traits->block_size));
  }
  const at::Tensor x = w.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor y = at::empty({rows, cols}, x.options());
  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  const int64_t row_bytes = gguf::RowBytes(type, cols);
  // Rows are independent: each thread quantizes its range through its own block buffer.
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> blocks(static_cast<size_t>(row_bytes));
    for (int64_t r = begin; r < end; ++r) {
      traits->from_float(src + r * cols, blocks.data(), cols);
      traits->to_float(blocks.data(), dst + r * cols, cols);
    }
  });
  return y.to(w.device(), w.scalar_type());
}

int64_t GgufScaleGroup(gguf::GgmlType type) {
  switch (type) {
    case gguf::GgmlType::kQ2_K:
    case gguf::GgmlType::kQ3_K:
    case gguf::GgmlType::kQ6_K:
      return 16;
    case gguf::GgmlType::kF32:
    case gguf::GgmlType::kF16:
    case gguf::GgmlType::kBF16:
      return -1;
    default:
      return 32;  // Q4_K / Q5_K / IQ4_XS sub-blocks, Q4_0..Q8_0 and IQ4_NL blocks
  }
}

algorithms::LayerQuantSpecs GgufSearchSpecs(const std::map<std::string, std::string>& linears,
                                            const std::map<std::string, gguf::GgmlType>& types) {
  algorithms::LayerQuantSpecs specs;
  for (const auto& [relative, module] : linears) {
    auto it = types.find(module + ".weight");
    if (it == types.end()) continue;
    const gguf::GgmlType type = it->second;
    algorithms::LinearQuantSpecs s;
    QuantSpec groups;
    groups.dtype = DType::kUInt4;
    groups.qscheme = QScheme::kPerGroup;
    groups.group_size = static_cast<int>(GgufScaleGroup(type));
    groups.symmetric = false;
    s.weight = groups;
    s.weight_qdq = [type](const at::Tensor& w) { return GgufFakeQuantize(w, type); };
    specs[relative] = std::move(s);
  }
  return specs;
}

}  // namespace quark::quantize

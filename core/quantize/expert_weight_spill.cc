#include "core/quantize/expert_weight_spill.h"

#include <filesystem>
#include <fstream>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/config/quant_types.h"
#include "core/numerics/real_quant.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;

// Bitwise, not numeric, equality: -0.0 and 0.0 must stay apart for a reloaded expert to equal the one GPTQ left.
bool BitIdentical(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  return at::equal(a.contiguous().view(bits), b.contiguous().view(bits));
}

bool IsGridDtype(at::ScalarType t) { return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf; }

// 4-bit codes (uint4 in [0, 15] as bytes, int4 in [-8, 7] as signed bytes) two to a byte, low nibble first.
at::Tensor PackNibbles(const at::Tensor& codes) {
  const at::Tensor u = (codes.scalar_type() == at::kChar ? codes.to(at::kShort) + 8 : codes.to(at::kShort))
                           .flatten()
                           .view({-1, 2});
  return (u.select(1, 0) + u.select(1, 1) * 16).to(at::kByte);
}

at::Tensor UnpackNibbles(const at::Tensor& packed, at::ScalarType dtype, at::IntArrayRef shape) {
  const at::Tensor b = packed.to(at::kShort);
  at::Tensor u = at::stack({b.remainder(16), b.div(16, "floor")}, 1).flatten();
  if (dtype == at::kChar) u = u - 8;
  return u.to(dtype).view(shape);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ExpertWeightSpill>> ExpertWeightSpill::Create(const std::string& parent) {
  QUARK_ASSIGN_OR_RETURN(std::unique_ptr<ScratchFolder> folder, ScratchFolder::Create(parent, "quark-experts"));
  return std::shared_ptr<ExpertWeightSpill>(new ExpertWeightSpill(std::move(folder)));
}

int64_t ExpertWeightSpill::grid_tensors() const {
  int64_t n = 0;
  for (const auto& [name, entry] : entries_) n += entry.spec.has_value();
  return n;
}

absl::Status ExpertWeightSpill::Put(const std::string& name, const at::Tensor& weight, const QuantSpec* spec,
                                    const QuantParams* params) {
  const at::Tensor host = weight.to(at::kCPU).contiguous();
  Entry entry;
  entry.dtype = host.scalar_type();
  std::vector<at::Tensor> fields;
  if (spec != nullptr && params != nullptr && !spec->IsMx() && IsGridDtype(entry.dtype)) {
    QUARK_ASSIGN_OR_RETURN(RealQuantized real, QuantizeReal(host, *spec, OnHost(*params)));
    QUARK_ASSIGN_OR_RETURN(at::Tensor back, Dequantize(real, *spec, entry.dtype));
    if (BitIdentical(back, host)) {
      entry.spec = *spec;
      at::Tensor codes = real.codes;
      const bool byte_codes = codes.scalar_type() == at::kByte || codes.scalar_type() == at::kChar;
      if (IntegerBits(spec->dtype) == 4 && byte_codes && codes.numel() % 2 == 0) {
        const at::Tensor packed = PackNibbles(codes);
        // Only codes that come back: a code outside the 4-bit range stays a byte.
        if (at::equal(UnpackNibbles(packed, codes.scalar_type(), codes.sizes()), codes)) {
          entry.nibbles = true;
          entry.codes_dtype = codes.scalar_type();
          entry.codes_shape = codes.sizes().vec();
          codes = packed;
        }
      }
      fields = {codes, real.scale, real.zero_point};
      if (real.global_scale.defined()) fields.push_back(real.global_scale);
    }
  }
  if (!entry.spec) fields = {host.to(at::kFloat)};
  entry.file = (fs::path(folder_->path()) / StrCat(next_file_++, ".bin")).string();
  std::ofstream out(entry.file, std::ios::binary | std::ios::trunc);
  for (const at::Tensor& field : fields) {
    // Undefined fields (no zero point) are kept as empty tensors: their position names them.
    const at::Tensor c = field.defined() ? field.to(at::kCPU).contiguous() : at::empty({0}, at::kFloat);
    entry.fields.push_back(Field{c.scalar_type(), c.sizes().vec(), entry.bytes});
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
    entry.bytes += static_cast<int64_t>(c.nbytes());
  }
  out.close();
  if (!out) return absl::InternalError(StrCat(entry.file, ": cannot write the spilled weight of ", name));
  if (auto old = entries_.find(name); old != entries_.end()) {
    std::error_code ec;
    fs::remove(old->second.file, ec);
    bytes_ -= old->second.bytes;
  }
  bytes_ += entry.bytes;
  entries_[name] = std::move(entry);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<at::Tensor>> ExpertWeightSpill::ReadFields(const Entry& entry) const {
  std::ifstream in(entry.file, std::ios::binary);
  std::vector<at::Tensor> fields;
  for (const Field& f : entry.fields) {
    at::Tensor t = at::empty(f.shape, at::TensorOptions().dtype(f.dtype));
    in.seekg(f.offset);
    in.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!in) return absl::DataLossError(StrCat(entry.file, ": cannot read back the spilled weight at byte ", f.offset));
    fields.push_back(std::move(t));
  }
  return fields;
}

absl::StatusOr<at::Tensor> ExpertWeightSpill::GetStored(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return absl::NotFoundError(StrCat("tensor \"", name, "\" is not among ", Location()));
  const Entry& entry = it->second;
  QUARK_ASSIGN_OR_RETURN(std::vector<at::Tensor> fields, ReadFields(entry));
  if (!entry.spec) return fields[0].to(entry.dtype);
  RealQuantized real;
  real.codes = entry.nibbles ? UnpackNibbles(fields[0], entry.codes_dtype, entry.codes_shape) : std::move(fields[0]);
  real.scale = fields[1].numel() > 0 ? std::move(fields[1]) : at::Tensor();
  real.zero_point = fields[2].numel() > 0 ? std::move(fields[2]) : at::Tensor();
  if (fields.size() > 3) real.global_scale = std::move(fields[3]);
  return Dequantize(real, *entry.spec, entry.dtype);
}

absl::StatusOr<at::Tensor> ExpertWeightSpill::Get(const std::string& name, at::ScalarType dtype) const {
  QUARK_ASSIGN_OR_RETURN(at::Tensor stored, GetStored(name));
  return stored.to(dtype);
}

}  // namespace quark::quantize

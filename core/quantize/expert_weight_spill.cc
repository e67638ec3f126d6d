#include "core/quantize/expert_weight_spill.h"

#include <filesystem>
#include <fstream>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/numerics/packing.h"
#include "core/numerics/real_quant.h"
#include "core/quantize/bit_identical.h"
#include "core/quantize/grid_weights.h"

namespace quark::quantize {
namespace {

namespace fs = std::filesystem;

constexpr PackMethod kSpillPacking = PackMethod::kOrder;

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
  if (spec != nullptr && params != nullptr) {
    QUARK_ASSIGN_OR_RETURN(std::optional<RealQuantized> real, ExactGridCodes(host, *spec, OnHost(*params)));
    if (real) {
      entry.spec = *spec;
      // The export's packing (int4 eight to an int32 word, fp4 two to a byte), where it gives the weight back.
      absl::StatusOr<RealQuantized> packed = PackForExport(*real, *spec, kSpillPacking);
      if (packed.ok()) {
        absl::StatusOr<RealQuantized> unpacked = UnpackFromExport(*packed, *spec, kSpillPacking);
        absl::StatusOr<at::Tensor> back =
            unpacked.ok() ? Dequantize(*unpacked, *spec, entry.dtype) : absl::StatusOr<at::Tensor>(unpacked.status());
        entry.packed = back.ok() && BitIdentical(*back, host);
      }
      const RealQuantized& kept = entry.packed ? *packed : *real;
      fields = {kept.codes, kept.scale, kept.zero_point, kept.global_scale};
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
  const auto field = [&](size_t i) { return fields[i].numel() > 0 ? std::move(fields[i]) : at::Tensor(); };
  RealQuantized real{field(0), field(1), field(2), field(3)};
  if (entry.packed) {
    QUARK_ASSIGN_OR_RETURN(real, UnpackFromExport(real, *entry.spec, kSpillPacking));
  }
  return Dequantize(real, *entry.spec, entry.dtype);
}

absl::StatusOr<at::Tensor> ExpertWeightSpill::Get(const std::string& name, at::ScalarType dtype) const {
  QUARK_ASSIGN_OR_RETURN(at::Tensor stored, GetStored(name));
  return stored.to(dtype);
}

}  // namespace quark::quantize

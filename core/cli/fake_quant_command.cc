// quark fake-quant --spec SPEC.json --input IN.safetensors --output OUT.safetensors [--real CODES.safetensors]
//                  [--role weight|activation] [--pack-method reorder|order]
// Applies one Quark tensor spec (the keys of a quantization_config tensor spec) to every floating-point tensor of a
// safetensors file, each with its own observer, and writes the fake-quantized tensors under the same names and
// dtypes. --real also writes the export form: NAME.qweight, NAME.scale and (integer dtypes) NAME.zero_point.
// Non-float tensors are copied unchanged. Bad spec or input: exit code 2, the message names the field or tensor.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "core/cli/command_registry.h"
#include "core/config/e8m0_tiles.h"  // #30
#include "core/config/quark_json.h"
#include "core/numerics/packing.h"
#include "core/numerics/tensor_quantizer.h"

namespace quark::cli {
namespace {

namespace ckpt = quark::checkpoint;

struct FakeQuantOptions {
  std::string spec;
  std::string input;
  std::string output;
  std::string real;
  std::string role = "weight";
  std::string pack_method = "reorder";
};

struct NamedTensor {
  std::string name;
  ckpt::StDType dtype;
  at::Tensor tensor;               // its bytes are written as they are
  std::vector<int64_t> shape = {};  // empty: the tensor's own shape
};

// A failure of the input or the spec (exit 2) or of the work (exit 1), with its message.
struct Failure {
  int code;
  std::string message;
};

std::optional<at::ScalarType> TorchDtype(ckpt::StDType d) {
  switch (d) {
    case ckpt::StDType::kF32:
      return at::kFloat;
    case ckpt::StDType::kBF16:
      return at::kBFloat16;
    case ckpt::StDType::kF16:
      return at::kHalf;
    default:
      return std::nullopt;
  }
}

ckpt::StDType StDtypeOf(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ckpt::StDType::kF32;
    case at::kBFloat16:
      return ckpt::StDType::kBF16;
    case at::kHalf:
      return ckpt::StDType::kF16;
    case at::kInt:
      return ckpt::StDType::kI32;
    case at::kChar:
      return ckpt::StDType::kI8;
    default:
      return ckpt::StDType::kU8;
  }
}

absl::StatusOr<QuantSpec> ReadSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(fmt::format("--spec: cannot read {}", path));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(fmt::format("--spec: {} is not valid JSON", path));
  return QuantSpecFromQuarkJson(j, "spec");
}

// Writes tensors to `path` (a single safetensors file) through a scratch folder beside it.
absl::Status WriteFile(const std::string& path, const std::vector<NamedTensor>& tensors) {
  namespace fs = std::filesystem;
  const fs::path scratch = fs::path(path).concat(".partial.d");
  std::vector<ckpt::PlannedTensor> plan;
  for (const auto& t : tensors) plan.push_back({t.name, t.dtype, t.shape.empty() ? t.tensor.sizes().vec() : t.shape});
  auto writer = ckpt::CheckpointWriter::Create(scratch.string(), plan);
  if (!writer.ok()) return writer.status();
  for (const auto& t : tensors) {
    const at::Tensor c = t.tensor.contiguous();
    const std::string_view bytes(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
    if (auto st = (*writer)->Write(t.name, bytes); !st.ok()) return st;
  }
  if (auto st = (*writer)->Finish(); !st.ok()) return st;
  std::error_code ec;
  fs::rename(scratch / "model.safetensors", path, ec);
  if (ec) return absl::InternalError(fmt::format("{}: {}", path, ec.message()));
  fs::remove_all(scratch, ec);
  return absl::OkStatus();
}

// Appends the export form of `x` (codes, scale, zero point) to `out`.
absl::Status AddReal(const std::string& name, const TensorQuantizer& q, const at::Tensor& x, PackMethod method,
                     std::vector<NamedTensor>& out) {
  auto real = q.Export(x);
  if (!real.ok()) return real.status();
  auto packed = PackForExport(*real, q.spec(), method);
  if (!packed.ok()) return packed.status();
  ckpt::StDType code_dtype = StDtypeOf(packed->codes.scalar_type());
  // #30: E8M0 tiles store fp8 codes like any fp8 weight (only OCP MX keeps its element bytes untyped).
  if (!IsOcpMx(q.spec()) && q.spec().ElementType() == DType::kFp8E4M3) code_dtype = ckpt::StDType::kF8E4M3;
  if (!IsOcpMx(q.spec()) && q.spec().ElementType() == DType::kFp8E5M2) code_dtype = ckpt::StDType::kF8E5M2;
  out.push_back({name + ".qweight", code_dtype, packed->codes});
  out.push_back({name + ".scale", StDtypeOf(packed->scale.scalar_type()), packed->scale});
  if (packed->zero_point.defined()) {
    out.push_back({name + ".zero_point", ckpt::StDType::kI32, packed->zero_point});
  }
  return absl::OkStatus();
}

std::optional<Failure> Process(const FakeQuantOptions& o, std::vector<NamedTensor>& fake, std::vector<NamedTensor>& real) {
  auto spec = ReadSpec(o.spec);
  if (!spec.ok()) return Failure{kExitBadInput, std::string(spec.status().message())};
  if (o.role != "weight" && o.role != "activation") {
    return Failure{kExitBadInput, fmt::format("--role: {} is not weight or activation", o.role)};
  }
  const TensorRole role = o.role == "weight" ? TensorRole::kWeight : TensorRole::kActivation;
  const auto method = ParsePackMethod(o.pack_method);
  if (!method) return Failure{kExitBadInput, fmt::format("--pack-method: {} is not reorder or order", o.pack_method)};
  auto reader = ckpt::CheckpointReader::OpenFile(o.input);
  if (!reader.ok()) return Failure{kExitBadInput, fmt::format("--input: {}", std::string(reader.status().message()))};
  for (const std::string& name : (*reader)->Names()) {
    auto ref = (*reader)->Get(name);
    if (!ref.ok()) return Failure{kExitBadInput, std::string(ref.status().message())};
    const std::string_view bytes = ref->bytes();
    const auto dtype = TorchDtype(ref->info->dtype);
    // The mapping is read-only: every tensor is copied out before use.
    if (!dtype) {
      const at::Tensor raw = at::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())}, at::kByte);
      fake.push_back({name, ref->info->dtype, raw.clone(), ref->info->shape});
      continue;
    }
    const at::Tensor x = at::from_blob(const_cast<char*>(bytes.data()), ref->info->shape, at::dtype(*dtype)).clone();
    auto q = TensorQuantizer::Create(*spec, role);
    if (!q.ok()) return Failure{kExitBadInput, std::string(q.status().message())};
    absl::Status st = (*q)->Observe(x);
    if (st.ok()) st = (*q)->Freeze();
    auto y = st.ok() ? (*q)->FakeQuantize(x) : absl::StatusOr<at::Tensor>(st);
    if (!y.ok()) return Failure{kExitBadInput, fmt::format("tensor {}: {}", name, std::string(y.status().message()))};
    fake.push_back({name, ref->info->dtype, *y});
    if (!o.real.empty() && !IsCastType(spec->dtype)) {
      if (auto r = AddReal(name, **q, x, *method, real); !r.ok()) {
        return Failure{kExitBadInput, fmt::format("tensor {}: {}", name, std::string(r.message()))};
      }
    }
  }
  return std::nullopt;
}

int RunFakeQuant(const FakeQuantOptions& o) {
  std::vector<NamedTensor> fake;
  std::vector<NamedTensor> real;
  if (auto failure = Process(o, fake, real)) {
    std::cerr << "quark fake-quant: " << failure->message << "\n";
    return failure->code;
  }
  if (auto st = WriteFile(o.output, fake); !st.ok()) {
    std::cerr << "quark fake-quant: --output: " << st.message() << "\n";
    return kExitFailure;
  }
  if (!o.real.empty()) {
    if (auto st = WriteFile(o.real, real); !st.ok()) {
      std::cerr << "quark fake-quant: --real: " << st.message() << "\n";
      return kExitFailure;
    }
  }
  std::cout << fmt::format("wrote {} tensors to {}", fake.size(), o.output);
  if (!o.real.empty()) std::cout << fmt::format(" and {} to {}", real.size(), o.real);
  std::cout << "\n";
  return kExitOk;
}

const CommandRegistration kFakeQuant([](CLI::App& app) {
  auto o = std::make_shared<FakeQuantOptions>();
  auto* command = app.add_subcommand("fake-quant", "fake-quantize every tensor of a safetensors file with one spec");
  command->add_option("--spec", o->spec, "JSON tensor spec (Quark quantization_config keys)")->required();
  command->add_option("--input", o->input, "input .safetensors")->required();
  command->add_option("--output", o->output, "output .safetensors (fake-quantized, same names and dtypes)")
      ->required();
  command->add_option("--real", o->real, "also write codes / scales / zero points (export form) here");
  command->add_option("--role", o->role, "weight (default) or activation: decides the default axes");
  command->add_option("--pack-method", o->pack_method, "int4 packing: reorder (default) or order");
  command->callback([o] { SetExitCode(RunFakeQuant(*o)); });
});

}  // namespace
}  // namespace quark::cli

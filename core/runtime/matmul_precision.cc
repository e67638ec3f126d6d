#include "core/runtime/matmul_precision.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/base/log.h"
#include "core/base/strings.h"

namespace quark::runtime {
namespace {

constexpr int kNoOverride = -1;
std::atomic<int> test_override{kNoOverride};

// Whole-word search: "avx512_bf16" must not match inside a longer flag name.
bool HasFlag(std::string_view flags, std::string_view flag) {
  for (size_t at = flags.find(flag); at != std::string_view::npos; at = flags.find(flag, at + 1)) {
    const bool starts = at == 0 || flags[at - 1] == ' ' || flags[at - 1] == '\t';
    const size_t end = at + flag.size();
    const bool ends = end == flags.size() || flags[end] == ' ' || flags[end] == '\t' || flags[end] == '\n';
    if (starts && ends) return true;
  }
  return false;
}

std::string CpuFlags() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) == 0) return line;
  }
  return "";  // not Linux, or no flags line: no native bf16 is assumed
}

Bf16Matmul ResolveOnce() {
  const char* env = std::getenv("QUARK_BF16_MATMUL");
  const std::string flags = CpuFlags();
  auto mode = ResolveBf16Matmul(env, flags);
  if (mode.ok()) return *mode;
  const Bf16Matmul detected = Bf16MatmulForCpuFlags(flags);
  log::Get("runtime")->warn("{}; using {}", std::string(mode.status().message()),
                            detected == Bf16Matmul::kNative ? "native" : "f32");
  return detected;
}

}  // namespace

absl::StatusOr<Bf16Matmul> ParseBf16Matmul(std::string_view value) {
  if (value == "native") return Bf16Matmul::kNative;
  if (value == "f32") return Bf16Matmul::kFloat32;
  return absl::InvalidArgumentError(StrCat("QUARK_BF16_MATMUL = \"", value, "\" is not native or f32"));
}

Bf16Matmul Bf16MatmulForCpuFlags(std::string_view cpu_flags) {
  return HasFlag(cpu_flags, "avx512_bf16") || HasFlag(cpu_flags, "amx_bf16") ? Bf16Matmul::kNative : Bf16Matmul::kFloat32;
}

absl::StatusOr<Bf16Matmul> ResolveBf16Matmul(const char* env_value, std::string_view cpu_flags) {
  if (env_value != nullptr && *env_value != '\0') return ParseBf16Matmul(env_value);
  return Bf16MatmulForCpuFlags(cpu_flags);
}

Bf16Matmul ActiveBf16Matmul() {
  const int forced = test_override.load(std::memory_order_relaxed);
  if (forced != kNoOverride) return static_cast<Bf16Matmul>(forced);
  static const Bf16Matmul resolved = ResolveOnce();  // magic static: resolved once, thread-safe
  return resolved;
}

void SetBf16MatmulForTest(std::optional<Bf16Matmul> mode) {
  test_override.store(mode ? static_cast<int>(*mode) : kNoOverride, std::memory_order_relaxed);
}

bool MatmulInFloat32(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 && t.is_cpu() && ActiveBf16Matmul() == Bf16Matmul::kFloat32;
}

at::Tensor ComputeLinear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  const at::ScalarType compute = MatmulInFloat32(input) ? at::kFloat : input.scalar_type();
  const at::Tensor w = weight.to(compute);
  const at::Tensor b = bias.defined() ? bias.to(compute) : bias;
  return at::linear(input.to(compute), w, b).to(input.scalar_type());
}

at::Tensor Float32Operands::Linear(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  if (!weight_.defined()) {
    weight_ = weight.to(at::kFloat);
    bias_ = bias.defined() ? bias.to(at::kFloat) : bias;
  }
  return at::linear(input.to(at::kFloat), weight_, bias_).to(input.scalar_type());
}

void Float32Operands::Reset() {
  weight_ = at::Tensor();
  bias_ = at::Tensor();
}

}  // namespace quark::runtime

#include "bench/algorithms/asymmetric_bench.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "bench/algorithms/mlp_block.h"
#include "bench/bench_clock.h"
#include "core/algorithms/asymmetric_gptq.h"
#include "core/algorithms/gptq.h"
#include "core/algorithms/hessian.h"
#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/checkpoint_reader.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/compute_device.h"

namespace quark::bench {
namespace {

double PeakRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

double RelativeError(const at::Tensor& x, const at::Tensor& w, const at::Tensor& xq, const at::Tensor& q) {
  const at::Tensor reference = at::matmul(x, w.t()).to(at::kDouble);
  const at::Tensor diff = reference - at::matmul(xq, q.t()).to(at::kDouble);
  return diff.pow(2).sum().item<double>() / reference.pow(2).sum().item<double>();
}

/// x: the float model's input [T, K]; xq: the quantized model's [T, K]; w: the weight [N, K]. Float32, contiguous.
struct Inputs {
  at::Tensor x, xq, w;
};

absl::StatusOr<Inputs> SeededInputs(const AsymmetricFlags& f) {
  int64_t n = 0, k = 0, t = 0;
  if (std::sscanf(f.random.c_str(), "%ld,%ld,%ld", &n, &k, &t) != 3 || n <= 0 || k < 8 || t <= 0) {
    return absl::InvalidArgumentError(StrCat("--random: '", f.random, "' is not N,K,T with K >= 8"));
  }
  at::manual_seed(f.seed);
  const at::Tensor channel_scale = at::exp(at::randn({k}) * 0.8);
  const at::Tensor mix = at::randn({k / 8, k});
  Inputs in;
  in.x = ((at::matmul(at::randn({t, k / 8}), mix) + 0.3 * at::randn({t, k})) * channel_scale).contiguous();
  in.xq = (in.x + at::matmul(at::randn({t, k / 8}), mix) * channel_scale * f.drift).contiguous();
  in.w = at::randn({n, k}) * 0.02;
  return in;
}

/// Reads each tensor from the file into memory of its own (one copy, no mapped pages left in the resident set), as
/// the peer's harness reads the same file, so both sides' peak RSS holds the inputs once.
absl::StatusOr<Inputs> ReadInputs(const std::string& path) {
  namespace ckpt = quark::checkpoint;
  auto reader = ckpt::CheckpointReader::OpenFile(path);
  if (!reader.ok()) {
    return absl::InvalidArgumentError(StrCat("--load-inputs: ", std::string(reader.status().message())));
  }
  std::ifstream file(path, std::ios::binary);
  std::map<std::string, at::Tensor> read;
  for (const char* name : {"x", "xq", "w"}) {
    auto ref = (*reader)->Get(name);
    if (!ref.ok()) {
      return absl::InvalidArgumentError(StrCat("--load-inputs ", path, ": ", std::string(ref.status().message())));
    }
    if (ref->info->dtype != ckpt::StDType::kF32 || ref->info->shape.size() != 2) {
      return absl::InvalidArgumentError(StrCat("--load-inputs ", path, ": `", name, "` must be a float32 matrix"));
    }
    at::Tensor t = at::empty(ref->info->shape, at::kFloat);
    file.seekg(static_cast<std::streamoff>(ref->file->FileOffset(*ref->info)));
    file.read(static_cast<char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
    if (!file) return absl::DataLossError(StrCat("--load-inputs ", path, ": cannot read `", name, "`"));
    read[name] = t;
  }
  Inputs in{read["x"], read["xq"], read["w"]};
  if (in.xq.sizes() != in.x.sizes() || in.w.size(1) != in.x.size(1)) {
    return absl::InvalidArgumentError(StrCat("--load-inputs ", path, ": needs x and xq [T, K] and w [N, K]; got x [",
                                             in.x.size(0), ", ", in.x.size(1), "], xq [", in.xq.size(0), ", ",
                                             in.xq.size(1), "], w [", in.w.size(0), ", ", in.w.size(1), "]"));
  }
  return in;
}

}  // namespace

int RunAsymmetric(const AsymmetricFlags& f) {
  if (f.method != "gptaq" && f.method != "qronos") return std::cerr << "method: gptaq or qronos\n", 2;
  auto inputs = f.load_inputs.empty() ? SeededInputs(f) : ReadInputs(f.load_inputs);
  if (!inputs.ok()) return std::cerr << inputs.status().message() << "\n", 2;
  const at::Tensor x = inputs->x, xq = inputs->xq, w = inputs->w;
  const int64_t n = w.size(0), k = w.size(1), t = x.size(0);
  if (!f.save_inputs.empty()) {
    const std::map<std::string, std::string> metadata = {
        {"random", f.random}, {"seed", std::to_string(f.seed)}, {"drift", StrCat(f.drift)}, {"made_by", "algo_bench"}};
    if (auto s = WriteTensors(f.save_inputs, {{"x", x}, {"xq", xq}, {"w", w}}, metadata); !s.ok()) {
      return std::cerr << "--save-inputs: " << s.message() << "\n", 1;
    }
    const nlohmann::ordered_json saved = {{"saved", f.save_inputs}, {"shape", {n, k}}, {"tokens", t}};
    std::cout << saved.dump() << std::endl;
    return 0;
  }
  QuantSpec spec;
  spec.dtype = DType::kUInt4;
  spec.symmetric = false;
  spec.qscheme = QScheme::kPerGroup;
  spec.group_size = f.group_size;
  spec.ch_axis = 1;
  algorithms::AsymmetricOptions o;
  o.method = f.method == "gptaq" ? HessianMethod::kGptaq : HessianMethod::kQronos;
  o.alpha = f.method == "gptaq" ? 0.25 : 1e-3;
  o.gptq.block_size = f.block_size;
  o.gptq.act_order = f.act_order;
  o.gptq.static_groups = true;
  o.gptq.fused_blocks = !f.column_loop;

  auto device = runtime::ComputeDevice::Open(f.device, "--device");
  if (!device.ok()) return std::cerr << device.status().message() << "\n", 2;
  // On a device the layer and its inputs are placed before the clock starts, as the layer pass has them there.
  const at::Tensor w_on = device->Place(w), x_on = device->Place(x), xq_on = device->Place(xq);
  device->Synchronize();
  const auto start = Clock::now();
  algorithms::AsymmetricStats stats(o.method, k);
  if (auto s = stats.Add(xq_on.unsqueeze(0), x_on.unsqueeze(0)); !s.ok()) return std::cerr << s.message() << "\n", 1;
  device->Synchronize();
  const double stats_s = Seconds(start);
  const auto quantize_start = Clock::now();
  auto [hessian, cross] = stats.Release();  // quantized in their own memory, as the layer pass does
  auto on_device = algorithms::AsymmetricQuantizeWeight(w_on, std::move(hessian), std::move(cross), spec, o);
  if (!on_device.ok()) return std::cerr << f.method << ": " << on_device.status().message() << "\n", 2;
  device->Synchronize();
  const double quantize_s = Seconds(quantize_start), total_s = Seconds(start);
  algorithms::GptqResult result = *std::move(on_device);  // on the host from here
  result.weight = device->ToHost(result.weight);
  result.params.scale = device->ToHost(result.params.scale);
  result.params.zero_point = device->ToHost(result.params.zero_point);
  const double peak_mb = PeakRssMb();
  if (!f.save_weights.empty()) {
    const std::map<std::string, at::Tensor> written = {{"weight", result.weight.contiguous()},
                                                       {"scale", result.params.scale.contiguous()},
                                                       {"zero_point", result.params.zero_point.contiguous()}};
    if (auto s = WriteTensors(f.save_weights, written, {{"algorithm", f.method}}); !s.ok()) {
      return std::cerr << "--save-weights: " << s.message() << "\n", 1;
    }
  }
  auto rtn = FakeQuantizeDynamic(w, spec, TensorRole::kWeight);
  if (!rtn.ok()) return std::cerr << "rtn: " << rtn.status().message() << "\n", 2;
  nlohmann::ordered_json line = {
      {"algorithm", f.method},
      {"shape", {n, k}},
      {"tokens", t},
      {"inputs", f.load_inputs.empty() ? "seeded" : f.load_inputs},
      {"threads", at::get_num_threads()},
      {"stats_s", stats_s},
      {"quantize_s", quantize_s},
      {"total_s", total_s},
      {"peak_rss_mb", peak_mb},
      {"rel_output_error", RelativeError(x, w, xq, result.weight)},
      {"rtn_rel_output_error", RelativeError(x, w, xq, *rtn)},
      {"fused_blocks", result.fused_blocks},
      {"device", device->name()},
  };
  if (f.compare_gptq) {
    algorithms::HessianAccumulator h(k, false, true);
    if (auto s = h.Add(xq.unsqueeze(0)); !s.ok()) return std::cerr << s.message() << "\n", 1;
    algorithms::GptqOptions g = o.gptq;
    g.tensor_ops = true;
    auto hessian = std::move(h).Finish();
    if (!hessian.ok()) return std::cerr << hessian.status().message() << "\n", 1;
    const auto gptq_start = Clock::now();
    auto gptq = algorithms::GptqQuantizeWeight(w, *std::move(hessian), spec, g);
    if (!gptq.ok()) return std::cerr << "gptq: " << gptq.status().message() << "\n", 2;
    line["gptq_quantize_s"] = Seconds(gptq_start);
    line["gptq_rel_output_error"] = RelativeError(x, w, xq, gptq->weight);
  }
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace quark::bench

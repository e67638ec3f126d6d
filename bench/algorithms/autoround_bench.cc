#include "bench/algorithms/autoround_bench.h"

#include <ATen/core/grad_mode.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/algorithms/mlp_block.h"
#include "bench/bench_clock.h"
#include "core/algorithms/autoround.h"
#include "core/numerics/fake_quant.h"
#include "core/runtime/calibration_data.h"
#include "core/runtime/full_model.h"
#include "core/runtime/linear.h"
#include "core/runtime/tokenizer.h"

namespace quark::bench {
namespace {

using OrderedJson = nlohmann::ordered_json;

// Llama's linears in auto-round's wrapping order (the block's named_modules order).
constexpr const char* kLinears[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

QuantSpec Uint4Groups(int group_size) {
  QuantSpec spec;
  spec.dtype = DType::kUInt4;
  spec.symmetric = false;
  spec.qscheme = QScheme::kPerGroup;
  spec.group_size = group_size;
  spec.ch_axis = 1;
  return spec;
}

std::vector<at::Tensor> Outputs(runtime::DecoderLayer& layer, runtime::TransformerModel& model,
                                const std::vector<at::Tensor>& inputs) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> out;
  for (const at::Tensor& x : inputs) out.push_back(layer.forward(x, model.Context(x.size(1))).to(at::kFloat));
  return out;
}

// Mean squared error over all elements of `got` against `want`, in float64.
double Mse(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  double sum = 0, elements = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    sum += (got[i].to(at::kDouble) - want[i].to(at::kDouble)).pow(2).sum().item<double>();
    elements += static_cast<double>(got[i].numel());
  }
  return sum / elements;
}

}  // namespace

int RunAutoRoundBench(const AutoRoundBenchFlags& f) {
  auto lm = OpenModelAtLayer(f.model_dir, f.layer);
  if (!lm.ok()) return std::cerr << lm.status().message() << "\n", 2;
  runtime::TransformerModel& model = (*lm)->model();
  const auto& config = model.config();
  if (f.samples <= 0 || f.heldout <= 0 || f.iters <= 0 || f.batch <= 0) {
    return std::cerr << "--samples, --heldout, --iters, --batch: must be positive\n", 2;
  }
  runtime::DecoderLayer& layer = *(*lm)->layers()[f.layer];
  auto tokenizer = runtime::Tokenizer::Open(f.model_dir + "/tokenizer.model", config.bos_token_id, config.eos_token_id);
  if (!tokenizer.ok()) return std::cerr << "--model: " << tokenizer.status().message() << "\n", 2;
  runtime::CalibrationOptions calib;
  calib.path = f.calib;
  calib.format = runtime::CalibrationFormat::kText;
  calib.num_samples = f.samples + f.heldout;
  calib.seq_len = f.seq_len;
  calib.seed = f.seed;
  auto set = runtime::LoadCalibrationSet(calib, tokenizer->get());
  if (!set.ok()) return std::cerr << "--calib: " << set.status().message() << "\n", 2;
  if (set->samples.size() != static_cast<size_t>(f.samples + f.heldout)) {
    return std::cerr << "--calib: " << set->samples.size() << " windows, wanted " << f.samples + f.heldout << "\n", 2;
  }
  // The layer's inputs: the float model's hidden states after the layers before it.
  std::vector<at::Tensor> train, heldout;
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < set->samples.size(); ++i) {
      const at::Tensor& ids = set->samples[i];
      auto embedded = model.Embed(ids);
      if (!embedded.ok()) return std::cerr << embedded.status().message() << "\n", 1;
      at::Tensor h = *embedded;
      for (int l = 0; l < f.layer; ++l) h = (*lm)->layers()[l]->forward(h, model.Context(ids.size(1)));
      (i < static_cast<size_t>(f.samples) ? train : heldout).push_back(h.to(at::kFloat).contiguous());
    }
  }
  const std::vector<at::Tensor> train_targets = Outputs(layer, model, train);
  const std::vector<at::Tensor> heldout_targets = Outputs(layer, model, heldout);

  std::map<std::string, at::Tensor> tensors = {
      {"train_inputs", at::cat(train, 0)},
      {"heldout_inputs", at::cat(heldout, 0)},
      {"train_targets", at::cat(train_targets, 0)},
      {"heldout_targets", at::cat(heldout_targets, 0)},
  };
  auto* llama = dynamic_cast<runtime::LlamaDecoderLayer*>(&layer);
  if (llama == nullptr) return std::cerr << "--model: not a Llama-family model\n", 2;
  tensors["input_layernorm.weight"] = llama->input_layernorm->weight().to(at::kFloat);
  tensors["post_attention_layernorm.weight"] = llama->post_attention_layernorm->weight().to(at::kFloat);
  std::map<std::string, at::Tensor> float_weights;
  for (const char* name : kLinears) {
    auto linear = layer.FindLinear(name);
    if (linear == nullptr || linear->bias().defined()) return std::cerr << name << ": missing or with a bias\n", 2;
    float_weights[name] = linear->weight().clone();
    tensors[std::string(name) + ".weight"] = linear->weight().to(at::kFloat);
  }
  const std::map<std::string, std::string> metadata = {
      {"source", f.model_dir},
      {"layer", std::to_string(f.layer)},
      {"num_attention_heads", std::to_string(config.num_attention_heads)},
      {"num_key_value_heads", std::to_string(config.num_key_value_heads)},
      {"head_dim", std::to_string(config.head_dim)},
      {"rope_theta", fmt::format("{}", config.rope_theta)},
      {"rms_norm_eps", fmt::format("{}", config.rms_norm_eps)},
      {"group_size", std::to_string(f.group_size)},
      {"calibration", fmt::format("{} + {} windows of {} tokens from {}, seed {}", f.samples, f.heldout, f.seq_len,
                                  f.calib, f.seed)}};
  std::filesystem::create_directories(f.save_dir);
  if (auto s = WriteTensors(f.save_dir + "/layer.safetensors", tensors, metadata); !s.ok()) {
    return std::cerr << "--save: " << s.message() << "\n", 1;
  }

  const QuantSpec spec = Uint4Groups(f.group_size);
  std::vector<algorithms::AutoRoundTarget> targets;
  for (const char* name : kLinears) targets.push_back({name, spec});
  algorithms::AutoRoundOptions options;
  options.iters = f.iters;
  options.lr = options.minmax_lr = 1.0 / f.iters;
  options.batch_size = f.batch;
  const int order_seed = f.order_seed >= 0 ? f.order_seed : f.seed;
  options.seed = static_cast<uint32_t>(order_seed);
  std::vector<double> losses;
  algorithms::AutoRoundCallbacks callbacks;
  callbacks.on_iteration = [&losses](int, double loss) { losses.push_back(loss); };
  const algorithms::BlockForward forward = [&](const at::Tensor& x) { return layer.forward(x, model.Context(x.size(1))); };
  const auto start = Clock::now();
  auto result = algorithms::AutoRoundQuantizeLayer(layer, train, forward, targets, options, callbacks);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!result.ok()) return std::cerr << "autoround: " << result.status().message() << "\n", 1;
  const double heldout_mse = Mse(Outputs(layer, model, heldout), heldout_targets);
  const double train_mse = Mse(Outputs(layer, model, train), train_targets);
  std::map<std::string, at::Tensor> rounded;
  for (const char* name : kLinears) rounded[std::string(name) + ".weight"] = layer.FindLinear(name)->weight().to(at::kFloat);
  // Round to nearest on the min-max grid (what iteration 0 evaluates), on the same held-out windows.
  for (const char* name : kLinears) {
    auto linear = std::dynamic_pointer_cast<runtime::FloatLinear>(layer.FindLinear(name));
    auto params = ParamsOf(float_weights[name], spec, TensorRole::kWeight);
    if (!params.ok()) return std::cerr << name << ": " << params.status().message() << "\n", 1;
    auto rtn = FakeQuantize(float_weights[name], spec, *params);
    if (!rtn.ok()) return std::cerr << name << ": " << rtn.status().message() << "\n", 1;
    linear->set_weight(*rtn);
  }
  const double rtn_heldout_mse = Mse(Outputs(layer, model, heldout), heldout_targets);
  if (auto s = WriteTensors(f.save_dir + "/engine_weights.safetensors", rounded); !s.ok()) {
    return std::cerr << "--save: " << s.message() << "\n", 1;
  }
  const OrderedJson line = {{"side", "engine"},
                            {"iters", f.iters},
                            {"batch", f.batch},
                            {"samples", f.samples},
                            {"seq_len", f.seq_len},
                            {"group_size", f.group_size},
                            {"seed", f.seed},
                            {"order_seed", order_seed},
                            {"first_loss", result->first_loss},
                            {"best_loss", result->best_loss},
                            {"best_iter", result->best_iter},
                            {"heldout_mse", heldout_mse},
                            {"rtn_heldout_mse", rtn_heldout_mse},
                            {"train_mse", train_mse},
                            {"changed_roundings", result->changed_roundings},
                            {"weights", result->weights},
                            {"changed_fraction", static_cast<double>(result->changed_roundings) / result->weights},
                            {"seconds", seconds},
                            {"threads", at::get_num_threads()},
                            {"losses", losses}};
  std::ofstream(f.save_dir + "/engine.json") << line.dump() << "\n";
  std::cout << line.dump() << std::endl;
  return 0;
}

}  // namespace quark::bench

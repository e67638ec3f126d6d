#include "core/estimate/job_estimate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <variant>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/forward_workspace.h"
#include "core/checkpoint/token_pass_memory.h"
#include "core/config/asymmetric_gptq_cost.h"
#include "core/config/e8m0_tiles.h"  // #30
#include "core/config/gptq_block_grid.h"
#include "core/config/row_groups.h"
#include "core/estimate/awq_cost.h"
#include "core/estimate/capture_cost.h"
#include "core/estimate/rotation_training_cost.h"

namespace quark::estimate {
namespace {

constexpr double kCholeskyChainFactor = 1.35;  // Cholesky (K^3/3) + inverse (~2K^3/3) + Cholesky (K^3/3)
constexpr double kColumnLoopEfficiency = 0.25;  // rank-1 updates inside a block run at a quarter of GEMM speed
constexpr int kAutoSmoothQuantGrid = 20;

struct Linear {
  std::string module;
  int64_t layer = -1;
  int64_t out = 0;
  int64_t in = 0;
  const LayerQuantConfig* config = nullptr;  // nullptr: left in float
};

// (An NVFP4 input is dynamic per group yet calibrates its global scale.)
bool StaticActivation(const std::optional<QuantSpec>& spec) {
  return spec && (!spec->is_dynamic || spec->IsNvfp4()) && !IsCastType(spec->dtype);
}

bool StaticActivations(const LayerQuantConfig& c) {
  return StaticActivation(c.input_tensors) || StaticActivation(c.output_tensors);
}

// Linears reading the same input share one GPTQ Hessian (and one AWQ input statistic).
std::string InputGroup(const Linear& linear) {
  const std::string& m = linear.module;
  const size_t dot = m.rfind('.');
  const std::string leaf = dot == std::string::npos ? m : m.substr(dot + 1);
  const std::string parent = dot == std::string::npos ? "" : m.substr(0, dot);
  if (leaf == "q_proj" || leaf == "k_proj" || leaf == "v_proj") return parent + ".qkv";
  if (leaf == "gate_proj" || leaf == "up_proj") return parent + ".gate_up";
  return m;
}

// The GPTQ step a linear belongs to: its module with an expert's index replaced by "*". GPTQ's MoE templates quantize
// one projection of every expert as one step ("mlp.experts.*.down_proj"), and it captures the Hessians of a step's
// routed linears in one pass, so a step's distinct inputs are all held at once (then their factors, one per input).
// With experts streamed in groups (expert_group_size > 0) GPTQ quantizes the routed linears expert by expert
// (algorithms/gptq_layer.h): each expert's projection is a step of its own.
std::string GptqStep(const Linear& linear, bool experts_in_groups) {
  const std::string& m = linear.module;
  const size_t experts = m.find(".experts.");
  if (experts == std::string::npos || experts_in_groups) return m;
  const size_t start = experts + 9, end = m.find('.', start);
  return m.substr(0, start) + "*" + (end == std::string::npos ? "" : m.substr(end));
}

struct Ctx {
  const ModelShape& model;
  const JobInputs& job;
  const Throughput& rates;
  std::vector<Linear> linears;
  uint64_t layer_f32 = 0;
  uint64_t activations = 0;
  int64_t tokens = 0;
  int64_t seq = 0;  // tokens a calibration sample
  bool calibrates = false;
  bool gpu = false;
  /// One forward of every decoder layer over the calibration tokens: the linears (experts at their routed share)
  /// and the attention scores, in GEMM FLOPs.
  double forward_flops = 0;
};

// Whether the calibration runs observers: static activations anywhere in the config, or the KV cache.
bool ObservesActivations(const Config& config) {
  if (!config.kv_cache_quant_config.empty() || StaticActivations(config.global_quant_config)) return true;
  for (const auto& [type, c] : config.layer_type_quant_config) {
    if (StaticActivations(c)) return true;
  }
  for (const PatternQuantConfig& p : config.layer_quant_config) {
    if (StaticActivations(p.config)) return true;
  }
  return false;
}

// The phase with `working` bytes of tensors being computed on: on a CUDA worker those live on the GPU and the
// host keeps the streamed source layer; on a CPU worker all of it is host memory.
PhaseEstimate Phase(const Ctx& c, std::string name, double seconds, uint64_t working) {
  PhaseEstimate p;
  p.phase = std::move(name);
  p.seconds = seconds;
  if (c.gpu) {
    p.peak_gpu_bytes = working;
    const uint64_t layer_source = c.model.num_layers > 0 ? c.model.layer_params_total * 2 / c.model.num_layers : 0;
    p.peak_host_bytes = kProcessBaseBytes + 2 * layer_source;
  } else {
    p.peak_host_bytes = kProcessBaseBytes + working;
  }
  return p;
}

checkpoint::TokenPasses Passes(bool float_stream, bool awq, bool autosmoothquant) {
  checkpoint::TokenPasses passes;
  passes.float_stream = float_stream;
  passes.awq = awq;
  passes.autosmoothquant = autosmoothquant;
  return passes;
}

// What the scaling searches and a float stream keep per calibration token, over all tokens, at the widest layer
// (checkpoint/token_pass_memory.h, as the device budget counts it), in float32.
uint64_t TokenPassBytes(const Ctx& c, const checkpoint::TokenPasses& passes) {
  const checkpoint::ModelConfig& mc = c.model.config;
  std::set<std::string> quantized;
  for (const Linear& l : c.linears) {
    if (l.config != nullptr && l.config->weight) quantized.insert(l.module);
  }
  int64_t widest = 0;
  for (int64_t layer = 0; layer < c.model.num_layers; ++layer) {
    const std::string prefix = checkpoint::LayerPrefix(mc, layer);
    const auto is_quantized = [&](const checkpoint::LinearSpec& l) { return quantized.count(prefix + l.relative_name) > 0; };
    widest = std::max(widest, checkpoint::TokenPassElements(checkpoint::LayerLinears(mc, layer), is_quantized, mc, passes));
  }
  return static_cast<uint64_t>(widest) * static_cast<uint64_t>(c.tokens) * 4;
}

// MoE: a token runs through top-k of the E experts, so an expert's linear sees k/E of the tokens on average (the
// calibration top-up adds at most moe_min_expert_tokens per expert and layer, a small share); 1 without experts.
double RoutedShare(const checkpoint::ModelConfig& mc) {
  return mc.num_experts > 0 ? static_cast<double>(mc.num_experts_per_tok) / mc.num_experts : 1.0;
}

bool IsRoutedExpert(const Linear& l) { return l.module.find(".experts.") != std::string::npos; }

// The weights a calibration token multiplies on average: out x in, a routed expert's at its share of the tokens.
double ActiveWeights(const Ctx& c, const Linear& l) {
  const double weights = static_cast<double>(l.out) * static_cast<double>(l.in);
  return IsRoutedExpert(l) ? weights * RoutedShare(c.model.config) : weights;
}

// The tokens AWQ's clip search sees of a linear: the calibration's, a routed expert's share of them.
int64_t ClipSearchTokens(const Ctx& c, const Linear& l) {
  if (!IsRoutedExpert(l)) return c.tokens;
  return static_cast<int64_t>(std::llround(static_cast<double>(c.tokens) * RoutedShare(c.model.config)));
}

// A decoder linear's name within its layer ("self_attn.o_proj"): what AWQ's clip search decides on.
std::string RelativeName(const Ctx& c, const Linear& l) {
  const std::string prefix = checkpoint::LayerPrefix(c.model.config, l.layer);
  return l.module.rfind(prefix, 0) == 0 ? l.module.substr(prefix.size()) : l.module;
}

// AWQ's clip search beside the recorded inputs: its widest linear's (checkpoint::AwqClipElements), in float32.
uint64_t AwqClipBytes(const Ctx& c) {
  int64_t widest = 0;
  for (const Linear& l : c.linears) {
    if (l.config == nullptr || !l.config->weight || l.layer < 0 || !checkpoint::AwqClipsLinear(RelativeName(c, l))) {
      continue;
    }
    const int64_t sampled = checkpoint::AwqClipSampledTokens(ClipSearchTokens(c, l));
    const int64_t group = RowGroupColumns(*l.config->weight, l.in);
    widest = std::max(widest, checkpoint::AwqClipElements(l.out, l.in, group, sampled));
  }
  return static_cast<uint64_t>(widest) * 4;
}

// AWQ's ratio grid (awq_cost.h): every quantized decoder linear in its pair's inspected forwards (a routed expert's at
// its share of the tokens) and its trial weights, and each such layer's inspected attention scores.
double AwqGridSecondsOf(const Ctx& c, int grid) {
  AwqGridWork work;
  std::set<int64_t> layers;
  for (const Linear& l : c.linears) {
    if (l.config == nullptr || l.layer < 0) continue;
    work += AwqGridLinearWork(RelativeName(c, l), l.out, l.in, ActiveWeights(c, l), c.tokens, grid);
    layers.insert(l.layer);
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    work += AwqGridAttentionWork(c.model.config.hidden_size, c.seq, c.job.calibration_samples, grid);
  }
  return AwqGridSeconds(work, c.rates);
}

// AWQ's clip search (awq_cost.h) over every quantized decoder linear.
double AwqClipSeconds(const Ctx& c) {
  ClipSearchWork work;
  for (const Linear& l : c.linears) {
    if (l.config == nullptr || !l.config->weight || l.layer < 0) continue;
    work += AwqClipSearchWork(RelativeName(c, l), l.out, l.in, ClipSearchTokens(c, l));
  }
  return AwqClipSearchSeconds(work, c.rates);
}

double AlgoForwardSeconds(const Ctx& c, int grid) {
  double flops = 0, bytes = 0;
  for (const Linear& l : c.linears) {
    if (l.config == nullptr || l.layer < 0) continue;
    flops += 2.0 * l.out * l.in * static_cast<double>(c.tokens) * grid;
    bytes += 4.0 * l.out * l.in * grid;
  }
  return flops / c.rates.gemm_flops + bytes / c.rates.fake_quant_bytes_per_s;
}

// GPTQ, or GPTAQ / Qronos (algorithms/asymmetric_gptq.h): the same capture, column loop and lazy updates, plus what the
// asymmetric methods add. GPTAQ derives its factor and P = alpha triu_1(dXX L) L^T (on the blocks of its triangles:
// GptaqPFlops) once per input, as GPTQ its factor, and runs a second lazy GEMM (W1 P); Qronos factorises per weight
// (its factors are not shared by an input's readers) and re-solves (QronosResolveFlops) before its loop; the statistics
// are two K x K matrices per input (H and dXX / G, a second GEMM over the tokens), the float model's layer runs beside
// the quantized one (its forward and its activations); GPTAQ holds two K x K matrices per input (H or U, and dXX or P),
// Qronos a third (the inverse) while a weight is quantized.
PhaseEstimate GptqPhase(const Ctx& c, int block_size, HessianMethod method) {
  const bool asymmetric = method != HessianMethod::kGptq;
  std::map<std::string, int64_t> groups;  // input group -> K
  std::map<std::string, std::map<std::string, int64_t>> steps;  // (layer, GPTQ step) -> its input groups -> K
  double gemm = 0, column_loop = 0, device_ops = 0, per_weight_factor = 0;
  int64_t widest = 0;
  for (const Linear& l : c.linears) {
    if (l.config == nullptr || l.layer < 0) continue;
    groups[InputGroup(l)] = l.in;
    steps[GptqStep(l, c.job.expert_group_size > 0)][InputGroup(l)] = l.in;
    const double k = static_cast<double>(l.in), n = static_cast<double>(l.out);
    gemm += n * k * k;
    column_loop += n * k * block_size;
    widest = std::max(widest, l.in);
    if (method == HessianMethod::kGptaq) gemm += n * k * k;  // the second lazy GEMM (W1 P)
    if (method == HessianMethod::kQronos) {
      per_weight_factor += kCholeskyChainFactor * k * k * k;
      gemm += QronosResolveFlops(l.out, l.in);
    }
    // Every grid of gptq_block_grid.h runs GPTQ's fused blocks (one launch a block); the rest the column loop.
    const bool fused = l.config->weight && GptqBlockGridOf(*l.config->weight) != GptqBlockGrid::kNone;
    device_ops += fused ? std::ceil(static_cast<double>(l.in) / block_size) * kGptqOpsPerFusedBlock
                        : static_cast<double>(l.in) * kGptqOpsPerColumn;
  }
  // The most K x K float32 matrices alive at once: one per input of the largest step (a dense model's steps read one
  // input each: the widest K^2; gpt-oss-20b's "mlp.experts.*.gate_up_proj": 32 of 2880^2).
  double hessian_elements = 0;
  for (const auto& [step, inputs] : steps) {
    double elements = 0;
    for (const auto& [group, k] : inputs) elements += static_cast<double>(k) * k;
    hessian_elements = std::max(hessian_elements, elements);
  }
  double factor = 0;
  // The captures: each input's layer run up to its first reader (capture_cost.h), the quantized stream's; GPTAQ and
  // Qronos capture the float stream's too. (Experts streamed in groups: their recording passes below.)
  std::set<std::string> quantized;
  for (const Linear& l : c.linears) {
    if (l.config != nullptr && l.layer >= 0) quantized.insert(l.module);
  }
  const double captures = CaptureFlops(c.model.config, c.model.num_layers, quantized, c.job.calibration_samples, c.seq,
                                       /*routed_recorded=*/c.job.expert_group_size > 0);
  gemm += (asymmetric ? 2 : 1) * captures;
  const checkpoint::ModelConfig& mc = c.model.config;
  uint64_t recorded = 0;
  if (c.job.expert_group_size > 0 && mc.num_experts > 0) {
    // Experts in groups: each group's experts' inputs are recorded by running the routed block alone on its inputs
    // (kept from one forward: float32 hidden states of every token), its experts left out: ceil(E / G) passes of the
    // router and the shared expert over the tokens. The recorded inputs are held: the group's share of the routed
    // tokens plus each expert's coverage top-up.
    const double experts = static_cast<double>(mc.num_experts);
    const double group = std::min(experts, static_cast<double>(c.job.expert_group_size));
    std::map<int64_t, double> shared_params;  // MoE layer -> its shared expert's linears
    std::set<int64_t> moe_layers;
    for (const Linear& l : c.linears) {
      if (l.layer < 0) continue;
      if (IsRoutedExpert(l)) moe_layers.insert(l.layer);
      if (l.module.find("shared_expert") != std::string::npos) shared_params[l.layer] += static_cast<double>(l.out) * l.in;
    }
    for (const int64_t layer : moe_layers) {
      gemm += std::ceil(experts / group) * 2.0 * (shared_params[layer] + experts * mc.hidden_size) *
              static_cast<double>(c.tokens);
    }
    const double routed_tokens = static_cast<double>(c.tokens) * mc.num_experts_per_tok / experts;
    recorded = static_cast<uint64_t>(4.0 * mc.hidden_size * (group * (routed_tokens + kExpertTopUpTokens) + c.tokens));
  }
  for (const auto& [group, k] : groups) {
    gemm += (asymmetric ? 4.0 : 2.0) * static_cast<double>(c.tokens) * k * k;
    factor += kCholeskyChainFactor * static_cast<double>(k) * k * k;
    if (method == HessianMethod::kGptaq) gemm += GptaqPFlops(k);  // shared by the input's readers, as the factor
  }
  uint64_t asymmetric_bytes = 0;
  if (asymmetric) {
    if (method == HessianMethod::kQronos) factor = per_weight_factor;
    gemm += c.forward_flops;  // the float model's layer beside the quantized one, for the next layer's float inputs
    // dXX / G per input beside H (each batch's product is added a slab of rows at a time); Qronos's inverse beside
    // both while a weight is quantized.
    asymmetric_bytes = static_cast<uint64_t>(4 * hessian_elements) + c.activations +
                       (method == HessianMethod::kQronos ? 4ull * widest * widest : 0);
  }
  const double seconds = gemm / c.rates.gemm_flops + factor / c.rates.cholesky_flops +
                         column_loop / (c.rates.gemm_flops * kColumnLoopEfficiency) +
                         device_ops * c.rates.device_op_seconds;
  const uint64_t extra = kGptqWorkspaceBytes + static_cast<uint64_t>(kGptqHessianCopies * hessian_elements * 4) +
                         recorded + asymmetric_bytes;
  // GPTQ quantizes each weight in its own float32 copy, in place: no second float32 copy of the layer beside the
  // streamed bfloat16 one (half of layer_f32), as the other phases hold.
  const char* name = method == HessianMethod::kGptaq ? "gptaq" : method == HessianMethod::kQronos ? "qronos" : "gptq";
  return Phase(c, name, seconds, 3 * c.layer_f32 / 2 + c.activations + extra);
}

// The parameters of the largest decoder layer as the streamer holds it: every linear, the layer's other tensors (its
// norms: what max_layer_params has beyond the largest layer's linears), and with `group_size` > 0 only that many of
// the layer's routed experts ("<...>.experts.<E>.<linear>").
uint64_t HeldLayerParams(const ModelShape& model, const std::vector<Linear>& linears, int64_t group_size) {
  if (group_size <= 0) return static_cast<uint64_t>(model.max_layer_params);
  struct LayerParams {
    double linears = 0, routed = 0;
    std::map<std::string, int> experts;
  };
  std::map<int64_t, LayerParams> layers;
  for (const Linear& l : linears) {
    if (l.layer < 0) continue;
    LayerParams& layer = layers[l.layer];
    const double n = static_cast<double>(l.out) * l.in;
    layer.linears += n;
    const size_t at = l.module.find(".experts.");
    if (at == std::string::npos || at + 9 >= l.module.size() || !std::isdigit(l.module[at + 9])) continue;
    layer.routed += n;
    layer.experts[l.module.substr(0, l.module.find('.', at + 9))] = 1;
  }
  double largest_linears = 0, held = 0;
  for (const auto& [index, layer] : layers) {
    largest_linears = std::max(largest_linears, layer.linears);
    const double experts = static_cast<double>(layer.experts.size());
    const double kept = experts > 0 ? layer.routed * std::min<double>(group_size, experts) / experts : 0;
    held = std::max(held, layer.linears - layer.routed + kept);
  }
  const double others = std::max(0.0, static_cast<double>(model.max_layer_params) - largest_linears);
  return static_cast<uint64_t>(held + others);
}

absl::Status CheckRates(const Throughput& t) {
  const std::pair<const char*, double> rates[] = {{"gemm", t.gemm_flops},
                                                  {"cholesky", t.cholesky_flops},
                                                  {"fake_quant_bytes_per_s", t.fake_quant_bytes_per_s},
                                                  {"disk_write_bytes_per_s", t.disk_write_bytes_per_s},
                                                  {"disk_read_bytes_per_s", t.disk_read_bytes_per_s}};
  for (const auto& [name, value] : rates) {
    if (!(value > 0)) return absl::InvalidArgumentError(absl::StrCat("throughput.", name, ": ", value, " is not positive"));
  }
  return absl::OkStatus();
}

}  // namespace

bool NeedsCalibration(const Config& config) { return !config.algo_config.empty() || ObservesActivations(config); }

absl::StatusOr<JobEstimate> EstimateJob(const ModelShape& model, const JobInputs& job, const Throughput& rates) {
  if (absl::Status s = CheckRates(rates); !s.ok()) return s;
  Ctx c{model, job, rates};
  c.gpu = rates.device == "cuda";
  const LayerPlan plan = BuildLayerPlan(job.config, model.modules);
  for (const LayerAssignment& a : plan.layers) {
    if (a.module_type != "Linear") continue;
    auto module = std::find_if(model.modules.begin(), model.modules.end(),
                               [&](const ModuleInfo& m) { return m.name == a.module; });
    if (module == model.modules.end() || module->weight_shape.size() != 2) continue;
    const bool quantized = a.source != ConfigSource::kExcluded && !a.config.Empty() && LayerIndex(a.module) >= 0;
    c.linears.push_back({a.module, LayerIndex(a.module), module->weight_shape[0], module->weight_shape[1],
                         quantized ? &a.config : nullptr});
  }
  const checkpoint::ModelConfig& mc = model.config;
  if (job.expert_group_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert_group_size: ", job.expert_group_size, " must be >= 0"));
  }
  if (job.expert_group_size > 0) {
    // As QuantizeRun::CheckExpertGroupSize: RTN schemes, or GPTQ alone.
    const auto& algos = job.config.algo_config;
    for (size_t i = 0; i < algos.size(); ++i) {
      const auto* gptq = std::get_if<GptqAlgo>(&algos[i]);
      if (gptq != nullptr && gptq->method == HessianMethod::kGptq && algos.size() == 1) continue;
      return absl::InvalidArgumentError(absl::StrCat("expert_group_size: experts streamed in groups run RTN schemes or "
                                                     "GPTQ alone, but algo_config[", i, "] is ",
                                                     std::string(AlgoName(algos[i]))));
    }
  }
  c.layer_f32 = 4ull * HeldLayerParams(model, c.linears, job.expert_group_size);
  c.calibrates = NeedsCalibration(job.config);
  const int64_t seq = std::min<int64_t>(job.calibration_seq_len,
                                        mc.max_position_embeddings > 0 ? mc.max_position_embeddings : job.calibration_seq_len);
  c.tokens = c.calibrates ? job.calibration_samples * seq : 0;
  c.seq = seq;
  if (c.calibrates) {
    c.activations = 2ull * c.tokens * mc.hidden_size * 4 +
                    static_cast<uint64_t>(checkpoint::ForwardWorkspaceBytes(mc, seq, mc.hidden_size, 4));
  }
  const uint64_t working = 2 * c.layer_f32 + c.activations;

  JobEstimate e;
  double quantized_weight_bytes = 0, float_format_weight_bytes = 0;
  for (const Linear& l : c.linears) {
    if (l.config == nullptr) continue;
    quantized_weight_bytes += 4.0 * l.out * l.in;
    const auto& w = l.config->weight;
    if (w && !IsOcpMx(*w) && IsFloatFormat(w->dtype)) float_format_weight_bytes += 4.0 * l.out * l.in;
  }
  const double params = static_cast<double>(model.params_total);
  e.phases.push_back(Phase(c, "load",
                           model.weight_bytes / rates.disk_read_bytes_per_s +
                               kLoadConvertPasses * 4.0 * params / rates.fake_quant_bytes_per_s,
                           c.layer_f32));
  double inactive_expert_params = 0;
  for (const Linear& l : c.linears) inactive_expert_params += static_cast<double>(l.out) * l.in - ActiveWeights(c, l);
  if (c.calibrates) {
    double linear_params = 0;
    for (const Linear& l : c.linears) linear_params += l.layer >= 0 ? ActiveWeights(c, l) : 0;
    c.forward_flops = 2.0 * linear_params * c.tokens +
                      4.0 * seq * seq * mc.hidden_size * job.calibration_samples * model.num_layers;
    // Every layer runs its quantized forward, whose outputs feed the next layer; static activations (and the KV
    // cache) add the observers' float forward before it (H200, Llama-2-7B fp8 128 x 2048: one forward charged was
    // 2.5x below the measured time).
    const int forwards = ObservesActivations(job.config) ? 2 : 1;
    e.phases.push_back(Phase(c, "calibrate", forwards * c.forward_flops / rates.gemm_flops, working));
  }
  for (const AlgoConfig& algo : job.config.algo_config) {
    if (const auto* gptq = std::get_if<GptqAlgo>(&algo)) {
      e.phases.push_back(GptqPhase(c, gptq->block_size > 0 ? gptq->block_size : 128, gptq->method));
    } else if (const auto* awq = std::get_if<AwqAlgo>(&algo)) {
      // The searches batch their trials (their default allowance beside them: checkpoint/token_pass_memory.h).
      const auto search_batch =
          static_cast<uint64_t>(c.gpu ? checkpoint::kGpuSearchBatchBytes : checkpoint::kCpuSearchBatchBytes);
      e.phases.push_back(Phase(c, "awq", AwqGridSecondsOf(c, std::max(1, awq->grid_size)) + AwqClipSeconds(c),
                               working + TokenPassBytes(c, Passes(true, true, false)) + AwqClipBytes(c) + search_batch));
    } else if (const auto* autoround = std::get_if<AutoRoundAlgo>(&algo)) {
      // #35 AutoRound: the float targets, then per iteration a batch's forward and backward (about 3 forwards).
      const double n = static_cast<double>(std::max<int64_t>(1, job.calibration_samples));
      const double batch = std::min(n, static_cast<double>(autoround->batch_size) * autoround->gradient_accumulate_steps);
      const int passes = static_cast<int>(std::ceil(1.0 + 3.0 * autoround->iters * batch / n));
      // #27: held, as the device budget counts it: the targets (one hidden state a token), the tuned weights' float32
      // copies and what autograd keeps of one sample's forward.
      checkpoint::TokenPasses targets;
      targets.autoround = true;
      const uint64_t training = static_cast<uint64_t>(checkpoint::kAutoRoundWeightCopies) * c.layer_f32 +
                                static_cast<uint64_t>(checkpoint::TrainingForwardBytes(mc, seq, mc.hidden_size, 4));
      e.phases.push_back(
          Phase(c, "autoround", AlgoForwardSeconds(c, passes), working + TokenPassBytes(c, targets) + training));
    } else if (std::holds_alternative<AutoSmoothQuantAlgo>(algo)) {
      e.phases.push_back(Phase(c, "autosmoothquant", AlgoForwardSeconds(c, kAutoSmoothQuantGrid),
                               working + TokenPassBytes(c, Passes(true, false, true))));
    } else if (std::holds_alternative<SmoothQuantAlgo>(algo)) {
      e.phases.push_back(Phase(c, "smoothquant", quantized_weight_bytes / rates.fake_quant_bytes_per_s,
                               working + TokenPassBytes(c, Passes(true, false, false))));
    } else if (const auto* rotation = std::get_if<RotationAlgo>(&algo)) {
      if (rotation->trainable) {
        // #35: SpinQuant's training holds the whole float model and one step's graph (it cannot stream layers), and
        // runs max_steps forward and backward passes over train_batch_size calibration windows before any layer.
        const double flops =
            RotationTrainingFlops(mc, seq, rotation->train_batch_size, rotation->max_steps, rotation->r2);
        const auto held = static_cast<uint64_t>(RotationTrainingBytes(mc, seq, rotation->train_batch_size));
        e.phases.push_back(Phase(c, "rotation_training", flops / rates.gemm_flops, held));
      }
      double flops = 0;
      for (const Linear& l : c.linears) {
        if (l.in == mc.hidden_size || l.out == mc.hidden_size) flops += 2.0 * l.out * l.in * mc.hidden_size;
      }
      e.phases.push_back(Phase(c, "rotation", flops / rates.gemm_flops, working));
    }
  }
  GgufArtifactOptions gguf;
  gguf.type = job.gguf_type;
  gguf.pure = job.gguf_pure;
  gguf.imatrix = job.gguf_imatrix;
  for (const AlgoConfig& algo : job.config.algo_config) gguf.untie_embeddings |= std::holds_alternative<RotationAlgo>(algo);
  double write_bytes = 0;
  for (ExportKind kind : job.formats) {
    absl::StatusOr<uint64_t> bytes = ArtifactBytes(model, plan, kind, gguf);
    if (!bytes.ok()) {
      e.notes.push_back(std::string(bytes.status().message()));
      continue;
    }
    e.artifacts.push_back({kind, *bytes});
    write_bytes += static_cast<double>(*bytes);
  }
  e.phases.push_back(Phase(c, "quantize_export",
                           kFakeQuantPasses * quantized_weight_bytes / rates.fake_quant_bytes_per_s +
                               (rates.float_codes_bytes_per_s > 0
                                    ? float_format_weight_bytes / rates.float_codes_bytes_per_s
                                    : 0) +
                               write_bytes / rates.disk_write_bytes_per_s,
                           working));
  const int64_t window = std::max<int64_t>(1, std::min(job.evaluation_seq_len, job.evaluation_tokens));
  const uint64_t window_working = c.layer_f32 + 4ull * window * (mc.hidden_size * 4 + mc.vocab_size) +
                                  4ull * mc.num_attention_heads * window * window;
  // One streamed pass of a model over `tokens` in windows of `span`: its GEMMs and attention, and its weights read.
  auto stream_seconds = [&](double tokens, int64_t span) {
    const double flops = 2.0 * (params - inactive_expert_params) * tokens +
                         4.0 * span * mc.hidden_size * tokens * model.num_layers;
    return flops / rates.gemm_flops + model.weight_bytes / rates.disk_read_bytes_per_s;
  };
  if (job.evaluation_tokens > 0) {
    const int runs = 2 + (job.accuracy_gate ? static_cast<int>(e.artifacts.size()) : 0);
    e.phases.push_back(Phase(c, "evaluate", runs * stream_seconds(job.evaluation_tokens, window), window_working));
  }
  if (!job.tasks.empty() && job.task_models > 0) {
    // The scorer's context: TaskScoreOptions::max_length's default (max_position_embeddings, 2048 when unset).
    const int64_t max_length = mc.max_position_embeddings > 0 ? mc.max_position_embeddings : 2048;
    const TaskWork work = EstimatedTaskWork(job.tasks, job.task_limit, mc.hidden_size, job.num_fewshot, max_length);
    uint64_t peak = c.layer_f32 + kTaskActivationBytes + 4ull * 64 * mc.vocab_size;
    // Generation (gsm8k) holds the whole decoder in float32 and its KV cache (kv_cache_decoder.h's
    // KvCacheDecoderBytes), not one layer at a time.
    if (const int64_t cache_tokens = GenerationCacheTokens(job.tasks, job.num_fewshot, max_length); cache_tokens > 0) {
      const uint64_t kv_width = static_cast<uint64_t>(mc.num_key_value_heads * mc.head_dim);
      peak = std::max<uint64_t>(peak, 4ull * model.layer_params_total +
                                          4ull * 2 * kv_width * cache_tokens * model.num_layers + 4ull * 64 * mc.vocab_size);
    }
    e.phases.push_back(Phase(c, "evaluate_tasks", job.task_models * TaskSeconds(model, work, rates), peak));
  }
  if (job.kld_exports > 0 && job.evaluation_tokens > 0) {
    e.phases.push_back(Phase(c, "evaluate_kld", 2.0 * job.kld_exports * stream_seconds(job.evaluation_tokens, window),
                             window_working));
  }
  for (const PhaseEstimate& p : e.phases) {
    e.total_seconds += p.seconds;
    if (p.peak_host_bytes > e.peak_host_bytes) e.peak_host_bytes = p.peak_host_bytes, e.peak_host_phase = p.phase;
    if (p.peak_gpu_bytes > e.peak_gpu_bytes) e.peak_gpu_bytes = p.peak_gpu_bytes, e.peak_gpu_phase = p.phase;
  }
  return e;
}

}  // namespace quark::estimate

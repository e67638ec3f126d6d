// The fp8 KV cache of an HF-quark export (#33 item 4): `quark eval` of the export (OpenQuantizedExport) against an
// independent float64 forward of the same file, written here from the safetensors bytes: fp8 e4m3 weights times
// their scales, every linear's input fake-quantized with its exported input_scale, V fake-quantized with v_proj's
// output_scale and K with k_proj's, after RoPE, where vLLM writes its fp8 cache (Quark's output quantizer on k_proj
// quantizes before RoPE: the forward computes that point too, to show the two differ by far more than float order
// does). numerics.md's fp8 formula; checkpoint-format.md's one max(k, v) scale.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_config.h"
#include "core/config/presets.h"
#include "core/quantize/quantize_model.h"
#include "core/quantize/reload.h"
#include "core/runtime/perplexity.h"
#include "core/runtime/tokenizer.h"
#include "tests/quantize/test_model.h"

namespace quark {
namespace {

constexpr int64_t kSeqLen = 128;
constexpr int64_t kWindows = 8;
// The spread of the mean NLL over equally valid float orders on this protocol (float64 against float32 forwards of
// the same export: up to 2.4e-3), with a margin.
constexpr double kFloatOrderNoise = 5e-3;

// e4m3fn byte -> value (bias 7, subnormals, 0x7f/0xff NaN).
double DecodeE4m3(uint8_t b) {
  const int sign = b >> 7, exponent = (b >> 3) & 0xF, mantissa = b & 7;
  const double v = exponent == 0 ? std::ldexp(mantissa / 8.0, -6) : std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return sign ? -v : v;
}

// numerics.md: round(clamp(x / s, -448, 448)) onto e4m3's grid, half to even, subnormals kept; times s.
double FakeE4m3(double x, double s) {
  const double y = std::clamp(x / s, -448.0, 448.0);
  if (y == 0) return 0;
  const int e = std::max(std::ilogb(y), -6);  // below 2^-6: the subnormal step 2^-9
  const double step = std::ldexp(1.0, e - 3);
  return std::nearbyint(y / step) * step * s;
}

// Where the reference quantizes K: before RoPE (Quark's output quantizer on k_proj) or after it (vLLM's cache write).
enum class KPoint { kBeforeRope, kAfterRope };

// The forward in `dtype` (float64 the reference; float32 another float order, for the size of the rounding noise).
class ReferenceForward {
 public:
  ReferenceForward(const std::string& dir, at::ScalarType dtype, KPoint k_point) : dtype_(dtype), k_point_(k_point) {
    auto reader = checkpoint::CheckpointReader::Open(dir);
    EXPECT_TRUE(reader.ok()) << reader.status();
    reader_ = *std::move(reader);
    auto config = checkpoint::LoadModelConfig(dir);
    EXPECT_TRUE(config.ok()) << config.status();
    config_ = *config;
  }

  at::Tensor Tensor(const std::string& name) const {
    auto ref = reader_->Get(name);
    EXPECT_TRUE(ref.ok()) << name;
    const std::string_view bytes = ref->bytes();
    std::vector<int64_t> shape = ref->info->shape;
    at::Tensor out = at::empty(shape, at::kDouble);
    double* o = out.data_ptr<double>();
    const int64_t n = out.numel();
    if (ref->info->dtype == checkpoint::StDType::kF8E4M3) {
      for (int64_t i = 0; i < n; ++i) o[i] = DecodeE4m3(static_cast<uint8_t>(bytes[i]));
    } else {
      EXPECT_EQ(ref->info->dtype, checkpoint::StDType::kF32) << name;
      for (int64_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, bytes.data() + 4 * i, 4);
        o[i] = f;
      }
    }
    return out.to(dtype_);
  }
  double Scalar(const std::string& name) const { return Tensor(name).item<double>(); }
  bool Has(const std::string& name) const { return reader_->Has(name); }

  // y = fq(x, input_scale) W^T with W = codes * weight_scale; then fq(y, output_scale) when exported (and, for
  // k_proj, when K is quantized before RoPE).
  at::Tensor Linear(const std::string& module, const at::Tensor& x, bool output_quantizer = true) const {
    const at::Tensor xq = FakeQuant(x, Scalar(module + ".input_scale"));
    const at::Tensor w = Tensor(module + ".weight") * Scalar(module + ".weight_scale");
    at::Tensor y = at::matmul(xq, w.t());
    if (output_quantizer && Has(module + ".output_scale")) y = FakeQuant(y, Scalar(module + ".output_scale"));
    return y;
  }

  // Each element through FakeE4m3 in double (a float32 x / s is exact in double; the result is an e4m3 value times
  // s, rounded once to dtype_ as the engine's float32 product rounds it).
  at::Tensor FakeQuant(const at::Tensor& x, double s) const {
    at::Tensor y = x.to(at::kDouble).contiguous().clone();
    double* p = y.data_ptr<double>();
    for (int64_t i = 0; i < y.numel(); ++i) p[i] = FakeE4m3(p[i], s);
    return y.to(dtype_);
  }

  at::Tensor RmsNorm(const at::Tensor& x, const std::string& weight) const {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + config_.rms_norm_eps) * Tensor(weight);
  }

  // HF Llama's rotate_half RoPE on [heads, T, d].
  at::Tensor Rope(const at::Tensor& x) const {
    const int64_t t = x.size(1), d = x.size(2);
    const at::Tensor inv = at::pow(config_.rope_theta, -at::arange(0, d, 2, at::kDouble) / d);
    const at::Tensor angles = at::outer(at::arange(t, at::kDouble), inv).to(dtype_);
    const at::Tensor cos = at::cat({angles.cos(), angles.cos()}, -1), sin = at::cat({angles.sin(), angles.sin()}, -1);
    const at::Tensor rotated = at::cat({-x.narrow(2, d / 2, d / 2), x.narrow(2, 0, d / 2)}, -1);
    return x * cos + rotated * sin;
  }

  // Mean next-token NLL of one window of ids [T].
  double WindowNll(const std::vector<int64_t>& ids) const {
    const int64_t t = static_cast<int64_t>(ids.size()), heads = config_.num_attention_heads;
    const int64_t kv_heads = config_.num_key_value_heads, d = config_.hidden_size / heads;
    const at::Tensor embed = Tensor("model.embed_tokens.weight");
    at::Tensor h = embed.index_select(0, at::tensor(ids, at::kLong));
    const at::Tensor mask = at::ones({t, t}, at::kBool).triu(1);
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const at::Tensor x = RmsNorm(h, p + "input_layernorm.weight");
      at::Tensor q = Linear(p + "self_attn.q_proj", x).view({t, heads, d}).transpose(0, 1);
      const bool after = k_point_ == KPoint::kAfterRope;
      at::Tensor k = Linear(p + "self_attn.k_proj", x, !after).view({t, kv_heads, d}).transpose(0, 1);
      at::Tensor v = Linear(p + "self_attn.v_proj", x).view({t, kv_heads, d}).transpose(0, 1);
      q = Rope(q);
      k = Rope(k);
      if (after && Has(p + "self_attn.k_proj.output_scale")) k = FakeQuant(k, Scalar(p + "self_attn.k_proj.output_scale"));
      k = k.repeat_interleave(heads / kv_heads, 0);
      v = v.repeat_interleave(heads / kv_heads, 0);
      at::Tensor scores = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(d));
      scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
      const at::Tensor attended = at::matmul(at::softmax(scores, -1), v).transpose(0, 1).reshape({t, heads * d});
      h = h + Linear(p + "self_attn.o_proj", attended);
      const at::Tensor y = RmsNorm(h, p + "post_attention_layernorm.weight");
      const at::Tensor gate = Linear(p + "mlp.gate_proj", y), up = Linear(p + "mlp.up_proj", y);
      h = h + Linear(p + "mlp.down_proj", gate * at::sigmoid(gate) * up);
    }
    const at::Tensor logits = at::matmul(RmsNorm(h, "model.norm.weight"), embed.t());  // tied, lm_head excluded
    const at::Tensor logp = at::log_softmax(logits.narrow(0, 0, t - 1), -1);
    const at::Tensor next = at::tensor(std::vector<int64_t>(ids.begin() + 1, ids.end()), at::kLong);
    return -logp.to(at::kDouble).gather(1, next.unsqueeze(1)).mean().item<double>();
  }

  const checkpoint::ModelConfig& config() const { return config_; }

 private:
  std::unique_ptr<checkpoint::CheckpointReader> reader_;
  checkpoint::ModelConfig config_;
  at::ScalarType dtype_;
  KPoint k_point_;
};

TEST(KvCacheReferenceTest, FloatFormatHelpersFollowNumerics) {
  EXPECT_EQ(DecodeE4m3(0x7E), 448.0);
  EXPECT_EQ(DecodeE4m3(0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(DecodeE4m3(0xB8), -1.0);
  EXPECT_EQ(FakeE4m3(1000, 1), 448.0);                          // saturates
  EXPECT_EQ(FakeE4m3(1.0625, 1), 1.0);                          // half way between 1 and 1.125: to even
  EXPECT_EQ(FakeE4m3(1.1875, 1), 1.25);                         // half way between 1.125 and 1.25: to even
  EXPECT_EQ(FakeE4m3(std::ldexp(1.4, -9), 1), std::ldexp(1.0, -9));  // subnormal step
  EXPECT_EQ(FakeE4m3(3.0, 2.0), 3.0);
}

TEST(KvCacheReferenceTest, EvalOfTheExportQuantizesKAfterRopeAsVllmsCacheWrite) {
  const std::string model = testing::FixturePath("stories260K");
  const std::string text = testing::FixturePath("eval/tinystories_validation_prefix.txt");
  std::map<std::string, std::string> outs;
  for (const char* kv : {"", "fp8"}) {
    QuantizeModelOptions o;
    o.config = *PresetConfig("fp8");
    ASSERT_TRUE(ApplyKvCacheDtype(kv, o.config).ok());
    o.num_calibration_samples = 4;
    o.seq_len = kSeqLen;
    o.calibration_file = text;
    o.output_dir = testing::TempPath("quark_kv_reference");
    auto report = QuantizeModel(model, o);
    ASSERT_TRUE(report.ok()) << report.status();
    outs[kv] = o.output_dir;
  }
  for (const auto& [kv, dir] : outs) {
    const std::string what = kv.empty() ? "no KV cache" : "fp8 KV cache";
    auto config = checkpoint::LoadModelConfig(dir);
    ASSERT_TRUE(config.ok()) << config.status();
    auto tokenizer = runtime::Tokenizer::Open(model, config->bos_token_id, config->eos_token_id);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    std::ifstream in(text);
    const std::string sample((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto ids = (*tokenizer)->EncodeWithBos(sample.substr(0, 40000));
    ASSERT_TRUE(ids.ok()) << ids.status();
    auto reloaded = quantize::OpenQuantizedExport(dir);
    ASSERT_TRUE(reloaded.ok()) << reloaded.status();
    runtime::PerplexityOptions eval;
    eval.seq_len = kSeqLen;
    eval.max_windows = kWindows;
    eval.hooks = reloaded->hooks;
    auto engine = runtime::EvaluatePerplexity(*reloaded->streamer, *ids, eval);
    ASSERT_TRUE(engine.ok()) << engine.status();
    ASSERT_EQ(engine->windows, kWindows);
    const auto mean_nll = [&](at::ScalarType dtype, KPoint k_point) {
      const ReferenceForward reference(dir, dtype, k_point);
      EXPECT_EQ(reference.Has("model.layers.0.self_attn.k_proj.output_scale"), !kv.empty());
      double sum = 0;
      for (const auto& [start, length] : runtime::PerplexityWindows(static_cast<int64_t>(ids->size()), kSeqLen, kWindows)) {
        sum += reference.WindowNll(std::vector<int64_t>(ids->begin() + start, ids->begin() + start + length));
      }
      return sum / kWindows;
    };
    const double before = mean_nll(at::kDouble, KPoint::kBeforeRope), after = mean_nll(at::kDouble, KPoint::kAfterRope);
    const double after32 = mean_nll(at::kFloat, KPoint::kAfterRope);
    std::cout << "[kv] " << what << ": quark eval " << engine->mean_nll << "; float64 forward, K quantized after RoPE "
              << after << " (the same in float32 " << after32 << "), before RoPE " << before << "\n";
    // vLLM's point: K quantized after RoPE. The float order alone moves this tiny model's mean NLL by up to 2.4e-3
    // (fp8 activations: one value across a rounding boundary moves a code by 1/16), so the bound is 5e-3; where K
    // is quantized moves it by ~2e-2 with the KV cache and not at all without one.
    EXPECT_NEAR(engine->mean_nll, after, kFloatOrderNoise) << what;
    if (kv.empty()) {
      EXPECT_EQ(before, after);
    } else {
      EXPECT_GT(std::abs(before - after), 2 * kFloatOrderNoise) << "the test no longer tells the two points apart";
    }
  }
}

}  // namespace
}  // namespace quark

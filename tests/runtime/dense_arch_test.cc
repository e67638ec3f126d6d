// Qwen3 and Phi-3 (#18): config parsing and layout, and the runtime's logits against a float64 reference written
// here from HF's modeling code (Qwen3Attention: q_norm/k_norm over head_dim per head, before RoPE; Phi3Attention /
// Phi3MLP: qkv_proj split q | k | v, gate_up_proj chunked gate | up), independent of the runtime's modules.
#include <filesystem>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/runtime/full_model.h"
#include "core/runtime/synthetic_model.h"
#include "core/runtime/tensor_view.h"
#include "tests/runtime/dense_arch_models.h"
#include "tests/runtime/test_paths.h"

namespace quark::runtime {
namespace {

namespace fs = std::filesystem;
using checkpoint::ModelConfig;
using ::testing::HasSubstr;

struct Weights {
  std::unique_ptr<checkpoint::CheckpointReader> reader;
  at::Tensor operator()(const std::string& name) const {
    auto ref = reader->Get(name);
    if (!ref.ok()) throw std::runtime_error(std::string(ref.status().message()));
    return ViewTensor(*ref).value().to(at::kDouble);
  }
  bool Has(const std::string& name) const { return reader->Has(name); }
};

at::Tensor Lin(const Weights& w, const std::string& name, const at::Tensor& x) {
  at::Tensor y = at::matmul(x, w(name + ".weight").t());
  return w.Has(name + ".bias") ? y + w(name + ".bias") : y;
}

at::Tensor Rms(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return x / at::sqrt((x * x).mean(-1, true) + eps) * weight;
}

// One head [T, D]: pairs (i, i + D/2) rotated by angle t * theta^(-2i/D) (HF's rotate_half convention).
at::Tensor Rope(const at::Tensor& x, double theta) {
  const int64_t t = x.size(0), d = x.size(1), half = d / 2;
  at::Tensor out = x.clone();
  for (int64_t i = 0; i < half; ++i) {
    const at::Tensor angle = at::arange(t, at::kDouble) * std::pow(theta, -2.0 * i / d);
    const at::Tensor a = x.select(1, i), b = x.select(1, i + half);
    out.select(1, i).copy_(a * angle.cos() - b * angle.sin());
    out.select(1, i + half).copy_(b * angle.cos() + a * angle.sin());
  }
  return out;
}

// q [T, H*D], k and v [T, KV*D]; optional per-head norms (Qwen3) before RoPE; query i sees keys
// max(0, i - window + 1) .. i (window 0 = all earlier keys), softmax over exactly those.
at::Tensor Attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const ModelConfig& c,
                  const at::Tensor& q_norm, const at::Tensor& k_norm, int64_t window) {
  const int64_t t = q.size(0), d = c.head_dim, rep = c.num_attention_heads / c.num_key_value_heads;
  std::vector<at::Tensor> heads;
  for (int64_t h = 0; h < c.num_attention_heads; ++h) {
    const int64_t g = h / rep;
    at::Tensor qh = q.narrow(1, h * d, d), kh = k.narrow(1, g * d, d);
    const at::Tensor vh = v.narrow(1, g * d, d);
    if (q_norm.defined()) {
      qh = Rms(qh, q_norm, c.rms_norm_eps);
      kh = Rms(kh, k_norm, c.rms_norm_eps);
    }
    qh = Rope(qh, c.rope_theta);
    kh = Rope(kh, c.rope_theta);
    at::Tensor out = at::zeros({t, d}, at::kDouble);
    for (int64_t i = 0; i < t; ++i) {
      const int64_t first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
      const at::Tensor p = at::softmax(at::mv(kh.narrow(0, first, i - first + 1), qh[i]) / std::sqrt(double(d)), 0);
      out[i].copy_(at::mv(vh.narrow(0, first, i - first + 1).t(), p));
    }
    heads.push_back(out);
  }
  return at::cat(heads, 1);
}

at::Tensor ReferenceLogits(const std::string& dir, const std::vector<int64_t>& ids) {
  const ModelConfig c = checkpoint::LoadModelConfig(dir).value();
  const Weights w{checkpoint::CheckpointReader::Open(dir).value()};
  const bool phi3 = c.model_type == "phi3";
  const int64_t qw = c.num_attention_heads * c.head_dim, kvw = c.num_key_value_heads * c.head_dim;
  at::Tensor x = w("model.embed_tokens.weight").index_select(0, at::tensor(ids, at::kLong));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const at::Tensor h = Rms(x, w(p + "input_layernorm.weight"), c.rms_norm_eps);
    at::Tensor q, k, v, qn, kn;
    if (phi3) {
      const at::Tensor qkv = Lin(w, p + "self_attn.qkv_proj", h);
      q = qkv.narrow(1, 0, qw), k = qkv.narrow(1, qw, kvw), v = qkv.narrow(1, qw + kvw, kvw);
    } else {
      q = Lin(w, p + "self_attn.q_proj", h), k = Lin(w, p + "self_attn.k_proj", h), v = Lin(w, p + "self_attn.v_proj", h);
      qn = w(p + "self_attn.q_norm.weight"), kn = w(p + "self_attn.k_norm.weight");
    }
    x = x + Lin(w, p + "self_attn.o_proj", Attend(q, k, v, c, qn, kn, checkpoint::LayerAttentionWindow(c, l)));
    const at::Tensor m = Rms(x, w(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
    at::Tensor gate, up;
    if (phi3) {
      const at::Tensor gu = Lin(w, p + "mlp.gate_up_proj", m);
      gate = gu.narrow(1, 0, c.intermediate_size), up = gu.narrow(1, c.intermediate_size, c.intermediate_size);
    } else {
      gate = Lin(w, p + "mlp.gate_proj", m), up = Lin(w, p + "mlp.up_proj", m);
    }
    x = x + Lin(w, p + "mlp.down_proj", gate / (1 + at::exp(-gate)) * up);
  }
  x = Rms(x, w("model.norm.weight"), c.rms_norm_eps);
  return at::matmul(x, w(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight").t());
}

std::vector<int64_t> SomeIds(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 7919 + 13) % vocab);
  return ids;
}

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("quark_dense_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

void ExpectMatchesReference(const fs::path& dir, int64_t seq, double tolerance = 1e-4) {
  auto lm = CausalLm::Open(dir.string());
  ASSERT_TRUE(lm.ok()) << lm.status();
  const auto ids = SomeIds(seq, (*lm)->model().config().vocab_size);
  auto logits = (*lm)->Forward(at::tensor(ids, at::kLong).unsqueeze(0));
  ASSERT_TRUE(logits.ok()) << logits.status();
  const at::Tensor reference = ReferenceLogits(dir.string(), ids);
  ASSERT_EQ(logits->squeeze(0).sizes(), reference.sizes());
  // The logits must carry signal, or agreement would say little.
  EXPECT_GT(reference.std().item<double>(), 0.05);
  EXPECT_LT((logits->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(), tolerance);
}

class DenseArchTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::InitTestEngine(); }
};

TEST_F(DenseArchTest, ParsesQwen3ConfigAsShipped) {
  // Qwen3-0.6B's config.json fields (sizes shrunk): head_dim given, wider than hidden / heads.
  auto config = checkpoint::ParseModelConfig(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
      "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 8,
      "num_key_value_heads": 4, "head_dim": 16, "vocab_size": 100, "max_position_embeddings": 40960,
      "rms_norm_eps": 1e-06, "rope_theta": 1000000, "rope_scaling": null, "attention_bias": false,
      "hidden_act": "silu", "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": null,
      "max_window_layers": 28, "bos_token_id": 151643, "eos_token_id": 151645})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family, checkpoint::ArchFamily::kLlama);
  EXPECT_TRUE(config->qk_norm);
  EXPECT_EQ(config->head_dim, 16);
  EXPECT_EQ(config->sliding_window, 0);
  EXPECT_FALSE(config->attention_bias);
  const auto norms = checkpoint::LayerNormTensors(*config, 2);
  ASSERT_EQ(norms.size(), 4u);
  EXPECT_EQ(norms[2].name, "model.layers.2.self_attn.q_norm.weight");
  EXPECT_EQ(norms[3].name, "model.layers.2.self_attn.k_norm.weight");
  EXPECT_EQ(norms[3].shape, std::vector<int64_t>{16});
  const auto linears = checkpoint::LayerLinears(*config);
  EXPECT_EQ(linears[0].out_features, 128);  // 8 heads x 16
  EXPECT_EQ(linears[3].in_features, 128);   // o_proj
  // Qwen2's sliding-window rule: layers >= max_window_layers.
  auto windowed = checkpoint::ParseModelConfig(R"({"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 3, "num_attention_heads": 8, "head_dim": 16, "vocab_size": 100, "use_sliding_window": true,
      "sliding_window": 8, "max_window_layers": 2, "attention_bias": true})");
  ASSERT_TRUE(windowed.ok()) << windowed.status();
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*windowed, 1), 0);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*windowed, 2), 8);
  EXPECT_TRUE(windowed->attention_bias);
  EXPECT_TRUE(windowed->o_proj_bias);  // Qwen3's o_proj has attention_bias too (Qwen2's has none)
}

TEST_F(DenseArchTest, ParsesPhi3ConfigAndRefusesLongRope) {
  const std::string base = R"("model_type": "phi3", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
      "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 100, "max_position_embeddings": 4096,
      "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu",
      "sliding_window": 2047, "tie_word_embeddings": false)";
  auto config = checkpoint::ParseModelConfig("{" + base + R"(, "rope_scaling": null})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family, checkpoint::ArchFamily::kPhi3);
  EXPECT_EQ(config->sliding_window, 2047);
  EXPECT_EQ(checkpoint::LayerAttentionWindow(*config, 1), 2047);
  const auto linears = checkpoint::LayerLinears(*config);
  ASSERT_EQ(linears.size(), 4u);
  EXPECT_EQ(linears[0].relative_name, "self_attn.qkv_proj");
  EXPECT_EQ(linears[0].out_features, 3 * 64);
  EXPECT_EQ(linears[0].input, "input_layernorm");
  EXPECT_EQ(linears[1].relative_name, "self_attn.o_proj");
  EXPECT_EQ(linears[1].input, "self_attn");
  EXPECT_EQ(linears[2].relative_name, "mlp.gate_up_proj");
  EXPECT_EQ(linears[2].out_features, 2 * 96);
  EXPECT_EQ(linears[2].input, "post_attention_layernorm");
  EXPECT_EQ(linears[3].relative_name, "mlp.down_proj");
  EXPECT_EQ(linears[3].in_features, 96);
  auto longrope = checkpoint::ParseModelConfig("{" + base + R"(, "rope_scaling": {"type": "longrope",
      "long_factor": [1.0], "short_factor": [1.0]}})");
  ASSERT_FALSE(longrope.ok());
  EXPECT_THAT(std::string(longrope.status().message()), HasSubstr("rope_scaling.type"));
  EXPECT_THAT(std::string(longrope.status().message()), HasSubstr("longrope"));
  auto su = checkpoint::ParseModelConfig("{" + base + R"(, "rope_scaling": {"type": "su"}})");
  ASSERT_FALSE(su.ok());
  EXPECT_THAT(std::string(su.status().message()), HasSubstr("\"su\""));
  auto partial = checkpoint::ParseModelConfig("{" + base + R"(, "partial_rotary_factor": 0.5})");
  ASSERT_FALSE(partial.ok());
  EXPECT_THAT(std::string(partial.status().message()), HasSubstr("partial_rotary_factor"));
}

TEST_F(DenseArchTest, Qwen3MatchesTheReference) {
  auto config = SyntheticConfig("qwen3", "tiny", "f32");
  ASSERT_TRUE(config.ok()) << config.status();
  config->attention_bias = config->o_proj_bias = true;  // biases on q, k, v and o, as attention_bias: true gives
  config->rope_theta = 10000.0;                         // angles that turn within a short test sequence
  const fs::path dir = TempDir("qwen3");
  ASSERT_TRUE(testing::WriteRandomDenseModel(*config, dir.string(), 3).ok());
  ExpectMatchesReference(dir, 23);
  fs::remove_all(dir);
}

TEST_F(DenseArchTest, Qwen3WithSlidingWindowMatchesTheReference) {
  auto config = SyntheticConfig("qwen3", "tiny", "f32");
  ASSERT_TRUE(config.ok());
  config->sliding_window = 5;
  config->sliding_window_layers = {false, true};
  const fs::path dir = TempDir("qwen3_swa");
  ASSERT_TRUE(testing::WriteRandomDenseModel(*config, dir.string(), 4).ok());
  ExpectMatchesReference(dir, 17);
  fs::remove_all(dir);
}

TEST_F(DenseArchTest, Phi3WithGqaAndWindowMatchesTheReference) {
  auto config = SyntheticConfig("phi3", "tiny", "f32");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->family, checkpoint::ArchFamily::kPhi3);
  config->num_key_value_heads = 2;
  config->sliding_window = 6;
  const fs::path dir = TempDir("phi3");
  ASSERT_TRUE(testing::WriteRandomDenseModel(*config, dir.string(), 5).ok());
  ExpectMatchesReference(dir, 19);
  fs::remove_all(dir);
}

TEST_F(DenseArchTest, MakeModelShapesLoadAndMatchTheReference) {
  for (const std::string arch : {"qwen3", "phi3"}) {
    SCOPED_TRACE(arch);
    const fs::path dir = TempDir("make_" + arch);
    SyntheticModelOptions options;
    options.arch = arch;
    options.shape = "tiny";
    options.dtype = "f32";
    options.seed = 7;
    options.out_dir = dir.string();
    ASSERT_TRUE(MakeSyntheticModel(options).ok());
    auto config = checkpoint::LoadModelConfig(dir.string());
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->model_type, arch);
    EXPECT_EQ(config->qk_norm, arch == "qwen3");
    // make-model's N(0, 0.02) weights give near-flat logits: compare them at a scale that still sees them.
    auto lm = CausalLm::Open(dir.string());
    ASSERT_TRUE(lm.ok()) << lm.status();
    const auto ids = SomeIds(11, config->vocab_size);
    auto logits = (*lm)->Forward(at::tensor(ids, at::kLong).unsqueeze(0));
    ASSERT_TRUE(logits.ok()) << logits.status();
    const at::Tensor reference = ReferenceLogits(dir.string(), ids);
    EXPECT_LT((logits->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>(),
              1e-3 * reference.abs().max().item<double>());
    fs::remove_all(dir);
  }
  auto qwen3_8b = SyntheticConfig("qwen3", "qwen3-8b", "bf16");
  ASSERT_TRUE(qwen3_8b.ok());
  EXPECT_EQ(qwen3_8b->head_dim, 128);
  EXPECT_EQ(qwen3_8b->num_hidden_layers, 36);
  EXPECT_EQ(qwen3_8b->intermediate_size, 12288);
  EXPECT_EQ(qwen3_8b->vocab_size, 151936);
  EXPECT_DOUBLE_EQ(qwen3_8b->rms_norm_eps, 1e-6);
  EXPECT_FALSE(qwen3_8b->tie_word_embeddings);
  auto phi3_mini = SyntheticConfig("phi3", "phi-3-mini", "bf16");
  ASSERT_TRUE(phi3_mini.ok());
  EXPECT_EQ(phi3_mini->hidden_size, 3072);
  EXPECT_EQ(phi3_mini->intermediate_size, 8192);
  EXPECT_EQ(phi3_mini->vocab_size, 32064);
  EXPECT_EQ(checkpoint::LayerLinears(*phi3_mini)[0].out_features, 3 * 3072);
}

TEST_F(DenseArchTest, TransplantedTinyLlamaPhi3EqualsTheLlama) {
  // Phi-3's fused layout of the same weights is the same function: the runtime gives the Llama's logits.
  const std::string llama = testing::SharedDir() + "/fixtures/tinyllama-a";
  const fs::path dir = TempDir("phi3_tl");
  ASSERT_TRUE(testing::TransplantTinyLlama(llama, "phi3", dir.string()).ok());
  auto phi3 = CausalLm::Open(dir.string());
  auto source = CausalLm::Open(llama);
  ASSERT_TRUE(phi3.ok() && source.ok());
  const at::Tensor ids = at::tensor(SomeIds(21, 512), at::kLong).unsqueeze(0);
  auto a = (*phi3)->Forward(ids);
  auto b = (*source)->Forward(ids);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT((*a - *b).abs().max().item<float>(), 1e-4);
  ExpectMatchesReference(dir, 21);
  fs::remove_all(dir);
}

TEST_F(DenseArchTest, MissingQNormIsNamed) {
  auto config = SyntheticConfig("qwen3", "tiny", "f32");
  ASSERT_TRUE(config.ok());
  const fs::path dir = TempDir("qwen3_nonorm");
  ASSERT_TRUE(testing::WriteRandomDenseModel(*config, dir.string(), 3).ok());
  // The same folder read as Qwen2-like Llama has no q_norm: as qwen3 it must name the missing tensor.
  config->qk_norm = false;
  const fs::path plain = TempDir("llama_noqk");
  config->model_type = "llama";
  ASSERT_TRUE(testing::WriteRandomDenseModel(*config, plain.string(), 3).ok());
  fs::copy_file(dir / "config.json", plain / "config.json", fs::copy_options::overwrite_existing);
  auto lm = CausalLm::Open(plain.string());
  ASSERT_FALSE(lm.ok());
  EXPECT_THAT(std::string(lm.status().message()), HasSubstr("self_attn.q_norm.weight"));
  fs::remove_all(dir);
  fs::remove_all(plain);
}

}  // namespace
}  // namespace quark::runtime

// The GGUF exporter end to end on stories260K (GQA, tied embeddings, 172-wide FFN) and tinyllama-a (untied lm_head):
// float weights byte-identical to the real `llama-quantize --pure` run on our F32 file; engine codes in the blocks
// Quark's mapping gives; the reader's weights and config equal the source's; refusals before any byte; damaged
// files refused by the reader.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/model_layout.h"
#include "core/config/presets.h"
#include "core/export/gguf_file.h"
#include "core/export/gguf_model.h"
#include "core/export/gguf_source.h"
#include "core/export/gguf_tensor_plan.h"
#include "core/export/hf_quark_layout.h"
#include "core/numerics/real_quant.h"
#include "core/runtime/weight_source.h"
#include "tests/export/gguf_llama_cpp.h"
#include "tests/export/gguf_test_util.h"
#include "tests/quantize/test_model.h"
#include "tests/support/require_peer.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;
using gguf::GgmlType;

std::string Stories() { return testing::FixturePath("stories260K"); }
std::string TinyLlama() { return testing::FixturePath("tinyllama-a"); }

std::string Export(const std::string& model, std::optional<GgmlType> type, const Config& config = {},
                   std::function<void(const LinearExportData&)> on_linear = nullptr) {
  testing::GgufTestExport job;
  job.model_dir = model;
  const std::string dir = testing::TempPath("quark_gguf");
  fs::create_directories(dir);
  job.output_file = dir + "/model.gguf";  // a folder of its own: eval looks for tokenizer.model beside the file
  job.config = config;
  job.options.type = type;
  job.on_linear = std::move(on_linear);
  auto files = testing::ExportGguf(job);
  EXPECT_TRUE(files.ok()) << files.status();
  EXPECT_FALSE(fs::exists(job.output_file + ".partial"));
  return job.output_file;
}

std::string Bytes(const gguf::GgufFile& f, const gguf::TensorInfo& t) {
  return std::string(reinterpret_cast<const char*>(f.TensorData(t)), t.nbytes);
}

TEST(GgufExportTest, FloatWayIsByteIdenticalToLlamaQuantizePure) {
  std::string why;
  const testing::LlamaCpp* l = testing::LoadLlamaCpp(&why);
  if (l == nullptr || l->model_quantize == nullptr) QUARK_PEER_MISSING() << "libllama not loaded: " << why;
  for (const std::string& model : {Stories(), TinyLlama()}) {
    const std::string f32 = Export(model, GgmlType::kF32);
    for (const auto& [type, ftype] : std::map<GgmlType, int>{{GgmlType::kQ8_0, 7}, {GgmlType::kQ4_0, 2},
                                                              {GgmlType::kQ4_1, 3}}) {
      const std::string name = gguf::FindType(type)->name;
      const std::string theirs_path = testing::TempPath("quark_gguf_llama") + ".gguf";
      ASSERT_EQ(l->model_quantize(f32, theirs_path, ftype, /*pure=*/true), 0u) << model << " " << name;
      const std::string ours_path = Export(model, type);
      auto theirs = gguf::GgufFile::Open(theirs_path);
      auto ours = gguf::GgufFile::Open(ours_path);
      ASSERT_TRUE(theirs.ok() && ours.ok());
      ASSERT_EQ((*ours)->tensors().size(), (*theirs)->tensors().size());
      for (const gguf::TensorInfo& t : (*theirs)->tensors()) {
        const gguf::TensorInfo* o = (*ours)->FindTensor(t.name);
        ASSERT_NE(o, nullptr) << t.name;
        EXPECT_EQ(o->type, t.type) << model << " " << name << " " << t.name;
        EXPECT_EQ(o->ne, t.ne) << t.name;
        EXPECT_TRUE(Bytes(**ours, *o) == Bytes(**theirs, t)) << model << " " << name << " " << t.name;
      }
      EXPECT_EQ(*(*ours)->GetInt("general.file_type"), *(*theirs)->GetInt("general.file_type"));
      if (model == Stories()) {
        // llama.cpp's fallback: 172 is not a multiple of 32.
        EXPECT_EQ((*ours)->FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kF16);
        EXPECT_EQ((*ours)->FindTensor("token_embd.weight")->type, type);
        EXPECT_EQ((*ours)->FindTensor("output.weight"), nullptr);  // tied
      } else {
        EXPECT_EQ((*ours)->FindTensor("output.weight")->type, type);
      }
      EXPECT_EQ((*ours)->FindTensor("blk.1.attn_norm.weight")->type, GgmlType::kF32);
      fs::remove(theirs_path);
      fs::remove_all(fs::path(ours_path).parent_path());
    }
    fs::remove_all(fs::path(f32).parent_path());
  }
}

TEST(GgufExportTest, F32FileReadsBackAsTheCheckpoint) {
  for (const std::string& model : {Stories(), TinyLlama()}) {
    const std::string file = Export(model, GgmlType::kF32);
    auto source = GgufWeightSource::Open(file);
    ASSERT_TRUE(source.ok()) << source.status();
    auto config = checkpoint::LoadModelConfig(model);
    const checkpoint::ModelConfig& c = (*source)->config();
    EXPECT_EQ(c.hidden_size, config->hidden_size);
    EXPECT_EQ(c.intermediate_size, config->intermediate_size);
    EXPECT_EQ(c.num_hidden_layers, config->num_hidden_layers);
    EXPECT_EQ(c.num_attention_heads, config->num_attention_heads);
    EXPECT_EQ(c.num_key_value_heads, config->num_key_value_heads);
    EXPECT_EQ(c.head_dim, config->head_dim);
    EXPECT_EQ(c.vocab_size, config->vocab_size);
    EXPECT_EQ(c.max_position_embeddings, config->max_position_embeddings);
    EXPECT_EQ(c.tie_word_embeddings, config->tie_word_embeddings);
    EXPECT_FLOAT_EQ(c.rms_norm_eps, config->rms_norm_eps);
    EXPECT_EQ(c.rope_theta, config->rope_theta);
    auto reader = checkpoint::CheckpointReader::Open(model);
    runtime::CheckpointWeightSource original(std::move(*reader));
    for (const auto& spec : checkpoint::ModelTensors(*config)) {
      auto a = original.Get(spec.name, at::kFloat);
      auto b = (*source)->Get(spec.name, at::kFloat);
      ASSERT_TRUE(a.ok() && b.ok()) << spec.name;
      EXPECT_TRUE(at::equal(*a, *b)) << spec.name;
    }
    // The file holds llama.cpp's interleaved order: q rows differ from HF's, and un-permuting restores them.
    auto q = (*source)->file().FindTensor("blk.0.attn_q.weight");
    at::Tensor stored = at::from_blob(const_cast<uint8_t*>((*source)->file().TensorData(*q)),
                                      {q->ne[1], q->ne[0]}, at::kFloat);
    auto hf = original.Get("model.layers.0.self_attn.q_proj.weight", at::kFloat);
    EXPECT_FALSE(at::equal(stored, *hf));
    EXPECT_TRUE(at::equal(gguf::PermuteRows(*hf, config->num_attention_heads), stored));
    EXPECT_EQ(*(*source)->file().GetString("general.architecture"), "llama");
    EXPECT_EQ((*source)->file().Find("tokenizer.ggml.tokens")->texts.size(), 512u);
    // The tokenizer beside the file: none, the model's own, another vocabulary.
    EXPECT_EQ(GgufTokenizerModel((*source)->file()).status().code(), absl::StatusCode::kNotFound);
    const fs::path beside = fs::path(file).parent_path() / "tokenizer.model";
    fs::copy_file(model + "/tokenizer.model", beside);
    EXPECT_TRUE(GgufTokenizerModel((*source)->file()).ok());
    fs::remove(beside);
    fs::copy_file(testing::FixturePath("tokenizers/llama2-32k.model"), beside);
    const auto other = GgufTokenizerModel((*source)->file());
    EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(other.status().message()).find("token "), std::string::npos) << other.status();
    fs::remove_all(fs::path(file).parent_path());
  }
}

// Engine codes -> blocks: Q4_0 and Q8_0 hold d = scale and the codes exactly; Q4_1 holds m = -scale * zero_point
// rounded to fp16 (Quark's mapping), so its values are within one fp16 rounding of m.
TEST(GgufExportTest, EngineCodesGoInAsQuarksMapping) {
  const struct {
    std::string preset;
    GgmlType type;
  } cases[] = {{"uint4_wo_32", GgmlType::kQ4_1}, {"int4_wo_32", GgmlType::kQ4_0}, {"int8_wo_32", GgmlType::kQ8_0}};
  for (const auto& c : cases) {
    auto config = testing::GgufTestConfig(c.preset);
    ASSERT_TRUE(config.ok());
    std::map<std::string, at::Tensor> expected;  // HF weight name -> the engine's dequantized codes
    std::map<std::string, float> max_scale;
    const std::string file = Export(TinyLlama(), std::nullopt, *config, [&](const LinearExportData& d) {
      auto w = Dequantize(d.weight_codes, *d.config.weight, at::kFloat);
      ASSERT_TRUE(w.ok());
      expected[d.module + ".weight"] = *w;
      max_scale[d.module + ".weight"] = d.weight_codes.scale.abs().max().item<float>();
      // The scales are what a block holds: fp16 values for the 4-bit types (per-group int4 scales are 16-bit).
      if (c.type != GgmlType::kQ8_0) {
        EXPECT_TRUE(at::equal(d.weight_codes.scale.to(at::kFloat), d.weight_codes.scale.to(at::kHalf).to(at::kFloat)));
      }
    });
    ASSERT_EQ(expected.size(), 4u * 7u) << c.preset;
    auto source = GgufWeightSource::Open(file);
    ASSERT_TRUE(source.ok()) << source.status();
    for (const auto& [name, want] : expected) {
      EXPECT_EQ((*source)->file().FindTensor(gguf::GgufTensorName(name))->type, c.type) << name;
      auto got = (*source)->Get(name, at::kFloat);
      ASSERT_TRUE(got.ok()) << name;
      const double diff = (*got - want).abs().max().item<double>();
      if (c.type == GgmlType::kQ4_0) {
        EXPECT_EQ(diff, 0.0) << c.preset << " " << name;
      } else {
        // Q4_1: m's fp16 rounding (<= 2^-11 |s z|, z <= 15); Q8_0: d's fp16 rounding of a float32 scale.
        EXPECT_LE(diff, max_scale[name] * (c.type == GgmlType::kQ4_1 ? 15 : 128) / 2048.0) << c.preset << " " << name;
      }
    }
    // Not quantized by the plan: lm_head (excluded) and the embeddings stay F32 like the source.
    EXPECT_EQ((*source)->file().FindTensor("output.weight")->type, GgmlType::kF32);
    EXPECT_EQ((*source)->file().FindTensor("token_embd.weight")->type, GgmlType::kF32);
    fs::remove_all(fs::path(file).parent_path());
  }
}

// #36 item 5: a mixed recipe whose schemes all map to GGUF block types: each linear's tensor in its own scheme's type
// holding the engine's codes, the float one as the source, and general.file_type the type most tensors have.
TEST(GgufExportTest, AMixedRecipeGivesEachTensorItsSchemesType) {
  Config config = *testing::GgufTestConfig("uint4_wo_32");
  config.layer_quant_config.push_back({"model.layers.0.mlp.*", testing::GgufTestConfig("int4_wo_32")->global_quant_config});
  config.layer_quant_config.push_back({"*.o_proj", testing::GgufTestConfig("int8_wo_32")->global_quant_config});
  config.exclude.push_back("model.layers.0.mlp.down_proj");
  std::map<std::string, at::Tensor> expected;  // HF weight name -> the engine's dequantized codes
  std::map<std::string, GgmlType> types;
  const std::string file = Export(TinyLlama(), std::nullopt, config, [&](const LinearExportData& d) {
    auto w = Dequantize(d.weight_codes, *d.config.weight, at::kFloat);
    ASSERT_TRUE(w.ok());
    expected[d.module + ".weight"] = *w;
    auto type = gguf::GgufTypeForScheme(d.module, *d.config.weight);
    ASSERT_TRUE(type.ok()) << type.status();
    types[d.module + ".weight"] = *type;
  });
  ASSERT_EQ(expected.size(), 4u * 7u - 1);
  std::map<GgmlType, int> count;
  for (const auto& [name, type] : types) ++count[type];
  EXPECT_EQ(count[GgmlType::kQ4_1], 4 * 3 + 3 * 3);  // q/k/v everywhere, the MLPs of layers 1-3
  EXPECT_EQ(count[GgmlType::kQ8_0], 4);              // o_proj
  EXPECT_EQ(count[GgmlType::kQ4_0], 2);              // layer 0's gate and up
  auto source = GgufWeightSource::Open(file);
  ASSERT_TRUE(source.ok()) << source.status();
  for (const auto& [name, want] : expected) {
    EXPECT_EQ((*source)->file().FindTensor(gguf::GgufTensorName(name))->type, types[name]) << name;
    auto got = (*source)->Get(name, at::kFloat);
    ASSERT_TRUE(got.ok()) << name;
    // The fp16 block scales (Q4_1's m, Q8_0's d) round; Q4_0's int4 group scales are fp16 already.
    const double bound = types[name] == GgmlType::kQ4_0 ? 0.0 : 1e-3 * want.abs().max().item<double>();
    EXPECT_LE((*got - want).abs().max().item<double>(), bound) << name;
  }
  EXPECT_EQ((*source)->file().FindTensor("blk.0.ffn_down.weight")->type, GgmlType::kF32);
  auto reader = checkpoint::CheckpointReader::Open(TinyLlama());
  ASSERT_TRUE(reader.ok());
  auto float_down = (*source)->Get("model.layers.0.mlp.down_proj.weight", at::kFloat);
  ASSERT_TRUE(float_down.ok());
  auto ref = (*reader)->Get("model.layers.0.mlp.down_proj.weight");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(0, std::memcmp(float_down->data_ptr(), ref->bytes().data(), ref->bytes().size()));
  // Most tensors are Q4_1 (llama_ftype 3), although the first coded module in name order is Q4_0.
  EXPECT_EQ((*source)->file().GetInt("general.file_type").value_or(-1), 3);
  fs::remove_all(fs::path(file).parent_path());
}

absl::Status CreateOnly(const std::string& model, const Config& config, const std::string& out,
                        GgufExportOptions options = {}) {
  auto model_config = checkpoint::LoadModelConfig(model);
  if (!model_config.ok()) return model_config.status();
  const LayerPlan plan = BuildLayerPlan(config, ModulesFromConfig(*model_config));
  return CreateGgufExporter(model, out, config, plan, options).status();
}

TEST(GgufExportTest, RefusesWhatGgufCannotHoldBeforeWriting) {
  const std::string out = testing::TempPath("quark_gguf_refused") + ".gguf";
  const struct {
    std::string preset;
    std::string expect;
  } cases[] = {{"fp8", "input_tensors"},           // activation quantization
               {"int4_wo_per_channel", "int4 per_channel"},
               {"uint4_wo_128", "group_size 128"},
               {"uint4_wo_per_channel", "uint4 per_channel"}};
  for (const auto& c : cases) {
    auto status = CreateOnly(TinyLlama(), *PresetConfig(c.preset), out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.preset << ": " << status;
    EXPECT_NE(std::string(status.message()).find("model.layers.0.self_attn.q_proj"), std::string::npos) << status;
    EXPECT_NE(std::string(status.message()).find(c.expect), std::string::npos) << status;
    EXPECT_FALSE(fs::exists(out + ".partial"));
    EXPECT_FALSE(fs::exists(out));
  }
  // fp8 weights without activations.
  Config fp8 = *PresetConfig("fp8");
  fp8.global_quant_config.input_tensors.reset();
  auto status = CreateOnly(TinyLlama(), fp8, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find("fp8_e4m3"), std::string::npos) << status;
  // A quantized lm_head.
  Config lm = *PresetConfig("uint4_wo_32");
  lm.exclude.clear();
  status = CreateOnly(TinyLlama(), lm, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find("lm_head"), std::string::npos) << status;
}

TEST(GgufExportTest, RefusesAMissingTokenizerAndAnExistingOutput) {
  const std::string dir = testing::TempPath("quark_gguf_notok");
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(Stories() + "/" + f, dir + "/" + f);
  const std::string out = dir + "/out.gguf";
  auto status = CreateOnly(dir, {}, out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find("tokenizer.model"), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(out + ".partial"));
  std::ofstream(out) << "x";
  EXPECT_EQ(CreateOnly(Stories(), {}, out).code(), absl::StatusCode::kAlreadyExists);
  fs::remove_all(dir);
}

TEST(GgufExportTest, ReaderRefusesDamagedFiles) {
  const std::string file = Export(Stories(), GgmlType::kQ8_0);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string damaged = file + ".damaged";
  auto write = [&](const std::string& b) { std::ofstream(damaged, std::ios::binary) << b; };
  for (size_t cut : {size_t{0}, size_t{3}, size_t{20}, size_t{1000}, size_t{9000}, bytes.size() - 1}) {
    write(bytes.substr(0, cut));
    auto f = gguf::GgufFile::Open(damaged);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut << ": " << f.status();
  }
  std::string bad = bytes;
  bad[4] = 9;  // version
  write(bad);
  EXPECT_NE(std::string(gguf::GgufFile::Open(damaged).status().message()).find("version 9"), std::string::npos);
  bad = bytes;
  for (int i = 16; i < 24; ++i) bad[i] = '\xff';  // metadata count
  write(bad);
  EXPECT_EQ(gguf::GgufFile::Open(damaged).status().code(), absl::StatusCode::kInvalidArgument);
  fs::remove_all(fs::path(file).parent_path());
}

// Found by gguf_fuzz (tests/fuzz/corpus/gguf_fuzz/crash_*): metadata numbers outside the integer they become
// were converted anyway (undefined behaviour); they are INVALID_ARGUMENT naming the key now.
TEST(GgufExportTest, ReaderRefusesNumbersOutsideTheirRange) {
  const fs::path dir = fs::temp_directory_path() / ("gguf-range-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto open = [&](gguf::Metadata metadata) {
    const std::string path = (dir / "range.gguf").string();
    std::ofstream(path, std::ios::binary) << gguf::SerializeHeader(metadata, {});
    return gguf::GgufFile::Open(path);
  };
  gguf::Value alignment;
  alignment.type = gguf::ValueType::kFloat64;
  alignment.number = 1e300;
  auto f = open({{"general.alignment", alignment}});
  ASSERT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(f.status().message()).find("general.alignment"), std::string::npos) << f.status();

  gguf::Value count;
  count.type = gguf::ValueType::kUint64;
  count.number = 0x1p63;  // one past int64's largest
  f = open({{"llama.block_count", count}});
  ASSERT_TRUE(f.ok()) << f.status();
  auto value = (*f)->GetInt("llama.block_count");
  ASSERT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(value.status().message()).find("llama.block_count"), std::string::npos) << value.status();
  count.number = 0x1p62;
  f = open({{"llama.block_count", count}});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(*(*f)->GetInt("llama.block_count"), int64_t{1} << 62);
  fs::remove_all(dir);
}

TEST(GgufExportTest, PermutationAndNames) {
  at::Tensor rows = at::arange(2 * 8 * 3, at::kFloat).reshape({16, 3});
  at::Tensor p = gguf::PermuteRows(rows, 2);
  // Head 0, HF rows 0..3 (first half) and 4..7 (second half) interleave: 0, 4, 1, 5, ...
  EXPECT_TRUE(at::equal(p.select(1, 0).slice(0, 0, 8) / 3, at::tensor({0, 4, 1, 5, 2, 6, 3, 7}, at::kFloat)));
  EXPECT_TRUE(at::equal(gguf::UnpermuteRows(p, 2), rows));
  EXPECT_EQ(gguf::GgufTensorName("model.layers.12.mlp.down_proj.weight"), "blk.12.ffn_down.weight");
  EXPECT_EQ(gguf::GgufTensorName("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_EQ(gguf::GgufTensorName("lm_head.weight"), "output.weight");
  EXPECT_EQ(gguf::GgufTensorName("model.layers.0.self_attn.rotary_emb.inv_freq"), "");
  EXPECT_EQ(gguf::HfTensorName("blk.3.ffn_norm.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(gguf::HfTensorName("token_embd.weight"), "model.embed_tokens.weight");
  checkpoint::ModelConfig qwen;
  qwen.model_type = "qwen2";
  qwen.num_attention_heads = 4;
  EXPECT_EQ(gguf::PermutedHeads(qwen, "model.layers.0.self_attn.q_proj.weight"), 0);
  qwen.model_type = "llama";
  EXPECT_EQ(gguf::PermutedHeads(qwen, "model.layers.0.self_attn.q_proj.bias"), 4);
}

}  // namespace
}  // namespace quark::exporter

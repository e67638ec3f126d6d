// Hugging Face tokenizer.json (byte-level BPE) vocabularies in GGUF (#32, core/export/gguf_bpe_vocab.h) without
// llama.cpp: the pre-tokenizer names per family, token types and padding as convert_hf_to_gguf.py's get_vocab_base
// assigns them, both merge encodings, gguf-py SpecialVocab's special ids and add_*_token flags, what is refused
// (naming the file and field or byte offset), which tokenizer a model folder's export takes, and the keys a real
// export (gpt-oss's whole-file writer) stores. llama.cpp's and HF's side: tests/node/gguf_bpe_vocab_consumer_test.mjs.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/base/strings.h"
#include "core/checkpoint/gpt_oss_layout.h"
#include "core/export/gguf_bpe_vocab.h"
#include "core/export/gguf_gpt_oss.h"
#include "core/export/gguf_vocab.h"
#include "core/runtime/gpt_oss_synthetic.h"
#include "tests/runtime/test_paths.h"

namespace quark::exporter::gguf {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

const char kLlama3Split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char kO200kSplit[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char kQwen2Split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

Json Split(const std::string& regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}
Json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}
Json Sequence(std::vector<Json> stages) { return {{"type", "Sequence"}, {"pretokenizers", stages}}; }
Json Added(int id, const std::string& content, bool special) {
  return {{"id", id}, {"content", content}, {"special", special}, {"normalized", false}};
}

// A small byte-level BPE: 7 model tokens, 3 merges (one in the pair encoding), 4 added tokens on 7..10.
Json Tokenizer(const Json& pre) {
  Json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"\xc4\xa0", 3}, {"ab", 4}, {"\xc4\xa0" "a", 5}, {"abc", 6}};
  Json merges = Json::array({"a b", "\xc4\xa0 a", Json::array({"ab", "c"})});
  return {{"version", "1.0"},
          {"added_tokens", {Added(7, "<|begin|>", true), Added(8, "<|end|>", true), Added(9, "<|tool|>", false),
                            Added(10, "my\xe2\x96\x81word", false)}},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", true}}}};
}

Json BosTemplate(const std::string& bos) {
  return {{"type", "TemplateProcessing"},
          {"single", {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
          {"pair",
           {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
            {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}}};
}

class GgufBpeVocabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / StrCat("quark_gguf_bpe_vocab_", ::getpid(), "_",
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  void Write(const std::string& name, const Json& json) { Write(name, json.dump()); }
  absl::StatusOr<BpeVocab> Read(int64_t vocab_size = 16, const std::string& model_type = "llama") {
    return ReadBpeVocab(dir_.string(), vocab_size, model_type);
  }
  std::string Refusal(const Json& tokenizer, int64_t vocab_size = 16) {
    Write("tokenizer.json", tokenizer);
    auto vocab = Read(vocab_size);
    EXPECT_FALSE(vocab.ok());
    return std::string(vocab.status().message());
  }

  fs::path dir_;
};

TEST_F(GgufBpeVocabTest, NamesThePreTokenizerAsLlamaCppPerFamily) {
  struct Case {
    Json pre;
    std::string model_type, name;
  };
  const Case cases[] = {
      {Sequence({Split(kLlama3Split), ByteLevel(false)}), "llama", "llama-bpe"},
      {Sequence({Split(kO200kSplit), ByteLevel(false)}), "gpt_oss", "gpt-4o"},
      {Sequence({Split(kO200kSplit), ByteLevel(false)}), "llama4_text", "llama4"},
      {Sequence({Split(kO200kSplit), ByteLevel(false)}), "llama4", "llama4"},
      {Sequence({Split(kQwen2Split), ByteLevel(false)}), "qwen2", "qwen2"},
      {Sequence({Split("\\p{N}{1,3}"), Split("[一-龥぀-ゟ゠-ヿ]+"),
                 Split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                       " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
                 ByteLevel(false)}),
       "deepseek_v3", "deepseek-v3"},
      {ByteLevel(true), "gpt2", "gpt-2"},
  };
  for (const Case& c : cases) {
    Write("tokenizer.json", Tokenizer(c.pre));
    auto vocab = Read(16, c.model_type);
    ASSERT_TRUE(vocab.ok()) << vocab.status();
    EXPECT_EQ(vocab->pre, c.name) << c.model_type;
  }
}

TEST_F(GgufBpeVocabTest, TokensTypesPaddingAndMergesAsTheConverterWritesThem) {
  Write("tokenizer.json", Tokenizer(Sequence({Split(kLlama3Split), ByteLevel(false)})));
  auto vocab = Read(13);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_THAT(vocab->tokens, ElementsAre("a", "b", "c", "\xc4\xa0", "ab", "\xc4\xa0" "a", "abc", "<|begin|>",
                                         "<|end|>", "<|tool|>", "my word", "[PAD11]", "[PAD12]"));
  using K = GgufTokenKind;
  // <|tool|> is not special but looks special (control); my▁word is user-defined, its U+2581 a space.
  EXPECT_THAT(vocab->types, ElementsAre(K::kNormal, K::kNormal, K::kNormal, K::kNormal, K::kNormal, K::kNormal,
                                        K::kNormal, K::kControl, K::kControl, K::kControl, K::kUserDefined,
                                        K::kUnused, K::kUnused));
  EXPECT_EQ(vocab->defined, 11);
  EXPECT_THAT(vocab->merges, ElementsAre("a b", "\xc4\xa0 a", "ab c"));
}

TEST_F(GgufBpeVocabTest, SpecialIdsAndFlagsFollowSpecialVocab) {
  // Llama 3's shape: BOS by TemplateProcessing, ids named in tokenizer_config.json, config.json's ids only where
  // tokenizer_config.json names none (its bos 1 loses, its pad 8 is taken).
  Json tok = Tokenizer(Sequence({Split(kLlama3Split), ByteLevel(false)}));
  tok["post_processor"] = {{"type", "Sequence"}, {"processors", {ByteLevel(false), BosTemplate("<|begin|>")}}};
  Write("tokenizer.json", tok);
  Write("tokenizer_config.json", Json{{"bos_token", "<|begin|>"}, {"eos_token", {{"content", "<|end|>"}}},
                                      {"chat_template", "{{ messages }}"}});
  Write("config.json", Json{{"bos_token_id", 1}, {"pad_token_id", 8}, {"eos_token_id", Json::array({8, 9})}});
  auto vocab = Read();
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_THAT(vocab->special_ids, ElementsAre(Pair("bos", 7), Pair("eos", 8), Pair("pad", 8)));
  // The pair template's middle BOS is no separator: add_sep false, as gguf-py sets it for Llama 3.
  EXPECT_THAT(vocab->add_special, ElementsAre(Pair("bos", true), Pair("sep", false)));
  EXPECT_EQ(vocab->chat_template, "{{ messages }}");

  // A trailing special token other than the EOS: the EOS becomes EOT and the trailing one the EOS, added.
  tok["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", {{{"Sequence", {{"id", "A"}}}}, {{"SpecialToken", {{"id", "<|tool|>"}}}}}}};
  Write("tokenizer.json", tok);
  Write("config.json", Json::object());
  Write("tokenizer_config.json", Json{{"bos_token", "<|begin|>"}, {"eos_token", "<|end|>"}, {"add_bos_token", false}});
  vocab = Read();
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_THAT(vocab->special_ids, ElementsAre(Pair("bos", 7), Pair("eos", 9), Pair("eot", 8)));
  EXPECT_THAT(vocab->add_special, ElementsAre(Pair("eos", true), Pair("bos", false)));

  // Without tokenizer_config.json only config.json names ids.
  fs::remove(dir_ / "tokenizer_config.json");
  Write("config.json", Json{{"text_config", {{"eos_token_id", 8}}}, {"bos_token_id", 7}});
  vocab = Read();
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_THAT(vocab->special_ids, ElementsAre(Pair("bos", 7), Pair("eos", 8)));
  EXPECT_THAT(vocab->add_special, ElementsAre(Pair("eos", true)));
  Write("config.json", Json{{"pad_token_id", -1}});
  EXPECT_THAT(Refusal(tok), HasSubstr("config.json: pad_token_id: negative special token id -1"));
}

TEST_F(GgufBpeVocabTest, RefusesWhatLlamaCppCannotReproduceNamingTheField) {
  const Json llama3 = Sequence({Split(kLlama3Split), ByteLevel(false)});
  EXPECT_THAT(Refusal(Tokenizer(Sequence({Split(std::string(kLlama3Split) + "|x"), ByteLevel(false)}))),
              HasSubstr("tokenizer.json: pre_tokenizer: its Split regexes are none of"));
  EXPECT_THAT(Refusal(Tokenizer({{"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}})),
              HasSubstr("pre_tokenizer: the last stage is not ByteLevel"));
  EXPECT_THAT(Refusal(Tokenizer(Sequence({{{"type", "Digits"}}, ByteLevel(false)}))),
              HasSubstr("pre_tokenizer.pretokenizers[0].type: \"Digits\""));
  Json tok = Tokenizer(llama3);
  tok["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_THAT(Refusal(tok), HasSubstr("normalizer.type \"Lowercase\""));
  tok = Tokenizer(llama3);
  tok["model"]["type"] = "Unigram";
  EXPECT_THAT(Refusal(tok), HasSubstr("model.type \"Unigram\""));
  tok = Tokenizer(llama3);
  tok["model"]["merges"][1] = "\xc4\xa0 c";
  EXPECT_THAT(Refusal(tok), HasSubstr("model.merges[1]: \"\xc4\xa0" "c\" is not in model.vocab"));
  tok["model"]["merges"][1] = "a b c";
  EXPECT_THAT(Refusal(tok), HasSubstr("model.merges[1] = \"a b c\" is not two tokens and a space"));
  tok = Tokenizer(llama3);
  EXPECT_THAT(Refusal(tok, 10), HasSubstr("added_tokens[3].id = 10 is outside config.json's vocab_size 10"));
  tok["added_tokens"][1]["id"] = 7;
  EXPECT_THAT(Refusal(tok), HasSubstr("added_tokens[1].id: id 7 is already the token \"<|begin|>\""));
  tok = Tokenizer(llama3);
  tok["added_tokens"][0]["special"] = "yes";
  EXPECT_THAT(Refusal(tok), HasSubstr("a field of the wrong JSON type"));
  tok = Tokenizer(llama3);
  tok["added_tokens"][2]["content"] = std::string(kMaxBpeTokenBytes + 1, 'x');
  EXPECT_THAT(Refusal(tok), HasSubstr("added_tokens[2]: a token of 4097 bytes"));
  Write("tokenizer.json", std::string("{\"model\": {\"type\": \"BPE\",, }"));
  auto bad = Read();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("tokenizer.json: malformed JSON at byte offset 26"));
}

TEST_F(GgufBpeVocabTest, ModelFolderTakesTokenizerModelFirstThenTokenizerJson) {
  EXPECT_THAT(std::string(ReadModelVocab(dir_.string(), 16, "llama").status().message()),
              HasSubstr("has neither tokenizer.model (SentencePiece) nor tokenizer.json (BPE)"));
  Write("tokenizer.json", Tokenizer(Sequence({Split(kLlama3Split), ByteLevel(false)})));
  auto vocab = ReadModelVocab(dir_.string(), 16, "llama");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  ASSERT_NE(vocab->bpe(), nullptr);
  EXPECT_EQ(vocab->bpe()->pre, "llama-bpe");
  fs::copy_file(runtime::testing::Stories260K() + "/tokenizer.model", dir_ / "tokenizer.model");
  vocab = ReadModelVocab(dir_.string(), 512, "llama");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_NE(vocab->sentencepiece(), nullptr);
}

// The committed real tokenizers (tests/fixtures/tokenizers, see SOURCES.md): GPT-2's byte-level BPE is a "gpt2"
// vocabulary named gpt-2 with its one special token a control token; Phi-3's SentencePiece-style BPE (Prepend /
// Replace normalizer, byte fallback) is refused, naming the normalizer (llama.cpp converts Phi-3 from tokenizer.model).
TEST_F(GgufBpeVocabTest, TheRepositorysRealTokenizers) {
  const fs::path fixtures = fs::path(__FILE__).parent_path().parent_path() / "fixtures" / "tokenizers";
  auto gpt2 = ReadBpeVocab((fixtures / "gpt2").string(), 50257, "gpt2");
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  EXPECT_EQ(gpt2->pre, "gpt-2");
  EXPECT_EQ(gpt2->defined, 50257);
  EXPECT_EQ(gpt2->merges.size(), 50000u);
  EXPECT_EQ(gpt2->merges.front(), "\xc4\xa0 t");
  EXPECT_EQ(gpt2->tokens[50256], "<|endoftext|>");
  EXPECT_EQ(gpt2->types[50256], GgufTokenKind::kControl);
  EXPECT_EQ(gpt2->types[256], GgufTokenKind::kNormal);
  EXPECT_THAT(gpt2->special_ids, ElementsAre(Pair("bos", 50256), Pair("eos", 50256), Pair("unk", 50256)));
  auto phi3 = ReadBpeVocab((fixtures / "phi3").string(), 32064, "phi3");
  EXPECT_EQ(phi3.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(phi3.status().message()), HasSubstr("phi3/tokenizer.json: normalizer.type \"Sequence\""));
}

// gpt-oss's whole-file writer stores the BPE keys as gguf-py names them (and refuses a vocabulary of another size).
TEST_F(GgufBpeVocabTest, GptOssExportStoresTheGpt2Vocabulary) {
  runtime::testing::InitTestEngine();
  checkpoint::GptOssConfig c = *runtime::GptOssSyntheticConfig("tiny", "float32");
  c.yarn->truncate = true;
  Json tok = Tokenizer(Sequence({Split(kO200kSplit), ByteLevel(false)}));
  Write("tokenizer.json", tok);
  Write("tokenizer_config.json", Json{{"bos_token", "<|begin|>"}, {"eos_token", "<|end|>"}, {"add_bos_token", false}});
  auto bpe = ReadBpeVocab(dir_.string(), c.base.vocab_size, "gpt_oss");
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  at::Generator gen = at::detail::createCPUGenerator(4);
  runtime::TensorMapWeightSource weights;
  for (const checkpoint::TensorSpec& s : checkpoint::GptOssModelTensors(c)) {
    weights.Set(s.name, at::randn(s.shape, gen, at::kFloat));
  }
  const std::string file = (dir_ / "bpe.gguf").string();
  ASSERT_TRUE(WriteGptOssGguf(c, weights, *bpe, GgmlType::kF32, {}, file).ok());
  auto gguf = GgufFile::Open(file);
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(*g.GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*g.GetString("tokenizer.ggml.pre"), "gpt-4o");
  EXPECT_EQ(g.Find("tokenizer.ggml.tokens")->texts.size(), static_cast<size_t>(c.base.vocab_size));
  EXPECT_EQ(g.Find("tokenizer.ggml.tokens")->texts[10], "my word");
  EXPECT_EQ(g.Find("tokenizer.ggml.token_type")->numbers[7], 3);
  EXPECT_EQ(g.Find("tokenizer.ggml.token_type")->numbers[10], 4);
  EXPECT_EQ(g.Find("tokenizer.ggml.token_type")->numbers[11], 5);
  EXPECT_THAT(g.Find("tokenizer.ggml.merges")->texts, ElementsAre("a b", "\xc4\xa0 a", "ab c"));
  EXPECT_EQ(*g.GetInt("tokenizer.ggml.bos_token_id"), 7);
  EXPECT_EQ(*g.GetInt("tokenizer.ggml.eos_token_id"), 8);
  EXPECT_EQ(g.Find("tokenizer.ggml.add_bos_token")->number, 0);
  EXPECT_EQ(g.Find("tokenizer.ggml.scores"), nullptr);  // the converter writes none for "gpt2"

  bpe = ReadBpeVocab(dir_.string(), 16, "gpt_oss");
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_THAT(std::string(WriteGptOssGguf(c, weights, *bpe, GgmlType::kF32, {}, file + "2").message()),
              HasSubstr("gguf gpt-oss: the BPE vocabulary was read for 16 tokens, but vocab_size = 512"));
}

}  // namespace
}  // namespace quark::exporter::gguf

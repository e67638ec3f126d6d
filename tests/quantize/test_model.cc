#include "tests/quantize/test_model.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/checkpoint/checkpoint_writer.h"
#include "core/checkpoint/model_layout.h"

namespace quark::testing {

std::string FixturePath(const std::string& relative) {
  const char* shared = std::getenv("QUARK_SHARED_DIR");
  return std::string(shared ? shared : "/work/shared") + "/fixtures/" + relative;
}

namespace {

// One folder per test process holds every TempPath, and the files callers name by adding an extension to one
// ("<path>.txt"); it is removed when the process exits (ctest runs one test per process): a whole suite run had left
// about 370 MB of models, exports and texts in /tmp. QUARK_KEEP_TEST_FILES=1 keeps it for a look after a failure.
class ProcessTempFolder {
 public:
  static const std::filesystem::path& Path() {
    static ProcessTempFolder folder;
    return folder.path_;
  }

  ~ProcessTempFolder() {
    // A forked child that exits normally must not take its parent's files with it.
    if (std::getenv("QUARK_KEEP_TEST_FILES") != nullptr || ::getpid() != owner_) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

 private:
  ProcessTempFolder() {
    // Whatever stands there was left by an earlier process that had our pid (a CI run starts hundreds of test
    // processes, so pids come round again) and did not exit normally: no live process can own it.
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_, ec);
  }

  const pid_t owner_ = ::getpid();
  const std::filesystem::path path_ =
      std::filesystem::temp_directory_path() / ("quark_test_" + std::to_string(owner_));
};

}  // namespace

std::string TempPath(const std::string& stem) {
  static std::atomic<int> counter{0};
  return (ProcessTempFolder::Path() / (stem + "_" + std::to_string(counter++))).string();
}

std::string SmallEvalText(size_t bytes) {
  std::ifstream in(FixturePath("eval/tinystories_validation_prefix.txt"), std::ios::binary);
  std::string text(bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(bytes));
  text.resize(static_cast<size_t>(in.gcount()));
  const std::string path = TempPath("quark_eval") + ".txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string WriteSyntheticLlama(const SyntheticLlamaOptions& o) {
  checkpoint::ModelConfig c;
  c.model_type = "llama";
  c.hidden_size = o.hidden;
  c.intermediate_size = o.intermediate;
  c.num_hidden_layers = o.layers;
  c.num_attention_heads = o.heads;
  c.num_key_value_heads = o.kv_heads;
  c.head_dim = o.hidden / o.heads;
  c.vocab_size = o.vocab;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  c.torch_dtype = o.torch_dtype;
  const std::string dir = TempPath("quark_llama");
  std::filesystem::create_directories(dir);
  { std::ofstream(dir + "/config.json") << checkpoint::ModelConfigToJson(c); }
  const at::ScalarType dtype = o.torch_dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;
  const checkpoint::StDType st = dtype == at::kBFloat16 ? checkpoint::StDType::kBF16 : checkpoint::StDType::kF32;
  const auto tensors = checkpoint::ModelTensors(c);
  std::vector<checkpoint::PlannedTensor> plan;
  for (const auto& t : tensors) plan.push_back({t.name, st, t.shape});
  auto writer = checkpoint::CheckpointWriter::Create(dir, plan);
  EXPECT_TRUE(writer.ok()) << writer.status();
  at::manual_seed(o.seed);
  for (const auto& t : tensors) {
    at::Tensor v;
    if (t.role == checkpoint::TensorRole::kNormWeight) {
      v = 1 + 0.1 * at::randn(t.shape);
    } else {
      // A few large input channels, as real activations have, so that clipping and scales matter.
      v = at::randn(t.shape) * (t.role == checkpoint::TensorRole::kEmbedding ? 1.0 : 0.08);
    }
    v = v.to(dtype).contiguous();
    EXPECT_TRUE((*writer)->Write(t.name, std::string_view(static_cast<const char*>(v.data_ptr()), v.nbytes())).ok());
  }
  EXPECT_TRUE((*writer)->Finish().ok());
  std::filesystem::copy_file(FixturePath("stories260K/tokenizer.model"), dir + "/tokenizer.model");
  return dir;
}

}  // namespace quark::testing

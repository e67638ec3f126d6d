// gguf_export_tool: writes a GGUF of a model folder for the Node consumer test (tests/node/gguf_consumer_test.mjs)
// and the results in docs/results.md, until `quark quantize --export gguf` is wired.
//   gguf_export_tool MODEL_DIR OUT.gguf [--type F32|F16|BF16|Q8_0|Q4_0|Q4_1|Q4_K|...] [--scheme PRESET]
//                    [--file-type Q4_K_M|Q5_K_M|...] [--pure true|false] [--exclude PATTERN]...
//                    [--synthetic qwen2|mistral|llama TOKENIZER_MODEL]  (first writes a small seeded model to MODEL_DIR)
//                    [--transplant mixtral|qwen2_moe|qwen3_moe DONOR_DIR]  (first writes an MoE grown from the dense
//                                                                          DONOR_DIR to MODEL_DIR: gguf_moe_models.h)
// The tokenizer.model of MODEL_DIR is copied beside OUT.gguf (what `quark eval --model OUT.gguf --text` reads).
#include <filesystem>
#include <iostream>

#include "core/export/gguf_blocks.h"
#include "core/export/gguf_mixture.h"
#include "tests/export/gguf_moe_models.h"
#include "tests/export/gguf_test_util.h"

int main(int argc, char** argv) {
  using namespace quark;
  if (argc < 3) {
    std::cerr << "usage: gguf_export_tool MODEL_DIR OUT.gguf [--type T] [--scheme PRESET] [--exclude PATTERN]...\n";
    return 2;
  }
  testing::GgufTestExport job;
  job.model_dir = argv[1];
  job.output_file = argv[2];
  std::string scheme;
  std::vector<std::string> exclude;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--type") {
      auto type = exporter::gguf::ParseGgmlType(value);
      if (!type.ok()) {
        std::cerr << type.status().message() << "\n";
        return 2;
      }
      job.options.type = *type;
    } else if (flag == "--file-type") {
      auto file_type = exporter::gguf::ParseFileType(value);
      if (!file_type.ok()) {
        std::cerr << file_type.status().message() << "\n";
        return 2;
      }
      job.options.file_type = *file_type;
    } else if (flag == "--pure") {
      job.options.pure = value == "true";
    } else if (flag == "--scheme") {
      scheme = value;
    } else if (flag == "--synthetic" && i + 2 < argc) {
      if (auto s = testing::WriteSyntheticModelForGguf(value, job.model_dir, argv[i + 2]); !s.ok()) {
        std::cerr << "gguf_export_tool: " << s.ToString() << "\n";
        return 1;
      }
      ++i;
    } else if (flag == "--transplant" && i + 2 < argc) {
      if (auto s = testing::WriteTransplantedMoeModel(value, argv[i + 2], job.model_dir); !s.ok()) {
        std::cerr << "gguf_export_tool: " << s.ToString() << "\n";
        return 1;
      }
      ++i;
    } else if (flag == "--exclude") {
      exclude.push_back(value);
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (!scheme.empty()) {
    auto config = testing::GgufTestConfig(scheme, exclude);
    if (!config.ok()) {
      std::cerr << config.status().message() << "\n";
      return 2;
    }
    job.config = *config;
  }
  auto files = testing::ExportGguf(job);
  if (!files.ok()) {
    std::cerr << "gguf_export_tool: " << files.status().ToString() << "\n";
    return 1;
  }
  std::error_code ec;
  const auto beside = std::filesystem::path(job.output_file).parent_path() / "tokenizer.model";
  std::filesystem::copy_file(std::filesystem::path(job.model_dir) / "tokenizer.model", beside,
                             std::filesystem::copy_options::overwrite_existing, ec);
  std::cout << job.output_file << " " << std::filesystem::file_size(job.output_file) << "\n";
  return 0;
}

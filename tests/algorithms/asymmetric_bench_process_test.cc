// `algo_bench gptaq|qronos --save-inputs / --load-inputs` (bench/algorithms/asymmetric_bench.cc), the engine's half of
// bench/algorithms/asymmetric_vs_quark.sh: the file it writes holds the inputs the seeded run uses, so a run on the file
// is the seeded run to the last digit, and a file that does not hold x, xq and w is refused naming what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "core/checkpoint/checkpoint_reader.h"
#include "core/checkpoint/checkpoint_writer.h"
#include "tests/algorithms/cli_run.h"

namespace quark {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::RunShell;

// A small layer (N 48, K 256, T 96), one thread: the same GEMMs in every run.
constexpr const char* kShape =
    " --random 48,256,96 --seed 7 --drift 0.2 "
    "--group-size 64 --block-size 32 --threads 1";

class AsymmetricBenchProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("asymmetric_bench_process_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static CliRun Bench(const std::string& args) { return RunShell(std::string(QUARK_ALGO_BENCH_BINARY) + " " + args); }

  // The last JSON line a run printed (the OpenBLAS guard's notice may come before it).
  static nlohmann::json Line(const CliRun& run) {
    const size_t at = run.output.rfind("\n{");
    const std::string line = run.output.substr(at == std::string::npos ? 0 : at + 1);
    return nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  }

  fs::path dir_;
};

TEST_F(AsymmetricBenchProcessTest, ARunOnTheSavedInputsIsTheSeededRun) {
  const std::string file = (dir_ / "inputs.safetensors").string();
  const CliRun save = Bench(std::string("gptaq") + kShape + " --save-inputs " + file);
  ASSERT_EQ(save.exit_code, 0) << save.output;
  auto reader = checkpoint::CheckpointReader::OpenFile(file);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->Names(), (std::vector<std::string>{"w", "x", "xq"}));
  EXPECT_EQ((*reader)->Get("x")->info->shape, (std::vector<int64_t>{96, 256}));
  EXPECT_EQ((*reader)->Get("xq")->info->shape, (std::vector<int64_t>{96, 256}));
  EXPECT_EQ((*reader)->Get("w")->info->shape, (std::vector<int64_t>{48, 256}));
  const std::string flags = " --group-size 64 --block-size 32 --threads 1";
  for (const std::string method : {"gptaq", "qronos"}) {
    const CliRun seeded = Bench(method + kShape);
    const CliRun loaded = Bench(method + " --load-inputs " + file + flags);
    ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
    ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
    const nlohmann::json a = Line(seeded), b = Line(loaded);
    ASSERT_TRUE(a.is_object() && b.is_object()) << seeded.output << loaded.output;
    EXPECT_EQ(b["inputs"], file);
    EXPECT_EQ(b["shape"], a["shape"]);
    EXPECT_EQ(b["tokens"], a["tokens"]);
    // Bit for bit: the same x, xq and w give the same statistics, weights and errors.
    EXPECT_EQ(b["rel_output_error"].get<double>(), a["rel_output_error"].get<double>()) << method;
    EXPECT_EQ(b["rtn_rel_output_error"].get<double>(), a["rtn_rel_output_error"].get<double>()) << method;
    EXPECT_LT(a["rel_output_error"].get<double>(), a["rtn_rel_output_error"].get<double>()) << method;
  }
}

TEST_F(AsymmetricBenchProcessTest, AFileWithoutXqOrWithMismatchedShapesIsRefusedByName) {
  const auto write = [&](const std::string& name, std::vector<checkpoint::PlannedTensor> plan) {
    const fs::path scratch = dir_ / (name + ".d");
    auto writer = checkpoint::CheckpointWriter::Create(scratch.string(), plan);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (const auto& t : plan) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      const std::string zeros(static_cast<size_t>(n) * (t.dtype == checkpoint::StDType::kF16 ? 2 : 4), '\0');
      EXPECT_TRUE((*writer)->Write(t.name, zeros).ok());
    }
    EXPECT_TRUE((*writer)->Finish().ok());
    const fs::path path = dir_ / name;
    fs::rename(scratch / "model.safetensors", path);
    return path.string();
  };
  using checkpoint::StDType;
  // Each file, the method run on it and what the refusal must say (the file's path is said in every one).
  struct Case {
    std::string file, method, says;
  };
  const Case cases[] = {
      {write("no_xq.safetensors", {{"x", StDType::kF32, {8, 16}}, {"w", StDType::kF32, {4, 16}}}), "gptaq", "xq"},
      {write("other_k.safetensors",
             {{"x", StDType::kF32, {8, 16}}, {"xq", StDType::kF32, {8, 16}}, {"w", StDType::kF32, {4, 32}}}),
       "qronos", "w [4, 32]"},
      {write("half.safetensors",
             {{"x", StDType::kF16, {8, 16}}, {"xq", StDType::kF32, {8, 16}}, {"w", StDType::kF32, {4, 16}}}),
       "gptaq", "`x` must be a float32 matrix"},
  };
  for (const Case& c : cases) {
    const CliRun run = Bench(c.method + " --load-inputs " + c.file);
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(c.says), std::string::npos) << run.output;
    EXPECT_NE(run.output.find(c.file), std::string::npos) << run.output;
  }
}

TEST_F(AsymmetricBenchProcessTest, LoadedInputsTakeNoSeedOrShape) {
  const CliRun run = Bench("gptaq --load-inputs x.safetensors --random 8,16,8");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("excludes"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace quark

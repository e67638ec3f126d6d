// A full disk while an export is written (#33 item 4): the GGUF and ONNX writers answer RESOURCE_EXHAUSTED naming
// the file (a job runner then hands the job to another attempt), as the HF-quark writer and the checkpoints do.
// The ENOSPC is the kernel's own: /dev/full answers every write with it, reached through a symlink where the writer
// creates its staging file (GGUF) or opened as the external data file (ONNX). No root or tmpfs needed.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "core/base/write_error.h"
#include "core/checkpoint/model_config.h"
#include "core/config/layer_plan.h"
#include "core/export/gguf_writer.h"
#include "core/export/hf_quark_layout.h"
#include "core/export/onnx_graph.h"
#include "tests/quantize/test_model.h"

namespace quark::exporter {
namespace {

namespace fs = std::filesystem;

void ExpectDiskFullNaming(const absl::Status& status, const std::string& path) {
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_NE(std::string(status.message()).find(path), std::string::npos) << status;
  EXPECT_NE(std::string(status.message()).find("No space left on device"), std::string::npos) << status;
}

TEST(ExportDiskFullTest, GgufStagingFileOnAFullDiskIsResourceExhaustedNamingIt) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  const std::string dir = testing::TempPath("quark_gguf_full");
  fs::create_directories(dir);
  const std::string out = dir + "/model.gguf";
  fs::create_symlink("/dev/full", out + ".partial");  // the writer's O_CREAT|O_TRUNC open follows it
  const std::string model = testing::FixturePath("stories260K");
  auto model_config = checkpoint::LoadModelConfig(model);
  ASSERT_TRUE(model_config.ok()) << model_config.status();
  const Config config;
  const LayerPlan plan = BuildLayerPlan(config, ModulesFromConfig(*model_config));
  auto exporter = CreateGgufExporter(model, out, config, plan, {});
  ASSERT_FALSE(exporter.ok());
  ExpectDiskFullNaming(exporter.status(), out + ".partial");
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST(ExportDiskFullTest, OnnxExternalDataOnAFullDiskIsResourceExhaustedNamingIt) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  onnx::TensorProto tensor;
  // A tensor larger than stdio's buffer: fwrite itself fails.
  auto big = onnx_export::ExternalDataFile::Create("/dev/full", "model.onnx.data");
  ASSERT_TRUE(big.ok()) << big.status();
  const std::vector<char> bytes(1 << 20, 1);
  ExpectDiskFullNaming((*big)->Append(bytes.data(), bytes.size(), tensor), "/dev/full");
  // A small one sits in the buffer until Close flushes it.
  auto small = onnx_export::ExternalDataFile::Create("/dev/full", "model.onnx.data");
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_TRUE((*small)->Append(bytes.data(), 17, tensor).ok());
  ExpectDiskFullNaming((*small)->Close(), "/dev/full");
}

TEST(ExportDiskFullTest, WriteErrorTellsAFullDiskFromOtherFailures) {
  EXPECT_EQ(WriteError("w", ENOSPC).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(WriteError("w", EDQUOT).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(WriteError("w", EIO).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(WriteError("w", std::make_error_code(std::errc::no_space_on_device)).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(WriteError("w", std::error_code(ENOSPC, std::system_category())).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(WriteError("w", std::make_error_code(std::errc::permission_denied)).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(WriteError("out.gguf", EIO).message(), "out.gguf: Input/output error");
}

}  // namespace
}  // namespace quark::exporter

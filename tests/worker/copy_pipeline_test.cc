#include "worker/copy_pipeline.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/storage/support/subprocess.h"
#include "tests/worker/recording_sink.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;

PipelineRequest CopyRequest(const fs::path& root, const std::string& ms) {
  PipelineRequest request;
  request.job_id = "job-1";
  request.model_dir = root / "model";
  request.output_dir = root / "out";
  fs::create_directories(request.model_dir / "sub");
  fs::create_directories(request.output_dir);
  for (const char* name : {"a.bin", "b.bin", "sub/c.json"}) std::ofstream(request.model_dir / name) << name << "-bytes";
  if (!ms.empty()) (*request.spec.mutable_labels())[kTestCopyLabel] = ms;
  return request;
}

TEST(CopyPipelineTest, ALabelledJobCopiesTheModelInTenSteps) {
  quark::testing::TempDir dir;
  PipelineRequest request = CopyRequest(dir.path(), "20");
  CopyPipeline pipeline(nullptr);
  RecordingSink sink;
  CancelToken cancel;
  absl::StatusOr<PipelineResult> result = pipeline.Run(request, sink, cancel);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->metrics.at("copied_files"), 3.0);
  for (const char* name : {"a.bin", "b.bin", "sub/c.json"}) {
    std::ifstream in(request.output_dir / name);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), std::string(name) + "-bytes") << name;
  }
  ASSERT_EQ(sink.events().size(), 10u);
  EXPECT_EQ(sink.events().back().fraction(), 1.0);
}

TEST(CopyPipelineTest, RefusesABadLabelAndAnUnlabelledJobWithoutAnEngine) {
  quark::testing::TempDir dir;
  CopyPipeline pipeline(nullptr);
  RecordingSink sink;
  CancelToken cancel;
  for (const char* bad : {"x", "-1", "3600001", "5ms"}) {
    absl::StatusOr<PipelineResult> result = pipeline.Run(CopyRequest(dir.path(), bad), sink, cancel);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(result.status().message().find(kTestCopyLabel), std::string::npos) << result.status();
  }
  EXPECT_EQ(pipeline.Run(CopyRequest(dir.path(), ""), sink, cancel).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(CopyPipelineTest, StopsOnCancel) {
  quark::testing::TempDir dir;
  CopyPipeline pipeline(nullptr);
  RecordingSink sink;
  CancelToken cancel;
  cancel.Cancel(CancelToken::Reason::kCancelled);
  EXPECT_EQ(pipeline.Run(CopyRequest(dir.path(), "600000"), sink, cancel).status().code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace quark::worker

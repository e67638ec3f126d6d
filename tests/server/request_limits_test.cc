// Attacks on request sizes through real gRPC on loopback (the real quarkd on port 0): a megabyte preset name,
// specs of megabytes (thousands of patterns, tens of thousands of layer_quant_config entries), memory_mb near int64's
// overflow, and a store of large specs listed with the default page. Each is refused (or paged) naming the field,
// and no error quotes more than ~200 bytes of what was sent.
#include "server/api/request_limits.h"

#include <grpcpp/grpcpp.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "core/config/presets.h"
#include "core/config/proto_convert.h"
#include "quark/v1/service.grpc.pb.h"
#include "tests/server/api_test_base.h"

namespace quark::server {
namespace {

namespace pb = quark::v1;

constexpr size_t kMaxErrorBytes = 1024;  // what a refusal may send back, the field path and limits included

class RequestLimitsTest : public ApiTestBase {
 protected:
  void SetUp() override { StartQuarkd(); }

  // Refused INVALID_ARGUMENT with `text` in a short message.
  static void ExpectRefused(const grpc::Status& status, const std::string& text) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message().substr(0, 300);
    EXPECT_NE(status.error_message().find(text), std::string::npos) << status.error_message().substr(0, 300);
    EXPECT_LE(status.error_message().size(), kMaxErrorBytes);
  }
};

TEST(ExcerptTest, QuotesAtMostTwoHundredBytesOnACharacterBoundary) {
  EXPECT_EQ(Excerpt("short"), "short");
  EXPECT_EQ(Excerpt(std::string(200, 'a')), std::string(200, 'a'));
  EXPECT_EQ(Excerpt(std::string(1 << 20, 'a')), std::string(200, 'a') + "... (1048576 bytes)");
  // "é" is two bytes: 199 ASCII bytes then "é" straddles the cut, which backs off to byte 199.
  const std::string text = std::string(199, 'a') + "\xc3\xa9" + std::string(100, 'b');
  EXPECT_EQ(Excerpt(text), std::string(199, 'a') + "... (301 bytes)");
}

// Issue #29 item 7: a viewer's ValidateConfig with a 1 MB preset name cost ~0.9 s of CPU and echoed the megabyte.
TEST_F(RequestLimitsTest, AMegabytePresetNameIsRefusedWithoutEchoingIt) {
  pb::ValidateConfigRequest validate;
  validate.set_preset(std::string(1 << 20, 'x'));
  grpc::ClientContext context;
  pb::ValidateConfigResponse response;
  ExpectRefused(api_->ValidateConfig(&context, validate, &response), "preset: 1048576 bytes, more than 128");
  EXPECT_EQ(response.ByteSizeLong(), 0u);

  pb::SubmitJobRequest submit = ValidRequest();
  submit.mutable_spec()->set_preset(std::string(1 << 20, 'x'));
  ExpectRefused(Submit(submit), "spec.preset: 1048576 bytes, more than 128");
  // An unknown preset of a reasonable length is still named (and quoted) in the refusal.
  submit.mutable_spec()->set_preset("int9_imaginary");
  ExpectRefused(Submit(submit), "int9_imaginary");
}

// Issue #29 item 8: 4,096 exclude patterns of 2 KB and 20,000 layer_quant_config entries were accepted (~9 MB specs).
TEST_F(RequestLimitsTest, OversizedSpecsAreRefusedNamingTheField) {
  pb::SubmitJobRequest many = ValidRequest();
  for (int i = 0; i < 4096; ++i) many.mutable_spec()->add_exclude("model.layers.*.mlp");
  ExpectRefused(Submit(many), "spec.exclude: 4096 entries, more than 1024");

  pb::SubmitJobRequest long_pattern = ValidRequest();
  long_pattern.mutable_spec()->add_exclude("a");
  long_pattern.mutable_spec()->add_exclude(std::string(2048, '*'));
  ExpectRefused(Submit(long_pattern), "spec.exclude[1]: 2048 bytes, more than 1024");

  pb::SubmitJobRequest entries = ValidRequest();
  pb::Config* config = entries.mutable_spec()->mutable_config();
  *config = ToProto(AllPresets().front().config);
  for (int i = 0; i < 20000; ++i) config->add_layer_quant_config()->set_pattern("model.layers.*");
  ExpectRefused(Submit(entries), "spec.config.layer_quant_config: 20000 entries, more than 1024");

  // Within every per-field limit, but 300 KB in all.
  pb::SubmitJobRequest total = ValidRequest();
  for (int i = 0; i < 300; ++i) total.mutable_spec()->add_exclude(std::string(1000, 'p'));
  ExpectRefused(Submit(total), "spec: ");
  ExpectRefused(Submit(total), "bytes serialized, more than 262144");

  pb::ValidateConfigRequest validate;
  validate.set_preset(AllPresets().front().name);
  for (int i = 0; i < 2000; ++i) validate.add_exclude("x");
  grpc::ClientContext context;
  pb::ValidateConfigResponse response;
  ExpectRefused(api_->ValidateConfig(&context, validate, &response), "exclude: 2000 entries, more than 1024");
}

// Issue #29 item 10: memory_mb = 2^43 overflowed (<< 20) to a 147 MB need, 2^43 - 1 to 9.2e18.
TEST_F(RequestLimitsTest, MemoryMbThatWouldOverflowIsRefused) {
  for (int64_t memory_mb : {int64_t{1} << 43, (int64_t{1} << 43) - 1, int64_t{1} << 31}) {
    pb::SubmitJobRequest request = ValidRequest();
    request.mutable_spec()->mutable_resources()->set_memory_mb(memory_mb);
    ExpectRefused(Submit(request), "spec.resources.memory_mb: " + std::to_string(memory_mb) + " is above");
  }
  pb::SubmitJobRequest fine = ValidRequest();
  fine.mutable_spec()->mutable_resources()->set_memory_mb(int64_t{1} << 20);  // 1 TiB
  EXPECT_TRUE(Submit(fine).ok());
}

// #27: the compute dtype is one of the engine's; anything else is refused at submit naming the field.
TEST_F(RequestLimitsTest, AComputeDtypeTheEngineHasNotIsRefusedNamingTheField) {
  for (const char* dtype : {"fp16", "F32", "bfloat16 "}) {
    pb::SubmitJobRequest request = ValidRequest();
    request.mutable_spec()->mutable_resources()->set_compute_dtype(dtype);
    ExpectRefused(Submit(request), "spec.resources.compute_dtype: ");
  }
  for (const char* dtype : {"f32", "bf16"}) {
    pb::SubmitJobRequest fine = ValidRequest();
    fine.mutable_spec()->mutable_resources()->set_compute_dtype(dtype);
    EXPECT_TRUE(Submit(fine).ok()) << dtype;
  }
}

// Issue #29 item 8: once the store held large specs, ListJobs (page >= 50) failed RESOURCE_EXHAUSTED for everyone (the
// response was over the client's limit). Pages now end by bytes as well: every job comes back, over several pages,
// with the client's default 4 MiB limit.
TEST_F(RequestLimitsTest, ListJobsPagesByBytesSoThatLargeSpecsStayListable) {
  constexpr int kJobs = 24;
  std::set<std::string> submitted;
  for (int i = 0; i < kJobs; ++i) {
    pb::SubmitJobRequest request = ValidRequest();
    for (int p = 0; p < 240; ++p) request.mutable_spec()->add_exclude(std::string(1000, static_cast<char>('a' + p % 26)));
    request.set_request_id("big-" + std::to_string(i));
    grpc::ClientContext context;
    pb::Job job;
    ASSERT_TRUE(api_->SubmitJob(&context, request, &job).ok());
    submitted.insert(job.id());
  }
  std::set<std::string> listed;
  std::string token;
  int pages = 0;
  do {
    pb::ListJobsRequest request;
    request.set_page_token(token);
    grpc::ClientContext context;
    pb::ListJobsResponse response;
    grpc::Status status = api_->ListJobs(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message().substr(0, 300);
    EXPECT_LE(response.ByteSizeLong(), size_t{4} << 20);
    for (const pb::Job& job : response.jobs()) EXPECT_TRUE(listed.insert(job.id()).second) << "listed twice";
    token = response.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(listed, submitted);
  EXPECT_GE(pages, 2);

  pb::ListJobsRequest bad;
  bad.set_page_token(std::string(1 << 20, '9'));
  grpc::ClientContext context;
  pb::ListJobsResponse response;
  ExpectRefused(api_->ListJobs(&context, bad, &response), "page_token: 1048576 bytes");
}

}  // namespace
}  // namespace quark::server

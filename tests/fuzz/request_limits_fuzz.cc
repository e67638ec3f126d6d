// libFuzzer target for the request limits (server/api/request_limits.cc): any bytes a caller can send as a
// SubmitJob or ValidateConfig request are parsed as protobuf and walked by CheckRequestSizes. It returns, its
// errors are INVALID_ARGUMENT with a bounded message, and what it accepts is within the limits it promises.
#include <cstddef>
#include <cstdint>

#include "quark/v1/service.pb.h"
#include "server/api/request_limits.h"

namespace {

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

void CheckLimits(const google::protobuf::Message& message, const std::string& prefix) {
  const absl::Status status = quark::server::CheckRequestSizes(message, prefix);
  if (status.ok()) {
    Check(message.ByteSizeLong() <= quark::server::kMaxRequestBytes);
    return;
  }
  Check(status.code() == absl::StatusCode::kInvalidArgument);
  // A message names a field and quotes at most an excerpt of the value, never the whole request.
  Check(status.message().size() <= 4096);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the request kind; the rest is the wire message.
  const bool submit = (data[0] & 1) != 0;
  if (submit) {
    quark::v1::SubmitJobRequest request;
    if (request.ParseFromArray(data + 1, static_cast<int>(size - 1))) CheckLimits(request, "");
  } else {
    quark::v1::ValidateConfigRequest request;
    if (request.ParseFromArray(data + 1, static_cast<int>(size - 1))) CheckLimits(request, "");
  }
  (void)quark::server::Excerpt(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}

#include "server/api/status_util.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace quark::server {
namespace {

// A last bound on what an error sends back: the checks quote at most ~200 bytes of any value (request_limits.h),
// and a message joining many errors is cut here rather than sent whole.
constexpr size_t kMaxMessageBytes = 4096;

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxMessageBytes) {
    size_t cut = kMaxMessageBytes;
    while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
    message = absl::StrCat(message.substr(0, cut), "... (", message.size(), " bytes in all)");
  }
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace quark::server

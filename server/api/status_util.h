// The one mapping from absl::Status (how the server's parts report errors) to grpc::Status.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace quark::server {

/// Same code, same message (cut to 4 KiB, with the full length noted, when longer).
grpc::Status ToGrpcStatus(const absl::Status& status);

/// Answers a unary callback call at once with `status` (ToGrpcStatus's mapping); returns the reactor to hand back.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context, const absl::Status& status);

}  // namespace quark::server

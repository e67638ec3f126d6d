// #36 item 1: the store quarkd writes a sweep parent's manifest through, built as a worker builds the store of a
// lease of the parent's tenant (worker/lease_storage.cc): file:// confined to quarkd's --allowed-roots, s3:// with
// the endpoint and keys of quarkd's environment (AWS_*, as its local workers get them) unless the tenant has storage
// keys of its own, and everything held to the tenant's output_prefixes when its policy names some.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/scheduler/sweep_manifest.h"
#include "worker/storage/s3_config.h"

namespace quark::server {

class AccessControl;

/// `access` (may be null: no tenant policies) must outlive the returned function; it is read at each call, so a
/// reloaded tokens file applies to the next parent. `s3` nullopt: s3:// parents fail naming the URI.
ParentStoreFor MakeParentStoreFor(std::vector<std::string> allowed_roots, std::optional<storage::S3Config> s3,
                                  const AccessControl* access);

}  // namespace quark::server

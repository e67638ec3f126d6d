#include "server/scheduler/sweep_manifest.h"

#include <map>
#include <optional>
#include <utility>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/base/digest.h"
#include "core/base/ed25519.h"
#include "server/scheduler/auto_search_plan.h"
#include "server/scheduler/time_util.h"
#include "worker/storage/manifest_signature.h"
#include "worker/storage/object_store.h"
#include "worker/storage/object_uri.h"
#include "worker/storage/publish.h"
#include "worker/storage/tenant_object_store.h"

namespace quark::server {
namespace {

using nlohmann::json;
using quark::v1::Job;
using quark::v1::JobState;
using quark::v1::SweepCandidate;

json ProtoJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) return nullptr;
  return json::parse(text, nullptr, false);
}

std::string Rfc3339(const google::protobuf::Timestamp& time) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", FromTimestamp(time), absl::UTCTimeZone());
}

json Scores(const google::protobuf::Map<std::string, double>& scores) {
  json out = json::object();  // nlohmann's object is sorted: the bytes do not depend on the map's order
  for (const auto& [task, score] : scores) out[task] = score;
  return out;
}

// What each row is: a sweep's candidate, or a search's sensitivity pass (a part of one when split by layer range) or
// verification round.
std::string RowRole(const Job& parent, int index) {
  if (!parent.spec().has_auto_search()) return "candidate";
  return index < AutoPassRows(parent) ? "pass" : "round";
}

json Row(const Job& parent, int index, const Job* child) {
  const SweepCandidate& row = parent.sweep().candidates(index);
  json out = {{"scheme", row.scheme()},
              {"role", RowRole(parent, index)},
              {"job_id", row.job_id()},
              {"state", JobState_Name(row.state())},
              {"size_bytes", row.size_bytes()},
              {"bits_per_weight", row.bits_per_weight()},
              {"ppl", row.ppl()},
              {"kld", row.kld()},
              {"task_scores", Scores(row.task_scores())},
              {"seconds", row.seconds()}};
  if (!row.error().empty()) out["error"] = row.error();
  if (row.layer_count() > 0) {
    out["first_layer"] = row.first_layer();
    out["layer_count"] = row.layer_count();
  }
  if (child != nullptr) {
    // A deduplicated child carries the result (and so the manifest) of the job that ran.
    if (!child->deduplicated_from().empty()) out["deduplicated_from"] = child->deduplicated_from();
    if (!child->result().manifest_uri().empty()) {
      out["manifest_uri"] = child->result().manifest_uri();
      out["manifest_sha256"] = child->result().manifest_sha256();
    }
  }
  return out;
}

json AutoSearch(const quark::v1::AutoSearchResult& search) {
  json out = ProtoJson(search);
  if (!out.is_object()) out = json::object();
  out.erase("recipe_json");
  // The recipe as the object it is (Quark's quantization_config), not a string inside a string.
  json recipe = json::parse(search.recipe_json(), nullptr, false);
  out["recipe"] = recipe.is_discarded() ? json(nullptr) : recipe;
  if (search.rounds_size() > 0) {
    const quark::v1::AutoSearchRound& last = search.rounds(search.rounds_size() - 1);
    out["answer"] = {{"job_id", last.job_id()},
                     {"bits_per_weight", last.bits_per_weight()},
                     {"predicted_kld", last.predicted_kld()},
                     {"measured_kld", last.measured_kld()},
                     {"predicted_ppl_increase", last.predicted_ppl_increase()},
                     {"measured_ppl_increase", last.measured_ppl_increase()}};
  }
  return out;
}

}  // namespace

json BuildSweepManifest(const Job& parent, const std::vector<Job>& children) {
  std::map<std::string, const Job*> by_id;
  for (const Job& child : children) by_id[child.id()] = &child;
  json doc = json::object();
  doc["format_version"] = 1;
  doc["kind"] = parent.spec().has_auto_search() ? "auto_search" : "sweep";
  doc["job_id"] = parent.id();
  // The content's own time (the last child's end): a rewrite after a restart gives the same bytes.
  std::optional<google::protobuf::Timestamp> last_end;
  for (const Job& child : children) {
    if (!child.has_finished_at()) continue;
    if (!last_end || FromTimestamp(child.finished_at()) > FromTimestamp(*last_end)) last_end = child.finished_at();
  }
  doc["created_at"] = Rfc3339(last_end.value_or(parent.created_at()));
  doc["state"] = JobState_Name(parent.state());
  doc["error"] = parent.error();
  doc["model_uri"] = parent.spec().model_uri();
  doc["output_uri"] = parent.spec().output_uri();
  doc["spec"] = ProtoJson(parent.spec());
  // A reader recomputes it from "spec" (compact dump, keys sorted) to compare two parents' specs.
  doc["spec_sha256"] = Sha256Hex(doc["spec"].dump());
  if (!parent.tenant().empty()) doc["tenant"] = parent.tenant();
  doc["files"] = json::array();  // the parent publishes no artifact of its own; the rows name the children's
  doc["metrics"] = json::object();
  for (const auto& [name, value] : parent.result().metrics()) doc["metrics"][name] = value;
  doc["float"] = {{"ppl", parent.sweep().ppl_float()}, {"task_scores", Scores(parent.sweep().task_scores_float())}};
  json table = json::array();
  json failed = json::array();
  for (int i = 0; i < parent.sweep().candidates_size(); ++i) {
    const SweepCandidate& row = parent.sweep().candidates(i);
    auto child = by_id.find(row.job_id());
    table.push_back(Row(parent, i, child == by_id.end() || row.job_id().empty() ? nullptr : child->second));
    if (row.state() == JobState::JOB_STATE_SUCCEEDED) continue;
    failed.push_back({{"scheme", row.scheme()},
                      {"job_id", row.job_id()},
                      {"state", JobState_Name(row.state())},
                      {"error", row.error()}});
  }
  doc["table"] = std::move(table);
  doc["failed"] = std::move(failed);
  if (parent.spec().has_auto_search()) doc["auto_search"] = AutoSearch(parent.auto_search());
  return doc;
}

SweepManifestWriter::SweepManifestWriter(ParentStoreFor store_for, std::shared_ptr<const Ed25519Signer> signer)
    : store_for_(std::move(store_for)), signer_(std::move(signer)) {}

absl::StatusOr<WrittenManifest> SweepManifestWriter::Write(const Job& parent, const std::vector<Job>& children) const {
  WrittenManifest written;
  written.uri = storage::SweepManifestUri(parent.spec().output_uri(), parent.id());
  // Lexically first (no "." or ".." anywhere, below <output_uri>/<id>), as a worker checks its job's output URI;
  // the file:// store then holds the resolved path to the roots.
  const std::string folder = storage::JoinUri(parent.spec().output_uri(), parent.id());
  if (absl::Status inside = storage::CheckUnderPrefixes("spec.output_uri", written.uri, {folder},
                                                        "the parent's own output folder");
      !inside.ok()) {
    return inside;
  }
  absl::StatusOr<std::shared_ptr<storage::ObjectStore>> store = store_for_(parent);
  if (!store.ok()) return store.status();
  json doc = BuildSweepManifest(parent, children);
  if (signer_ != nullptr) storage::SignManifest(doc, *signer_);
  const std::string bytes = doc.dump(2);
  if (absl::Status status = (*store)->PutBytes(written.uri, bytes); !status.ok()) return status;
  written.sha256 = Sha256Hex(bytes);
  return written;
}

}  // namespace quark::server

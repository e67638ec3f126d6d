#include "worker/float_baseline.h"

#include <cmath>
#include <ctime>
#include <filesystem>
#include <thread>

#include "core/base/digest.h"
#include "core/search/sensitivity_cache.h"
#include "quark/version.h"
#include "worker/storage/object_uri.h"
#include "worker/storage/strings.h"

namespace quark::worker {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kFormat[] = "quark-float-baseline-v1";
constexpr int64_t kMaxJsonBytes = int64_t{1} << 20;
constexpr int64_t kMaxRowsBytes = int64_t{64} << 30;
constexpr char kRowsObject[] = "kld-rows.bin";

int64_t NowUnix() { return static_cast<int64_t>(std::time(nullptr)); }

// Task names become object names: only those that cannot leave the prefix or collide are shared.
bool ShareableTaskName(const std::string& task) {
  if (task.empty() || task.size() > 64) return false;
  for (char c : task) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

bool IsHex(const std::string& text) {
  return text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

absl::StatusOr<std::string> FloatBaselineKey(const PipelineRequest& request) {
  absl::StatusOr<std::string> model = search::ModelDigest(request.model_dir.string());
  if (!model.ok()) return model.status();
  absl::StatusOr<std::string> text = Sha256FileHex(request.evaluation_file);
  if (!text.ok()) return text.status();
  quark::v1::EvaluationSpec evaluation = request.spec.evaluation();
  evaluation.clear_uri();  // its content is in `text`; the gates cannot change the float figures, but they are few
  return Sha256Hex(str::Cat(kFormat, "\nmodel ", *model, "\ntext ", *text, "\nevaluation ",
                            evaluation.ShortDebugString(), "\ndevice ", request.device, "\ncompute_dtype ",
                            request.spec.resources().compute_dtype(), "\nengine ", QUARK_ENGINE_VERSION, "\n"));
}

std::string FloatBaselinePrefix(const std::string& output_uri, const std::string& key) {
  return storage::JoinUri(storage::JoinUri(output_uri, ".quark-float-baselines"), key);
}

SharedFloatBaseline::SharedFloatBaseline(std::shared_ptr<storage::ObjectStore> store, std::string prefix,
                                         std::string key, std::string job_id, fs::path scratch,
                                         ProgressSink& progress, std::function<bool()> cancelled,
                                         FloatBaselineOptions options)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      key_(std::move(key)),
      job_id_(std::move(job_id)),
      scratch_(std::move(scratch)),
      progress_(progress),
      cancelled_(std::move(cancelled)),
      options_(options) {}

absl::StatusOr<std::unique_ptr<SharedFloatBaseline>> SharedFloatBaseline::Open(
    std::shared_ptr<storage::ObjectStore> store, const PipelineRequest& request, ProgressSink& progress,
    std::function<bool()> cancelled, FloatBaselineOptions options) {
  absl::StatusOr<std::string> key = FloatBaselineKey(request);
  if (!key.ok()) return key.status();
  if (key->size() != 64 || !IsHex(*key)) return absl::InternalError("float baseline: the key is not SHA-256 hex");
  std::unique_ptr<SharedFloatBaseline> baseline(new SharedFloatBaseline(
      std::move(store), FloatBaselinePrefix(request.spec.output_uri(), *key), *key, request.job_id,
      request.scratch_dir / "float-baseline", progress, std::move(cancelled), options));
  baseline->Claim();
  return baseline;
}

SharedFloatBaseline::~SharedFloatBaseline() {
  if (producer_ && !finished_) WriteClaim(/*done=*/true);
}

std::string SharedFloatBaseline::Uri(const std::string& name) const { return storage::JoinUri(prefix_, name); }

void SharedFloatBaseline::WriteClaim(bool done) {
  const Json claim = {{"format", kFormat}, {"key", key_}, {"job_id", job_id_}, {"unix_s", NowUnix()}, {"done", done}};
  if (absl::Status put = store_->PutBytes(Uri("claim.json"), claim.dump()); !put.ok()) {
    progress_.Log(str::Cat("float baseline: claim not written: ", put.message()));
  }
}

void SharedFloatBaseline::Claim() {
  const std::string why = WhyNotWaiting();
  if (why.empty()) {
    progress_.Log(str::Cat("float baseline ", key_.substr(0, 12),
                           ": another job of the sweep measures the float model; this one reads its figures from ",
                           prefix_));
    return;
  }
  WriteClaim(/*done=*/false);
  std::this_thread::sleep_for(options_.settle);  // a job that claimed at the same moment: the last write holds
  absl::StatusOr<std::string> back = store_->GetBytes(Uri("claim.json"));
  const Json claim = back.ok() ? Json::parse(*back, nullptr, false) : Json();
  producer_ = !back.ok() || !claim.is_object() || claim.value("job_id", "") == job_id_;
  progress_.Log(str::Cat("float baseline ", key_.substr(0, 12), ": ",
                         producer_ ? "this job holds the claim: it measures the float figures not stored yet"
                                   : "another job of the sweep measures the float model; this one reads its figures",
                         " (", prefix_, ")"));
}

std::string SharedFloatBaseline::WhyNotWaiting() {
  absl::StatusOr<storage::ObjectInfo> info = store_->Head(Uri("claim.json"));
  if (!info.ok()) return "no job holds the claim";
  if (info->size_bytes > kMaxJsonBytes) return "the claim is not one";
  absl::StatusOr<std::string> text = store_->GetBytes(Uri("claim.json"));
  if (!text.ok()) return "the claim cannot be read";
  const Json claim = Json::parse(*text, nullptr, false);
  if (!claim.is_object() || claim.value("key", "") != key_ || !claim.contains("unix_s") ||
      !claim["unix_s"].is_number_integer()) {
    return "the claim is malformed";
  }
  const std::string holder = claim.value("job_id", "");
  if (holder == job_id_) return "this job holds the claim";
  if (claim.value("done", false)) return str::Cat("job ", holder, " ended its float evaluation without it");
  const int64_t age = NowUnix() - claim["unix_s"].get<int64_t>();
  if (age > options_.stale_after.count()) return str::Cat("job ", holder, "'s claim is ", age, " s old");
  return "";
}

absl::StatusOr<Json> SharedFloatBaseline::Fetch(const std::string& name) {
  const std::string uri = Uri(name + ".json");
  absl::StatusOr<storage::ObjectInfo> info = store_->Head(uri);
  if (!info.ok()) return info.status();
  if (info->size_bytes > kMaxJsonBytes) {
    return absl::DataLossError(str::Cat(uri, ": ", info->size_bytes, " bytes, at most ", kMaxJsonBytes));
  }
  absl::StatusOr<std::string> text = store_->GetBytes(uri);
  if (!text.ok()) return text.status();
  const Json piece = Json::parse(*text, nullptr, false);
  if (!piece.is_object() || piece.value("format", "") != kFormat || piece.value("key", "") != key_ ||
      piece.value("name", "") != name || !piece.contains("value")) {
    return absl::DataLossError(str::Cat(uri, ": not a float baseline figure of key ", key_));
  }
  return piece;
}

std::optional<Json> SharedFloatBaseline::Await(const std::string& name, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    absl::StatusOr<Json> piece = Fetch(name);
    if (piece.ok()) {
      ++read_;
      progress_.Log(str::Cat("float baseline: ", what, " read from ", Uri(name + ".json"), " (measured by job ",
                             piece->value("job_id", "?"), ")"));
      return (*piece)["value"];
    }
    if (!absl::IsNotFound(piece.status())) {
      progress_.Log(str::Cat("float baseline: ", what, " refused (", piece.status().message(),
                             "); measuring it here"));
      return std::nullopt;
    }
    if (producer_) return std::nullopt;  // this job measures it, as it claimed
    if (cancelled_ && cancelled_()) return std::nullopt;
    std::string why = WhyNotWaiting();
    if (why.empty() && std::chrono::steady_clock::now() - start > options_.max_wait) {
      why = str::Cat("waited ", options_.max_wait.count(), " s");
    }
    if (!why.empty()) {
      progress_.Log(str::Cat("float baseline: ", what, " missing (", why, "); measuring it here"));
      return std::nullopt;
    }
    std::this_thread::sleep_for(options_.poll);
  }
}

void SharedFloatBaseline::Store(const std::string& name, const Json& value, const std::string& what) {
  ++passes_;
  const Json piece = {{"format", kFormat}, {"key", key_}, {"name", name}, {"job_id", job_id_}, {"value", value}};
  const std::string uri = Uri(name + ".json");
  if (absl::Status put = store_->PutBytes(uri, piece.dump()); !put.ok()) {
    progress_.Log(str::Cat("float baseline: ", what, " not stored: ", put.message()));
    return;
  }
  progress_.Log(str::Cat("float baseline: ", what, " measured here and stored at ", uri));
  if (producer_) WriteClaim(/*done=*/false);  // refreshed: readers see the producer alive
}

std::optional<double> SharedFloatBaseline::Ppl() {
  if (ppl_) return ppl_;
  std::optional<Json> value = Await("ppl", "float perplexity");
  if (!value) return std::nullopt;
  if (!value->is_number() || !std::isfinite(value->get<double>()) || value->get<double>() <= 0) {
    progress_.Log("float baseline: the stored float perplexity is not a positive number; measuring it here");
    return std::nullopt;
  }
  ppl_ = value->get<double>();
  return ppl_;
}

void SharedFloatBaseline::StorePpl(double ppl) {
  ppl_ = ppl;
  Store("ppl", ppl, "float perplexity");
}

std::optional<std::string> SharedFloatBaseline::KldRows() {
  if (!kld_rows_file_.empty()) return kld_rows_file_;
  std::optional<Json> value = Await("kld", "float KLD reference rows");
  if (!value) return std::nullopt;
  auto refuse = [&](const std::string& why) -> std::optional<std::string> {
    progress_.Log(str::Cat("float baseline: the stored float KLD reference rows refused (", why,
                           "); measuring them here"));
    return std::nullopt;
  };
  if (!value->is_object() || !(*value)["bytes"].is_number_integer() || !(*value)["sha256"].is_string()) {
    return refuse("kld.json names no bytes and sha256");
  }
  const int64_t bytes = (*value)["bytes"].get<int64_t>();
  if (bytes <= 0 || bytes > kMaxRowsBytes) return refuse(str::Cat(bytes, " bytes, at most ", kMaxRowsBytes));
  absl::StatusOr<storage::ObjectInfo> info = store_->Head(Uri(kRowsObject));
  if (!info.ok()) return refuse(std::string(info.status().message()));
  if (info->size_bytes != bytes) return refuse(str::Cat(Uri(kRowsObject), " holds ", info->size_bytes, " bytes, ",
                                                        "kld.json names ", bytes));
  std::error_code ec;
  fs::create_directories(scratch_, ec);
  const fs::path local = scratch_ / kRowsObject;
  if (absl::Status got = store_->GetFile(Uri(kRowsObject), local); !got.ok()) return refuse(std::string(got.message()));
  absl::StatusOr<std::string> digest = Sha256FileHex(local);
  if (!digest.ok() || *digest != (*value)["sha256"].get<std::string>()) {
    fs::remove(local, ec);
    return refuse(str::Cat("the rows' SHA-256 is not the one kld.json names"));
  }
  kld_rows_file_ = local.string();
  return kld_rows_file_;
}

void SharedFloatBaseline::StoreKldRows(const std::string& file) {
  kld_rows_file_ = file;
  std::error_code ec;
  const auto bytes = fs::file_size(file, ec);
  absl::StatusOr<std::string> digest = Sha256FileHex(file);
  if (ec || !digest.ok()) {
    ++passes_;
    progress_.Log(str::Cat("float baseline: float KLD reference rows not stored: ", file, " unreadable"));
    return;
  }
  // The rows first, their description after: a reader that sees kld.json finds rows of that size and digest.
  if (absl::Status put = store_->PutFile(Uri(kRowsObject), file); !put.ok()) {
    ++passes_;
    progress_.Log(str::Cat("float baseline: float KLD reference rows not stored: ", put.message()));
    return;
  }
  Store("kld", Json{{"bytes", static_cast<int64_t>(bytes)}, {"sha256", *digest}}, "float KLD reference rows");
}

eval::FloatFigures SharedFloatBaseline::Figures() {
  eval::FloatFigures figures;
  figures.task = [this](const std::string& task) -> std::optional<Json> {
    if (auto known = tasks_.find(task); known != tasks_.end()) return known->second;
    if (!ShareableTaskName(task)) return std::nullopt;
    std::optional<Json> kept = Await("task-" + task, str::Cat("float scores of task ", task));
    if (kept) tasks_[task] = *kept;
    return kept;
  };
  figures.on_task = [this](const std::string& task, const Json& kept) {
    tasks_[task] = kept;
    if (!ShareableTaskName(task)) {
      ++passes_;
      return;
    }
    Store("task-" + task, kept, str::Cat("float scores of task ", task));
  };
  figures.kld_rows = [this] { return KldRows(); };
  figures.on_kld_rows = [this](const std::string& file) { StoreKldRows(file); };
  figures.on_notice = [this](const std::string& line) { progress_.Log(line); };
  return figures;
}

void SharedFloatBaseline::Finish() {
  if (!producer_) return;
  finished_ = true;
  WriteClaim(/*done=*/true);
}

}  // namespace quark::worker

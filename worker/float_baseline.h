// #36 item 1: one float evaluation for a whole sweep. Every child of a sweep (or of an automatic search) quantizes
// the same model and evaluates it on the same text, so the float model's figures — its perplexity (ppl_before), the
// KLD reference rows (its log-probabilities per scored token) and its task scores — are the same for all of them.
// The first child to claim them measures them before it quantizes and stores them in the job's object store, by
// content key, under <output_uri>/.quark-float-baselines/<key>/; the others read them instead of measuring again.
//
// Key = SHA-256 over the format version, the model's content digest (search::ModelDigest: config.json and every
// *.safetensors, as the sensitivity cache keys it), the evaluation text's SHA-256, spec.evaluation without its URI
// (windows, n_ctx, tasks, limits), the device, the compute dtype and the engine version.
//
// Another worker wrote what is read, so nothing read is trusted further than it can be checked: each JSON object is
// at most 1 MiB (checked with Head before it is read) and must name this key; the KLD rows must have the size and
// SHA-256 their JSON names (at most 64 GiB) and then the exact size the reader's own chunks need
// (eval::OpenKldReferenceRows). Object names are fixed; the key is hex computed here; task names outside
// [a-z0-9_] are not shared. A figure missing (its producer died or did not store it) or refused is measured by the
// child itself, which says so in its events: sharing never fails a job.
//
// Concurrency: the claim (claim.json: the producer's job id, refreshed after each stored figure) is written when
// absent and read back after a settling pause; the job whose id it holds produces. A reader waits for a figure while
// the claim is fresh and not done, at most max_wait; then it measures the figure itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "core/eval/model_evaluation.h"
#include "worker/job_runner.h"
#include "worker/quantize_pipeline.h"
#include "worker/storage/object_store.h"

namespace quark::worker {

struct FloatBaselineOptions {
  std::chrono::milliseconds poll{500};      // between two looks for a figure another job measures
  std::chrono::milliseconds settle{300};    // between writing the claim and reading it back
  std::chrono::seconds stale_after{1800};   // a claim not refreshed for this long belongs to a dead job
  std::chrono::seconds max_wait{3600};      // the longest one figure is waited for
};

/// The content key (64 hex digits) of `request`'s float figures. Errors of reading the model or the evaluation text.
absl::StatusOr<std::string> FloatBaselineKey(const PipelineRequest& request);

/// <output_uri>/.quark-float-baselines/<key>
std::string FloatBaselinePrefix(const std::string& output_uri, const std::string& key);

/// One job's view of the shared float figures. Not thread-safe (one pipeline run uses it).
class SharedFloatBaseline {
 public:
  /// Computes the key and claims the figures when no live job holds them. Errors: the key's (the job then measures
  /// everything itself); storage errors while claiming are logged, not returned (the job then produces).
  /// `cancelled` ends a wait at once (the job then stops at its next cancellation check).
  static absl::StatusOr<std::unique_ptr<SharedFloatBaseline>> Open(std::shared_ptr<storage::ObjectStore> store,
                                                                   const PipelineRequest& request,
                                                                   ProgressSink& progress,
                                                                   std::function<bool()> cancelled,
                                                                   FloatBaselineOptions options = {});
  /// A producer that did not Finish (its job failed) marks the claim done so that nobody waits for it.
  ~SharedFloatBaseline();
  SharedFloatBaseline(const SharedFloatBaseline&) = delete;
  SharedFloatBaseline& operator=(const SharedFloatBaseline&) = delete;

  /// Whether this job measures the figures for the others (it holds the claim).
  bool producer() const { return producer_; }
  const std::string& prefix() const { return prefix_; }

  /// The stored float perplexity (a reader waits for it), or nullopt: measure it here and StorePpl it.
  std::optional<double> Ppl();
  void StorePpl(double ppl);
  /// eval::FloatFigures bound to this object: task scores and the KLD reference rows, read or stored.
  eval::FloatFigures Figures();
  /// The producer has stored every figure: readers stop waiting for what is still missing.
  void Finish();

  /// Float passes this job ran and handed on (perplexity, KLD reference, each task), and figures it read.
  int passes() const { return passes_; }
  int read() const { return read_; }

 private:
  SharedFloatBaseline(std::shared_ptr<storage::ObjectStore> store, std::string prefix, std::string key,
                      std::string job_id, std::filesystem::path scratch, ProgressSink& progress,
                      std::function<bool()> cancelled, FloatBaselineOptions options);
  void Claim();
  // The stored figure `name` (its "value"): NOT_FOUND when absent, DATA_LOSS naming the URI when refused.
  absl::StatusOr<nlohmann::json> Fetch(const std::string& name);
  // Fetch, waiting while a live producer may still store it; nullopt (logged) when this job must measure it.
  std::optional<nlohmann::json> Await(const std::string& name, const std::string& what);
  // "" while another live job holds an unfinished claim; else why waiting is over.
  std::string WhyNotWaiting();
  void Store(const std::string& name, const nlohmann::json& value, const std::string& what);
  void WriteClaim(bool done);
  std::optional<std::string> KldRows();
  void StoreKldRows(const std::string& file);
  std::string Uri(const std::string& name) const;

  std::shared_ptr<storage::ObjectStore> store_;
  std::string prefix_;
  std::string key_;
  std::string job_id_;
  std::filesystem::path scratch_;
  ProgressSink& progress_;
  std::function<bool()> cancelled_;
  FloatBaselineOptions options_;
  bool producer_ = false;
  bool finished_ = false;
  int passes_ = 0;
  int read_ = 0;
  // What this job already has (read or measured), for its later questions: not fetched nor counted again.
  std::optional<double> ppl_;
  std::map<std::string, nlohmann::json> tasks_;
  std::string kld_rows_file_;
};

}  // namespace quark::worker

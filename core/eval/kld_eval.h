// KL divergence of a model against its reference (the float model) over a text, streamed layer by layer, with
// llama-perplexity --kl-divergence's chunking: ids = [BOS] + encode(text) cut into floor(n / n_ctx) chunks of n_ctx
// tokens, each chunk's first token replaced by BOS, and the tokens after the first n_ctx / 2 of each chunk scored
// (positions n_ctx/2 .. n_ctx - 2 predicting the next token). The reference runs first and its log-probs are
// written, one compact row per scored token (kld_stats.h), to a scratch file that is read back chunk by chunk while
// the model runs: memory stays one layer plus the activations plus one block of logits, whatever the text's length.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/kld_stats.h"
#include "core/runtime/layer_streamer.h"

namespace quark::eval {

struct KldOptions {
  /// Chunk length n_ctx; 0 = min(512, max_position_embeddings) (llama-perplexity's default context).
  int64_t n_ctx = 0;
  /// Score only the first N chunks (llama-perplexity --chunks); 0 = all.
  int64_t max_chunks = 0;
  /// BOS id put at the start of each chunk; -1 = the reference's config bos_token_id.
  int64_t bos_token_id = -1;
  /// Hidden-state memory per streamed pass (bytes); chunks beyond it go in further passes.
  int64_t activation_bytes_per_pass = int64_t{256} << 20;
  /// Positions whose logits are computed at once ([block, vocab] float32).
  int64_t logits_block = 64;
  /// Folder of the scratch file with the reference rows (removed when done); empty = the system temp folder.
  std::string scratch_dir;
  runtime::LayerHooks reference_hooks;
  runtime::LayerHooks model_hooks;
};

struct KldResult {
  KldSummary summary;
  int64_t n_ctx = 0;
  int64_t chunks = 0;
  int64_t input_tokens = 0;
  int64_t scratch_bytes = 0;  // size the reference rows took on disk
  double reference_seconds = 0;
  double model_seconds = 0;
  std::vector<float> kld_values;     // per scored token, in text order
  std::vector<float> p_diff_values;  // per scored token, in text order
};

/// The reference's half of the evaluation: its chunks and their rows in an unlinked scratch file (gone with the
/// object). Once WriteKldReference returns, the reference model may be closed before the model is opened, so that
/// the two never hold their mapped embeddings and vocabulary projections at once (the KLD pass's peak is then the
/// larger single model's, not both: docs/results/evaluation.md).
struct KldReference {
  struct FileCloser {
    void operator()(std::FILE* f) const;
  };
  std::unique_ptr<std::FILE, FileCloser> rows;
  std::vector<at::Tensor> chunks;  // [1, n_ctx] ids each
  int64_t vocab = 0;
  KldResult result;  // n_ctx, chunks, input_tokens, scratch_bytes, reference_seconds filled
};

/// The reference pass of EvaluateKld. Errors as EvaluateKld's (except the vocabulary check, made by ScoreKld).
absl::StatusOr<KldReference> WriteKldReference(runtime::LayerStreamer& reference, const std::vector<int64_t>& ids,
                                               const KldOptions& options = {});

/// Bytes of `reference`'s rows: chunks x scored positions (n_ctx/2 .. n_ctx-2) x KldRowWidth(vocab) x 2.
int64_t KldReferenceRowsBytes(const KldReference& reference);

/// Copies the reference's rows to `path` (a shared float baseline keeps them for other jobs: worker/float_baseline.h).
/// INTERNAL naming the path when it cannot be written whole.
absl::Status SaveKldReferenceRows(KldReference& reference, const std::string& path);

/// The reference WriteKldReference would give for `ids` and `options` on a model of `ref_config`, its rows read from
/// `path` (saved by SaveKldReferenceRows) instead of computed. INVALID_ARGUMENT naming the path when the file's size
/// is not what those chunks need (other settings, cut or padded); the rows' contents are the caller's to trust.
absl::StatusOr<KldReference> OpenKldReferenceRows(const std::string& path, const checkpoint::ModelConfig& ref_config,
                                                  const std::vector<int64_t>& ids, const KldOptions& options = {});

/// The model pass against `reference`'s rows (read from the start; consumed). InvalidArgument when the model's
/// vocabulary or max_position_embeddings does not fit the reference's chunks.
absl::StatusOr<KldResult> ScoreKld(runtime::LayerStreamer& model, KldReference& reference,
                                   const KldOptions& options = {});

/// `ids` with BOS first (the reference's tokenization). InvalidArgument: vocabularies differ, n_ctx below 4 or
/// above max_position_embeddings, or fewer than n_ctx tokens; streamer errors pass through; Internal when the
/// scratch file cannot be written or read.
absl::StatusOr<KldResult> EvaluateKld(runtime::LayerStreamer& reference, runtime::LayerStreamer& model,
                                      const std::vector<int64_t>& ids, const KldOptions& options = {});

}  // namespace quark::eval

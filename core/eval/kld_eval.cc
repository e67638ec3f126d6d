#include "core/eval/kld_eval.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "core/base/strings.h"
#include "core/eval/streamed_forward.h"

namespace quark::eval {
namespace {

using ScratchFile = std::unique_ptr<std::FILE, KldReference::FileCloser>;

// An anonymous scratch file: unlinked at once, so it goes away with the process whatever happens.
absl::StatusOr<ScratchFile> OpenScratch(const std::string& dir) {
  std::string pattern = (dir.empty() ? std::filesystem::temp_directory_path().string() : dir) + "/quark_kld_XXXXXX";
  const int fd = mkstemp(pattern.data());
  if (fd < 0) return absl::InternalError(StrCat("KLD scratch file: cannot create ", pattern));
  unlink(pattern.c_str());
  ScratchFile file(fdopen(fd, "w+b"));
  if (!file) {
    close(fd);
    return absl::InternalError(StrCat("KLD scratch file: cannot open ", pattern));
  }
  return file;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Calls on_row(position, logits row) for positions [first, last] of a chunk, `block` positions' logits at a time.
absl::Status ForEachScoredRow(runtime::LayerStreamer& streamer, const at::Tensor& hidden, int64_t first, int64_t last,
                              int64_t block, const std::function<absl::Status(int64_t, const float*)>& on_row) {
  for (int64_t j0 = first; j0 <= last; j0 += block) {
    const int64_t length = std::min(block, last - j0 + 1);
    auto logits = LogitsOf(streamer, hidden.narrow(1, j0, length));
    if (!logits.ok()) return logits.status();
    const int64_t vocab = logits->size(-1);
    const float* data = logits->data_ptr<float>();
    for (int64_t r = 0; r < length; ++r) {
      absl::Status status = on_row(j0 + r, data + r * vocab);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

void KldReference::FileCloser::operator()(std::FILE* f) const { std::fclose(f); }

namespace {

// The reference's chunks and figures for `ids` (no rows yet): what WriteKldReference and OpenKldReferenceRows share.
absl::StatusOr<KldReference> PlanKldReference(const checkpoint::ModelConfig& ref_config,
                                              const std::vector<int64_t>& ids, const KldOptions& options) {
  KldReference ref;
  ref.vocab = ref_config.vocab_size;
  KldResult& result = ref.result;
  const int64_t max_pos = ref_config.max_position_embeddings;
  result.n_ctx = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(512, max_pos);
  if (result.n_ctx < 4 || (max_pos > 0 && result.n_ctx > max_pos)) {
    return absl::InvalidArgumentError(StrCat("n_ctx: ", result.n_ctx, " must be in [4, max_position_embeddings = ",
                                             max_pos, "]"));
  }
  if (options.max_chunks < 0 || options.logits_block < 1) {
    return absl::InvalidArgumentError(StrCat("max_chunks = ", options.max_chunks, " must not be negative and ",
                                             "logits_block = ", options.logits_block, " must be positive"));
  }
  result.input_tokens = static_cast<int64_t>(ids.size());
  result.chunks = result.input_tokens / result.n_ctx;
  if (options.max_chunks > 0) result.chunks = std::min(result.chunks, options.max_chunks);
  if (result.chunks == 0) {
    return absl::InvalidArgumentError(StrCat("KLD needs at least n_ctx = ", result.n_ctx, " tokens, the text has ",
                                             ids.size()));
  }
  const int64_t bos = options.bos_token_id >= 0 ? options.bos_token_id : ref_config.bos_token_id;
  for (int64_t c = 0; c < result.chunks; ++c) {
    std::vector<int64_t> chunk(ids.begin() + c * result.n_ctx, ids.begin() + (c + 1) * result.n_ctx);
    chunk[0] = bos;
    ref.chunks.push_back(at::tensor(chunk, at::kLong).unsqueeze(0));
  }
  return ref;
}

}  // namespace

int64_t KldReferenceRowsBytes(const KldReference& reference) {
  const int64_t scored = reference.result.n_ctx - 1 - reference.result.n_ctx / 2;  // positions n_ctx/2 .. n_ctx-2
  return reference.result.chunks * scored * KldRowWidth(reference.vocab) * static_cast<int64_t>(sizeof(uint16_t));
}

absl::Status SaveKldReferenceRows(KldReference& reference, const std::string& path) {
  std::FILE* rows = reference.rows.get();
  if (rows == nullptr) return absl::FailedPreconditionError("KLD reference: no rows to save");
  std::unique_ptr<std::FILE, KldReference::FileCloser> out(std::fopen(path.c_str(), "wb"));
  if (!out) return absl::InternalError(StrCat("KLD reference rows: cannot create ", path));
  std::rewind(rows);
  std::vector<char> buffer(size_t{1} << 20);
  int64_t copied = 0;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), rows)) > 0; copied += static_cast<int64_t>(n)) {
    if (std::fwrite(buffer.data(), 1, n, out.get()) != n) {
      return absl::InternalError(StrCat("KLD reference rows: write of ", path, " failed (disk full?)"));
    }
  }
  if (std::fflush(out.get()) != 0 || copied != KldReferenceRowsBytes(reference)) {
    return absl::InternalError(StrCat("KLD reference rows: ", path, " holds ", copied, " bytes, the rows are ",
                                      KldReferenceRowsBytes(reference)));
  }
  return absl::OkStatus();
}

absl::StatusOr<KldReference> OpenKldReferenceRows(const std::string& path, const checkpoint::ModelConfig& ref_config,
                                                  const std::vector<int64_t>& ids, const KldOptions& options) {
  absl::StatusOr<KldReference> ref = PlanKldReference(ref_config, ids, options);
  if (!ref.ok()) return ref.status();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const int64_t expected = KldReferenceRowsBytes(*ref);
  if (ec || static_cast<int64_t>(size) != expected) {
    return absl::InvalidArgumentError(StrCat("KLD reference rows ", path, ": ",
                                             ec ? ec.message() : StrCat(size, " bytes"),
                                             "; ", ref->result.chunks, " chunks of n_ctx ", ref->result.n_ctx,
                                             " over a vocabulary of ", ref->vocab, " need ", expected));
  }
  ref->rows.reset(std::fopen(path.c_str(), "rb"));
  if (!ref->rows) return absl::InternalError(StrCat("KLD reference rows: cannot open ", path));
  ref->result.scratch_bytes = expected;
  return ref;
}

absl::StatusOr<KldReference> WriteKldReference(runtime::LayerStreamer& reference, const std::vector<int64_t>& ids,
                                               const KldOptions& options) {
  absl::StatusOr<KldReference> planned = PlanKldReference(reference.config(), ids, options);
  if (!planned.ok()) return planned.status();
  KldReference ref = *std::move(planned);
  KldResult& result = ref.result;
  const int64_t first = result.n_ctx / 2;
  const int64_t last = result.n_ctx - 2;
  std::vector<uint16_t> row(static_cast<size_t>(KldRowWidth(ref.vocab)));
  auto scratch = OpenScratch(options.scratch_dir);
  if (!scratch.ok()) return scratch.status();
  ref.rows = *std::move(scratch);
  std::FILE* file = ref.rows.get();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = ForEachHidden(
      reference, ref.chunks, options.reference_hooks, options.activation_bytes_per_pass,
      [&](size_t c, const at::Tensor& hidden) {
        const int64_t* tokens = ref.chunks[c].data_ptr<int64_t>();
        return ForEachScoredRow(reference, hidden, first, last, options.logits_block,
                                [&](int64_t j, const float* logits) {
                                  EncodeReferenceRowRef(logits, ref.vocab, tokens[j + 1], row.data());
                                  if (std::fwrite(row.data(), sizeof(uint16_t), row.size(), file) != row.size()) {
                                    return absl::InternalError("KLD scratch file: write failed (disk full?)");
                                  }
                                  return absl::OkStatus();
                                });
      });
  if (!status.ok()) return status;
  result.reference_seconds = SecondsSince(start);
  result.scratch_bytes = static_cast<int64_t>(std::ftell(file));
  return ref;
}

absl::StatusOr<KldResult> ScoreKld(runtime::LayerStreamer& model, KldReference& reference,
                                   const KldOptions& options) {
  KldResult result = reference.result;
  const int64_t vocab = reference.vocab;
  if (model.config().vocab_size != vocab) {
    return absl::InvalidArgumentError(StrCat("--reference: vocabulary of ", vocab, " tokens, the model's is ",
                                             model.config().vocab_size));
  }
  const int64_t max_pos = model.config().max_position_embeddings;
  if (max_pos > 0 && result.n_ctx > max_pos) {
    return absl::InvalidArgumentError(StrCat("n_ctx: ", result.n_ctx, " must be in [4, max_position_embeddings = ",
                                             max_pos, "]"));
  }
  const int64_t first = result.n_ctx / 2;
  const int64_t last = result.n_ctx - 2;
  std::vector<uint16_t> row(static_cast<size_t>(KldRowWidth(vocab)));
  std::FILE* file = reference.rows.get();
  std::rewind(file);
  KldSums sums;
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = ForEachHidden(
      model, reference.chunks, options.model_hooks, options.activation_bytes_per_pass,
      [&](size_t c, const at::Tensor& hidden) {
        const int64_t* tokens = reference.chunks[c].data_ptr<int64_t>();
        return ForEachScoredRow(model, hidden, first, last, options.logits_block, [&](int64_t j, const float* logits) {
          if (std::fread(row.data(), sizeof(uint16_t), row.size(), file) != row.size()) {
            return absl::InternalError("KLD scratch file: read failed");
          }
          const KldToken t = ScoreTokenRef(logits, vocab, row.data(), tokens[j + 1], sums);
          result.kld_values.push_back(static_cast<float>(t.kld));
          result.p_diff_values.push_back(t.p_diff);
          return absl::OkStatus();
        });
      });
  if (!status.ok()) return status;
  result.model_seconds = SecondsSince(start);
  result.summary = SummarizeKld(sums, result.kld_values, result.p_diff_values);
  return result;
}

absl::StatusOr<KldResult> EvaluateKld(runtime::LayerStreamer& reference, runtime::LayerStreamer& model,
                                      const std::vector<int64_t>& ids, const KldOptions& options) {
  if (model.config().vocab_size != reference.config().vocab_size) {
    return absl::InvalidArgumentError(StrCat("--reference: vocabulary of ", reference.config().vocab_size,
                                             " tokens, the model's is ", model.config().vocab_size));
  }
  // The smaller context of the two bounds n_ctx, as before the split.
  KldOptions bounded = options;
  const int64_t max_pos = std::min(reference.config().max_position_embeddings, model.config().max_position_embeddings);
  if (bounded.n_ctx == 0) bounded.n_ctx = std::min<int64_t>(512, max_pos);
  auto ref = WriteKldReference(reference, ids, bounded);
  if (!ref.ok()) return ref.status();
  return ScoreKld(model, *ref, bounded);
}

}  // namespace quark::eval

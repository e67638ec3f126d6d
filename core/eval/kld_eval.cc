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

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using ScratchFile = std::unique_ptr<std::FILE, FileCloser>;

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

absl::StatusOr<KldResult> EvaluateKld(runtime::LayerStreamer& reference, runtime::LayerStreamer& model,
                                      const std::vector<int64_t>& ids, const KldOptions& options) {
  const auto& ref_config = reference.config();
  const int64_t vocab = ref_config.vocab_size;
  if (model.config().vocab_size != vocab) {
    return absl::InvalidArgumentError(StrCat("--reference: vocabulary of ", vocab, " tokens, the model's is ",
                                             model.config().vocab_size));
  }
  const int64_t max_pos = std::min(ref_config.max_position_embeddings, model.config().max_position_embeddings);
  KldResult result;
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
  std::vector<at::Tensor> chunks;
  for (int64_t c = 0; c < result.chunks; ++c) {
    std::vector<int64_t> chunk(ids.begin() + c * result.n_ctx, ids.begin() + (c + 1) * result.n_ctx);
    chunk[0] = bos;
    chunks.push_back(at::tensor(chunk, at::kLong).unsqueeze(0));
  }
  const int64_t first = result.n_ctx / 2;
  const int64_t last = result.n_ctx - 2;
  const int64_t width = KldRowWidth(vocab);
  std::vector<uint16_t> row(static_cast<size_t>(width));
  auto scratch = OpenScratch(options.scratch_dir);
  if (!scratch.ok()) return scratch.status();
  std::FILE* file = scratch->get();

  auto start = std::chrono::steady_clock::now();
  absl::Status status = ForEachHidden(
      reference, chunks, options.reference_hooks, options.activation_bytes_per_pass,
      [&](size_t c, const at::Tensor& hidden) {
        const int64_t* tokens = chunks[c].data_ptr<int64_t>();
        return ForEachScoredRow(reference, hidden, first, last, options.logits_block,
                                [&](int64_t j, const float* logits) {
                                  EncodeReferenceRowRef(logits, vocab, tokens[j + 1], row.data());
                                  if (std::fwrite(row.data(), sizeof(uint16_t), row.size(), file) != row.size()) {
                                    return absl::InternalError("KLD scratch file: write failed (disk full?)");
                                  }
                                  return absl::OkStatus();
                                });
      });
  if (!status.ok()) return status;
  result.reference_seconds = SecondsSince(start);
  result.scratch_bytes = static_cast<int64_t>(std::ftell(file));
  std::rewind(file);

  KldSums sums;
  start = std::chrono::steady_clock::now();
  status = ForEachHidden(
      model, chunks, options.model_hooks, options.activation_bytes_per_pass, [&](size_t c, const at::Tensor& hidden) {
        const int64_t* tokens = chunks[c].data_ptr<int64_t>();
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

}  // namespace quark::eval

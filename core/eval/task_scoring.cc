#include "core/eval/task_scoring.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/base/strings.h"
#include "core/eval/generation_task.h"
#include "core/eval/streamed_forward.h"

namespace quark::eval {
namespace {

// First index of the maximum, as numpy's argmax.
int64_t ArgMax(const std::vector<double>& values) {
  return std::max_element(values.begin(), values.end()) - values.begin();
}

}  // namespace

MetricValue MeanWithStderr(const std::vector<double>& values) {
  MetricValue m;
  if (values.empty()) return m;
  const double n = static_cast<double>(values.size());
  double sum = 0;
  for (double v : values) sum += v;
  m.value = sum / n;
  if (values.size() < 2) return m;
  double ss = 0;
  for (double v : values) ss += (v - m.value) * (v - m.value);
  m.stderr_value = std::sqrt(ss / (n - 1)) / std::sqrt(n);
  return m;
}

int64_t Utf8Length(const std::string& text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

absl::Status EncodeRequest(const runtime::Tokenizer& tokenizer, const TaskRequest& request,
                           std::vector<int64_t>& context_tokens, std::vector<int64_t>& continuation_tokens) {
  std::string context = request.context;
  std::string continuation = request.continuation;
  const size_t kept = context.find_last_not_of(" \t\n\r\f\v");
  const size_t cut = kept == std::string::npos ? 0 : kept + 1;
  continuation = context.substr(cut) + continuation;
  context.resize(cut);
  auto whole = tokenizer.EncodeWithBos(context + continuation);
  if (!whole.ok()) return whole.status();
  auto ctx = tokenizer.EncodeWithBos(context);
  if (!ctx.ok()) return ctx.status();
  if (whole->size() <= ctx->size()) {
    return absl::InvalidArgumentError(StrCat("continuation \"", request.continuation, "\" encodes to no tokens"));
  }
  context_tokens = *ctx;
  continuation_tokens.assign(whole->begin() + static_cast<std::ptrdiff_t>(ctx->size()), whole->end());
  return absl::OkStatus();
}

absl::StatusOr<TaskResult> ScoreTask(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                     runtime::LayerStreamer& streamer, const runtime::Tokenizer& tokenizer,
                                     const TaskScoreOptions& options) {
  if (task.generate) return ScoreGenerationTask(task, docs, streamer, tokenizer, options);
  const auto start = std::chrono::steady_clock::now();
  TaskResult result;
  result.task = task.name;
  const int64_t max_pos = streamer.config().max_position_embeddings;
  result.max_length = options.max_length > 0 ? options.max_length : (max_pos > 0 ? max_pos : 2048);
  // Requests whose inputs are the same tokens (mmlu's four one-token answers after one context) run once.
  std::vector<at::Tensor> samples;
  std::map<std::vector<int64_t>, size_t> sample_of;
  std::vector<std::vector<std::pair<size_t, size_t>>> owners;  // per sample: its (example, request)s
  result.examples.resize(docs.size());
  for (size_t d = 0; d < docs.size(); ++d) {
    result.examples[d].id = docs[d].id;
    result.examples[d].gold = docs[d].gold;
    result.examples[d].requests.resize(docs[d].requests.size());
    for (size_t r = 0; r < docs[d].requests.size(); ++r) {
      std::vector<int64_t> ctx, cont;
      absl::Status status = EncodeRequest(tokenizer, docs[d].requests[r], ctx, cont);
      if (!status.ok()) return absl::InvalidArgumentError(StrCat(docs[d].id, ": ", std::string(status.message())));
      RequestScore& score = result.examples[d].requests[r];
      std::vector<int64_t> all = ctx;
      all.insert(all.end(), cont.begin(), cont.end());
      const int64_t keep = std::min<int64_t>(static_cast<int64_t>(all.size()), result.max_length + 1);
      score.truncated = keep < static_cast<int64_t>(all.size());
      result.truncated += score.truncated;
      std::vector<int64_t> input(all.end() - keep, all.end() - 1);
      if (static_cast<int64_t>(cont.size()) > static_cast<int64_t>(input.size())) {
        return absl::InvalidArgumentError(StrCat(docs[d].id, ": the continuation's ", cont.size(),
                                                 " tokens do not fit max_length ", result.max_length));
      }
      score.continuation_tokens = std::move(cont);
      const auto [it, inserted] = sample_of.emplace(input, samples.size());
      if (inserted) {
        samples.push_back(at::tensor(input, at::kLong).unsqueeze(0));
        owners.emplace_back();
      }
      owners[it->second].emplace_back(d, r);
    }
  }
  absl::Status status = ForEachHidden(
      streamer, samples, options.hooks, options.activation_bytes_per_pass,
      [&](size_t i, const at::Tensor& hidden) -> absl::Status {
        for (const auto& [d, r] : owners[i]) {
          RequestScore& score = result.examples[d].requests[r];
          const int64_t n = static_cast<int64_t>(score.continuation_tokens.size());
          auto logits = LogitsOf(streamer, hidden.narrow(1, hidden.size(1) - n, n));
          if (!logits.ok()) return logits.status();
          const at::Tensor log_probs = logits->to(at::kDouble).log_softmax(-1)[0];
          const at::Tensor greedy = log_probs.argmax(-1);
          score.is_greedy = true;
          for (int64_t t = 0; t < n; ++t) {
            const int64_t token = score.continuation_tokens[static_cast<size_t>(t)];
            score.token_logprobs.push_back(log_probs[t][token].item<double>());
            score.loglikelihood += score.token_logprobs.back();
            score.is_greedy = score.is_greedy && greedy[t].item<int64_t>() == token;
          }
        }
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  result.metrics = AggregateTask(task, docs, result.examples);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::map<std::string, MetricValue> AggregateTask(const TaskInfo& task, const std::vector<TaskDoc>& docs,
                                                 std::vector<ExampleScore>& examples) {
  std::map<std::string, MetricValue> metrics;
  std::vector<double> acc, acc_norm, lls;
  for (size_t d = 0; d < examples.size(); ++d) {
    ExampleScore& e = examples[d];
    if (!task.multiple_choice) {
      acc.push_back(e.requests[0].is_greedy ? 1.0 : 0.0);
      lls.push_back(e.requests[0].loglikelihood);
      continue;
    }
    std::vector<double> ll, normalized;
    for (size_t c = 0; c < e.requests.size(); ++c) {
      ll.push_back(e.requests[c].loglikelihood);
      normalized.push_back(ll.back() / static_cast<double>(Utf8Length(docs[d].choices[c])));
    }
    e.pred = ArgMax(ll);
    e.pred_norm = ArgMax(normalized);
    acc.push_back(e.pred == e.gold ? 1.0 : 0.0);
    acc_norm.push_back(e.pred_norm == e.gold ? 1.0 : 0.0);
  }
  metrics["acc"] = MeanWithStderr(acc);
  if (task.acc_norm) metrics["acc_norm"] = MeanWithStderr(acc_norm);
  if (!task.multiple_choice) {
    const MetricValue mean_ll = MeanWithStderr(lls);
    metrics["perplexity"] = {std::exp(-mean_ll.value), 0.0, false};
  }
  return metrics;
}

}  // namespace quark::eval

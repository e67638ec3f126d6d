#include "core/eval/task_work.h"

#include <algorithm>
#include <set>

#include "core/base/strings.h"
#include "core/eval/task_scoring.h"

namespace quark::eval {

absl::StatusOr<estimate::TaskWork> CountTaskWork(const std::vector<TaskDoc>& docs, const runtime::Tokenizer& tokenizer,
                                                 const TaskWorkOptions& options) {
  estimate::TaskWork work;
  std::set<std::vector<int64_t>> inputs;
  std::vector<int64_t> lengths;  // of the distinct inputs, in the scorer's order
  for (const TaskDoc& doc : docs) {
    for (const TaskRequest& request : doc.requests) {
      std::vector<int64_t> ctx, cont;
      absl::Status status = EncodeRequest(tokenizer, request, ctx, cont);
      if (!status.ok()) return absl::InvalidArgumentError(StrCat(doc.id, ": ", std::string(status.message())));
      std::vector<int64_t> all = ctx;
      all.insert(all.end(), cont.begin(), cont.end());
      const int64_t keep = std::min<int64_t>(static_cast<int64_t>(all.size()), options.max_length + 1);
      std::vector<int64_t> input(all.end() - keep, all.end() - 1);
      ++work.requests;
      work.scored_positions += static_cast<int64_t>(cont.size());
      const int64_t length = static_cast<int64_t>(input.size());
      if (inputs.insert(std::move(input)).second) lengths.push_back(length);
    }
  }
  // ForEachHidden: a pass takes samples while their tokens fit the budget, and always at least one.
  const int64_t budget = std::max<int64_t>(
      1, options.activation_bytes_per_pass / std::max<int64_t>(1, options.hidden_bytes_per_token));
  int64_t in_pass = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (i == 0 || in_pass + lengths[i] > budget) {
      ++work.passes;
      in_pass = 0;
    }
    in_pass += lengths[i];
    ++work.samples;
    work.input_tokens += lengths[i];
    work.attended_pairs += lengths[i] * lengths[i];
  }
  return work;
}

}  // namespace quark::eval

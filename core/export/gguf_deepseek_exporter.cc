#include "core/export/gguf_deepseek_exporter.h"

#include <set>

#include "core/base/status_macros.h"
#include "core/base/strings.h"
#include "core/checkpoint/deepseek_config.h"
#include "core/checkpoint/model_config.h"
#include "core/export/gguf_deepseek.h"
#include "core/export/gguf_vocab.h"
#include "core/export/gguf_whole_file.h"

namespace quark::exporter {

absl::StatusOr<std::unique_ptr<ModelExporter>> CreateDeepseekGgufExporter(const std::string& model_dir,
                                                                          const std::string& output_file,
                                                                          const LayerPlan& plan,
                                                                          const GgufExportOptions& options) {
  QUARK_ASSIGN_OR_RETURN(gguf::WholeFileModel in, gguf::OpenWholeFileModel(model_dir, options));
  if (!in.model.deepseek) return absl::InternalError(StrCat(model_dir, ": not a deepseek_v3 model"));
  QUARK_RETURN_IF_ERROR(gguf::CheckDeepseekGguf(*in.model.deepseek));
  // deepseek2 has no MXFP4 experts here: every quantized linear is written as its dequantized values in `type`.
  return gguf::CreateWholeFileGgufExporter(
      output_file, plan,
      [config = *in.model.deepseek, vocab = std::move(in.vocab), type = in.type](const runtime::WeightSource& weights,
                                                                  const std::set<std::string>&, const std::string& path) {
        return gguf::WriteDeepseekGguf(config, weights, vocab, type, path);
      });
}

}  // namespace quark::exporter

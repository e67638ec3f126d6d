// quark tokenize --tokenizer DIR|FILE --text FILE [--special] [--decode] [--json]: the token ids of a text as the
// engine's tokenizer gives them (tokenizer.model or tokenizer.json, see core/runtime/tokenizer.h), one line of
// space-separated ids; the Node cross-check compares them with the Hugging Face reference.
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/cli/command_registry.h"
#include "core/runtime/tokenizer.h"

namespace quark::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string text;
  bool special = false;
  bool decode = false;
  bool json = false;
};

int RunTokenize(const TokenizeArgs& args) {
  auto tokenizer = runtime::Tokenizer::Open(args.tokenizer);
  if (!tokenizer.ok()) {
    std::cerr << "quark tokenize: --tokenizer: " << tokenizer.status().message() << "\n";
    return tokenizer.status().code() == absl::StatusCode::kUnimplemented ? kExitFailure : kExitBadInput;
  }
  auto text = runtime::ReadTextFile(args.text);
  if (!text.ok()) {
    std::cerr << "quark tokenize: --text: " << text.status().message() << "\n";
    return kExitBadInput;
  }
  auto ids = args.special ? (*tokenizer)->EncodeWithBos(*text) : (*tokenizer)->Encode(*text);
  if (!ids.ok()) {
    std::cerr << "quark tokenize: --text " << args.text << ": " << ids.status().message() << "\n";
    return kExitBadInput;
  }
  if (args.json) {
    nlohmann::json out = {{"ids", *ids}, {"vocab_size", (*tokenizer)->vocab_size()},
                          {"bos_id", (*tokenizer)->bos_id()}, {"eos_id", (*tokenizer)->eos_id()}};
    if (args.decode) out["decoded"] = (*tokenizer)->Decode(*ids);
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  if (args.decode) {
    std::cout << (*tokenizer)->Decode(*ids);
    return kExitOk;
  }
  std::string line;
  line.reserve(ids->size() * 6);
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i > 0) line.push_back(' ');
    line += std::to_string((*ids)[i]);
  }
  std::cout << line << "\n";
  return kExitOk;
}

const CommandRegistration kTokenize([](CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  auto* command = app.add_subcommand("tokenize", "print the token ids of a text file");
  command->add_option("--tokenizer", args->tokenizer, "model folder, tokenizer.model or tokenizer.json")->required();
  command->add_option("--text", args->text, "UTF-8 text file to encode")->required();
  command->add_flag("--special", args->special, "add the tokenizer's special tokens (BOS / post-processor)");
  command->add_flag("--decode", args->decode, "print the decoded text of the ids instead of the ids");
  command->add_flag("--json", args->json, "one JSON object: ids, vocab_size, bos_id, eos_id (and decoded)");
  command->callback([args] { SetExitCode(RunTokenize(*args)); });
});

}  // namespace
}  // namespace quark::cli

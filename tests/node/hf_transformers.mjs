// Hugging Face's reference tokenizers for the node tests: npm @huggingface/transformers from tests/peers, offline
// (local files only).
import path from 'node:path';
import {createRequire} from 'node:module';

/// The transformers module of `sourceDir`/tests/peers, set to read local files only; null when it is not installed
/// (the caller reports the missing peer).
export async function loadTransformers(sourceDir) {
  const require = createRequire(path.join(sourceDir, 'tests/peers/package.json'));
  let entry;
  try {
    entry = require.resolve('@huggingface/transformers');
  } catch {
    return null;
  }
  const transformers = await import(entry);
  transformers.env.allowRemoteModels = false;
  transformers.env.allowLocalModels = true;
  return transformers;
}

/// HF's AutoTokenizer of the folder `dir` (tokenizer.json, tokenizer_config.json).
export async function referenceTokenizer(transformers, dir) {
  transformers.env.localModelPath = path.dirname(dir) + path.sep;
  return transformers.AutoTokenizer.from_pretrained(path.basename(dir), {local_files_only: true});
}

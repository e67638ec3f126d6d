// #32: GGUF exports of models whose tokenizer is a Hugging Face tokenizer.json byte-level BPE (core/export/
// gguf_bpe_vocab.h), checked by both real peers: Hugging Face's tokenizer (npm @huggingface/transformers, offline)
// and llama.cpp (node-llama-cpp 3.22.1's prebuilt).
//
// The tokenizers are GPT-2's real vocabulary cut to its 256 byte tokens and first 240 merges (ids 0..495), with added
// tokens on 496.. and the rest of the model's 512 ids left to the exporter's "[PAD<i>]" padding, behind three families'
// pre-tokenizers: Llama 3's (split regex, BOS added by TemplateProcessing), gpt-oss's o200k (no BOS) and Llama 4's
// (o200k with a BOS). Each is put beside a tiny model of that family (`quark make-model --arch llama`; moe_gguf_tool's
// gpt-oss and llama4), exported by the pipeline (`quark quantize --export gguf`), and llama.cpp loads the file. Checked:
//   - llama.cpp's token ids of ASCII, whitespace, digit, contraction and Unicode strings and a TinyStories paragraph
//     equal HF's encode without special tokens; strings holding the added tokens equal HF's with llama.cpp parsing
//     special tokens; llama.cpp's BOS / EOS / add-BOS equal HF's and the tokenizer_config.json's;
//   - the GGUF's tokenizer.ggml.pre is the family's llama.cpp name (llama-bpe, gpt-4o, llama4);
//   - the logits path runs on those ids: llama.cpp's mean NLL of the F32 Llama file equals `quark eval` of the HF
//     folder within 1e-4; the gpt-oss and Llama 4 files (MXFP4 experts) with `quark eval` of the GGUF itself (5e-3);
//   - `quark eval --model model.gguf --text` tokenizes with the tokenizer.json the export copies beside the file:
//     its figure and token count are those of HF's ids of the same text.
//
// Usage: node gguf_bpe_vocab_consumer_test.mjs  (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR).
// Exit 0 = pass, 1 = fail, 77 = skipped (peers not installed; a failure under CI=true).
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {loadTransformers, referenceTokenizer} from './hf_transformers.mjs';
import {llamaCppEnv} from './llama_cpp_env.mjs';
import {llamaCppMeanNll} from './llama_cpp_nll.mjs';
import {peerMissing} from './peer_missing.cjs';

const {sourceDir, sharedDir, llama, binaries: [quark, moeTool]} =
  await llamaCppEnv(['core/cli/quark', 'tests/export/moe_gguf_tool']);

const kMerges = 240;    // GPT-2's first merges kept: ids 256..495
const kSeqLen = 64;
const kWindows = 2;
const kFloatBound = 1e-4;
const kBound = 5e-3;

const LLAMA3_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const O200K_SPLIT = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Each family's tokenizer: GPT-2's cut vocabulary, the family's pre-tokenizer, its added tokens from id 496.
const added = (id, content, special) =>
  ({id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special});
const families = {
  llama: {
    pre: 'llama-bpe',
    split: LLAMA3_SPLIT,
    ignoreMerges: true,
    added: [added(496, '<|begin_of_text|>', true), added(497, '<|end_of_text|>', true), added(498, '<|eot_id|>', true),
      added(499, '<|reserved_special_token_0|>', false), added(500, 'quarkd', false)],
    bos: '<|begin_of_text|>', eos: '<|end_of_text|>', addBos: true,
    specialText: '<|begin_of_text|>Once upon a time<|eot_id|> quarkd said<|reserved_special_token_0|>hi<|end_of_text|>',
  },
  gpt_oss: {
    pre: 'gpt-4o',
    split: O200K_SPLIT,
    ignoreMerges: false,
    added: [added(496, '<|startoftext|>', true), added(497, '<|endoftext|>', true), added(498, '<|return|>', true),
      added(499, '<|start|>', true), added(500, '<|message|>', true), added(501, 'quarkd', false)],
    bos: '<|startoftext|>', eos: '<|return|>', addBos: false,
    specialText: '<|start|>user<|message|>What is 2+2? quarkd knows.<|return|>',
  },
  llama4: {  // Llama 4's o200k-style splitter with Llama's BOS: llama.cpp's name for that family is "llama4"
    pre: 'llama4',
    split: O200K_SPLIT,
    ignoreMerges: false,
    added: [added(496, '<|begin_of_text|>', true), added(497, '<|end_of_text|>', true), added(498, '<|eot|>', true),
      added(499, '<|header_start|>', true), added(500, '<|header_end|>', true), added(501, 'quarkd', false)],
    bos: '<|begin_of_text|>', eos: '<|eot|>', addBos: true,
    specialText: '<|begin_of_text|><|header_start|>user<|header_end|>\n\nquarkd? Yes.<|eot|>',
  },
};

function writeTokenizer(dir, family) {
  const gpt2 = JSON.parse(fs.readFileSync(path.join(sourceDir, 'tests/fixtures/tokenizers/gpt2/tokenizer.json'), 'utf8'));
  const vocab = {};
  for (const [token, id] of Object.entries(gpt2.model.vocab)) if (id < 256 + kMerges) vocab[token] = id;
  const merges = gpt2.model.merges.slice(0, kMerges);
  for (const merge of merges) {  // GPT-2's merge k makes token 256 + k: the cut keeps every merge's parts
    const [a, b] = typeof merge === 'string' ? merge.split(' ') : merge;
    if (!(a in vocab) || !(b in vocab) || !((a + b) in vocab)) throw new Error(`merge ${merge} leaves the cut vocab`);
  }
  const byteLevel = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false};
  const bosId = family.added.find((t) => t.content === family.bos).id;
  const tokenizer = {
    version: '1.0', truncation: null, padding: null, added_tokens: family.added, normalizer: null,
    pre_tokenizer: {type: 'Sequence', pretokenizers: [
      {type: 'Split', pattern: {Regex: family.split}, behavior: 'Isolated', invert: false}, byteLevel]},
    post_processor: family.addBos ? {type: 'Sequence', processors: [
      {...byteLevel, trim_offsets: false},
      {type: 'TemplateProcessing',
        single: [{SpecialToken: {id: family.bos, type_id: 0}}, {Sequence: {id: 'A', type_id: 0}}],
        pair: [{SpecialToken: {id: family.bos, type_id: 0}}, {Sequence: {id: 'A', type_id: 0}},
          {SpecialToken: {id: family.bos, type_id: 1}}, {Sequence: {id: 'B', type_id: 1}}],
        special_tokens: {[family.bos]: {id: family.bos, ids: [bosId], tokens: [family.bos]}}}]}
      : {...byteLevel, trim_offsets: false},
    decoder: {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true},
    model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: family.ignoreMerges, vocab, merges},
  };
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizer));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify({
    bos_token: family.bos, eos_token: family.eos, clean_up_tokenization_spaces: false,
    model_max_length: 4096, tokenizer_class: 'PreTrainedTokenizerFast',
    chat_template: "{% for m in messages %}{{ m['content'] }}{% endfor %}"}));
  fs.rmSync(path.join(dir, 'tokenizer.model'), {force: true});
}

const story = fs.readFileSync(path.join(sharedDir, 'fixtures/eval/tinystories_validation_prefix.txt'), 'utf8');
const plainTexts = [
  'Hello world',
  'The quick brown fox jumps over the lazy dog.',
  '  two  spaces,\ttabs\tand\n\nnew lines\r\n  ',
  'digits 1 12 123 1234 1234567 3.14159 -42 2026-11-30',
  "I've been told he'll say they're here, 'RE you sure? We'Ve a'lL",
  "McDonald's iPhone HTTPServer camelCaseWord it's DON'T",
  'café naïve résumé — 日本語のテキスト 🦙🚀 Привет мир ½ ٣',
  story.slice(0, 600),
];

const transformers = await loadTransformers(sourceDir);
if (!transformers) peerMissing('@huggingface/transformers is not installed: run scripts/install-test-peers.sh');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_gguf_bpe_'));
let failures = 0;
let checked = 0;
const fail = (message) => {
  console.error(`FAIL: ${message}`);
  ++failures;
};
const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

function quarkEval(model, input, flag = '--token-ids') {
  const out = execFileSync(quark, ['eval', '--model', model, flag, input, '--seq-len', String(kSeqLen),
    '--max-windows', String(kWindows), '--json'], {encoding: 'utf8'});
  return JSON.parse(out.trim().split('\n').pop());
}

try {
  for (const [arch, family] of Object.entries(families)) {
    const hf = path.join(work, arch, 'hf');
    if (arch === 'llama') {
      execFileSync(quark, ['make-model', '--arch', 'llama', '--shape', 'tiny', '--dtype', 'f32', '--seed', '5',
        '--out', hf], {encoding: 'utf8'});
    } else {
      execFileSync(moeTool, [path.join(work, arch), sharedDir, '--arch', arch, '--seq-len', String(kSeqLen),
        '--windows', '1'], {encoding: 'utf8'});
    }
    writeTokenizer(hf, family);
    const reference = await referenceTokenizer(transformers, hf);

    const out = path.join(work, arch, 'gguf');
    const quantize = arch === 'llama'
      ? ['--scheme', 'uint4_wo_32', '--exclude', '*', '--gguf-type', 'F32']   // every linear left float: an F32 file
      : ['--scheme', 'mxfp4_weight_only', '--num-calib-samples', '2', '--seq-len', String(kSeqLen)];
    execFileSync(quark, ['quantize', '--model', hf, ...quantize, '--export', 'gguf', '--output', out],
      {encoding: 'utf8'});
    const file = path.join(out, 'model.gguf');
    const model = await llama.loadModel({modelPath: file, gpuLayers: 0});

    const pre = model.fileInfo.metadata.tokenizer.ggml.pre;
    if (pre !== family.pre) fail(`${arch}: tokenizer.ggml.pre "${pre}", expected "${family.pre}"`);
    const bos = reference.convert_tokens_to_ids(family.bos), eos = reference.convert_tokens_to_ids(family.eos);
    if (model.tokens.bos !== bos) fail(`${arch}: llama.cpp's BOS ${model.tokens.bos}, HF's ${bos}`);
    if (model.tokens.eos !== eos) fail(`${arch}: llama.cpp's EOS ${model.tokens.eos}, HF's ${eos}`);
    if (model.tokens.shouldPrependBosToken !== family.addBos) {
      fail(`${arch}: llama.cpp adds BOS: ${model.tokens.shouldPrependBosToken}, HF: ${family.addBos}`);
    }
    const hfWithSpecial = Array.from(reference.encode('Hi'));
    if ((hfWithSpecial[0] === bos) !== family.addBos) fail(`${arch}: HF's encode does not match addBos`);

    const cases = [...plainTexts.map((text) => ({text, special: false})), {text: family.specialText, special: true}];
    for (const {text, special} of cases) {
      const theirs = Array.from(model.tokenize(text, special));
      const hfIds = Array.from(reference.encode(text, {add_special_tokens: false}));
      ++checked;
      console.log(JSON.stringify({arch, text: text.slice(0, 40), special, tokens: hfIds.length, equal: same(theirs, hfIds)}));
      if (!same(theirs, hfIds)) {
        fail(`${arch}: ${JSON.stringify(text.slice(0, 60))}: llama.cpp ${JSON.stringify(theirs.slice(0, 24))} vs HF ` +
          `${JSON.stringify(hfIds.slice(0, 24))}`);
      }
    }
    if (!Array.from(reference.encode(family.specialText, {add_special_tokens: false})).includes(
      reference.convert_tokens_to_ids('quarkd'))) {
      fail(`${arch}: the user-defined token is not in HF's ids of the special text`);
    }

    // The logits path on HF's ids of the story (with BOS where the family adds it).
    const ids = Array.from(reference.encode(story)).slice(0, kSeqLen * kWindows);
    const idsFile = path.join(work, arch, 'ids.txt');
    fs.writeFileSync(idsFile, ids.join(' ') + '\n');
    const theirs = await llamaCppMeanNll(model, ids, kSeqLen, kWindows);
    await model.dispose();
    const ours = quarkEval(arch === 'llama' ? hf : file, idsFile);
    const bound = arch === 'llama' ? kFloatBound : kBound;
    const row = {arch, file: path.basename(file), bytes: fs.statSync(file).size, tokens: ids.length,
      llama_cpp_mean_nll: theirs, quark_mean_nll: ours.mean_nll, diff: Math.abs(theirs - ours.mean_nll), bound};
    console.log(JSON.stringify(row));
    if (!(row.diff <= bound)) fail(`${arch}: llama.cpp NLL ${theirs} vs quark eval ${ours.mean_nll}`);
    // `quark eval --model model.gguf --text` encodes with the tokenizer.json the export put beside the file (checked
    // against the GGUF's vocabulary): the figure of HF's ids of the same text.
    const storyFile = path.join(work, arch, 'story.txt'), storyIds = path.join(work, arch, 'story_ids.txt');
    fs.writeFileSync(storyFile, story.slice(0, 1500));
    fs.writeFileSync(storyIds, Array.from(reference.encode(story.slice(0, 1500))).join(' ') + '\n');
    const [viaText, viaIds] = [['--text', storyFile], ['--token-ids', storyIds]].map(([f, v]) => quarkEval(file, v, f));
    console.log(JSON.stringify({arch, text_eval: viaText.mean_nll, ids_eval: viaIds.mean_nll, tokens: viaText.tokens}));
    if (viaText.tokens !== viaIds.tokens || !(Math.abs(viaText.mean_nll - viaIds.mean_nll) <= 1e-6)) {
      fail(`${arch}: quark eval --text of the GGUF ${JSON.stringify(viaText)} vs HF's ids ${JSON.stringify(viaIds)}`);
    }
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
if (checked === 0) fail('no string was compared');
console.log(failures ? `${failures} failure(s)` : `PASS: ${checked} strings tokenized alike by llama.cpp and HF`);
process.exit(failures ? 1 : 0);

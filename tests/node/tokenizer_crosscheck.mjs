// Cross-check of the engine's tokenizer.json reader against the Hugging Face reference (npm
// @huggingface/transformers, offline from local files): every committed family under tests/fixtures/tokenizers,
// plus GPT-2's vocabulary behind the Qwen2 and Llama 3 split regexes and SmolLM's Digits pre-tokenizer, encodes the WikiText and TinyStories
// fixtures; every id of `quark tokenize` must equal the reference's, with and without special tokens, and the
// decoded text must equal the reference's decode.
//
//   node tokenizer_crosscheck.mjs                       compare (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR,
//                                                       QUARK_SHARED_DIR); exit 77 when the peers are missing
//   node tokenizer_crosscheck.mjs --print DIR FILE [--special]
//                                                       print the reference ids of FILE, space-separated
//   node tokenizer_crosscheck.mjs --variants OUTDIR     write the derived Qwen2 / Llama 3 split variants, print
//                                                       their folders (both used by tests/runtime/tokenizer_json_test.cc)
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadTransformers, referenceTokenizer } from './hf_transformers.mjs';
import { peerMissing } from './peer_missing.cjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const sourceDir = process.env.QUARK_SOURCE_DIR ?? path.resolve(here, '../..');
const binaryDir = process.env.QUARK_BINARY_DIR ?? path.join(sourceDir, 'build');
const sharedDir = process.env.QUARK_SHARED_DIR ?? path.resolve(sourceDir, '../shared');
const fixtures = path.join(sourceDir, 'tests/fixtures/tokenizers');

const QWEN2_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const LLAMA3_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's vocabulary and merges behind the pre-tokenizers of Qwen2 and Llama 3 (Split regex + ByteLevel without
// its own regex, NFC normalizer, TemplateProcessing with a BOS for Llama 3) and of SmolLM / StarCoder
// (Digits(individual) + ByteLevel), written to a temporary folder.
function writeRegexVariants(tmp) {
  const gpt2 = JSON.parse(fs.readFileSync(path.join(fixtures, 'gpt2/tokenizer.json'), 'utf8'));
  const byteLevel = (useRegex) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: useRegex });
  const split = (regex) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });
  const bos = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<|endoftext|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '<|endoftext|>': { id: '<|endoftext|>', ids: [50256], tokens: ['<|endoftext|>'] } },
  };
  const variants = {
    'gpt2-qwen2-split': { normalizer: { type: 'NFC' }, post_processor: byteLevel(false),
                          pre_tokenizer: { type: 'Sequence', pretokenizers: [split(QWEN2_SPLIT), byteLevel(false)] } },
    'gpt2-llama3-split': { normalizer: null, post_processor: bos,
                           pre_tokenizer: { type: 'Sequence', pretokenizers: [split(LLAMA3_SPLIT), byteLevel(false)] } },
    'gpt2-smollm-digits': { normalizer: null, post_processor: byteLevel(true), pre_tokenizer: {
      type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] } },
  };
  const dirs = [];
  for (const [name, stages] of Object.entries(variants)) {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify({ ...gpt2, ...stages }));
    fs.copyFileSync(path.join(fixtures, 'gpt2/tokenizer_config.json'), path.join(dir, 'tokenizer_config.json'));
    dirs.push(dir);
  }
  return dirs;
}

// The one known divergence between the two Hugging Face implementations: tokenizers (Rust, what transformers and
// vLLM run) isolates every char::is_numeric character in Digits, transformers.js only ASCII \d. The engine follows
// tokenizers, so the Digits variant is compared on TinyStories only: WikiText holds "½" (category No).
function knownDivergence(dir, text) {
  return path.basename(dir) === 'gpt2-smollm-digits' && path.basename(text) === 'wiki.test.raw'
    ? 'WikiText holds "½": Digits is char::is_numeric in tokenizers, ASCII \\d in transformers.js' : null;
}

function firstDifference(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; ++i) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

async function printMode(args) {
  const transformers = await loadTransformers(sourceDir);
  if (!transformers) peerMissing('tests/peers/node_modules lacks @huggingface/transformers');
  const [dir, file] = args;
  const tokenizer = await referenceTokenizer(transformers, path.resolve(dir));
  const ids = tokenizer.encode(fs.readFileSync(file, 'utf8'), { add_special_tokens: args.includes('--special') });
  process.stdout.write(ids.join(' ') + '\n');
}

async function compareMode() {
  const transformers = await loadTransformers(sourceDir);
  if (!transformers) {
    peerMissing('tests/peers/node_modules lacks @huggingface/transformers (run scripts/install-test-peers.sh)');
  }
  const quark = path.join(binaryDir, 'core/cli/quark');
  const texts = [path.join(sharedDir, 'fixtures/eval/wiki.test.raw'),
                 path.join(sharedDir, 'fixtures/eval/tinystories_validation_prefix.txt')];
  if (!fs.existsSync(quark) || !texts.every((t) => fs.existsSync(t))) {
    peerMissing(`needs ${quark} and the eval fixtures under ${sharedDir}`);
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'quark-tok-'));
  const families = fs.readdirSync(fixtures, { withFileTypes: true })
      .filter((d) => d.isDirectory()).map((d) => path.join(fixtures, d.name));
  const dirs = [...families, ...writeRegexVariants(tmp)];
  let compared = 0;
  let failures = 0;
  for (const dir of dirs) {
    const tokenizer = await referenceTokenizer(transformers, dir);
    for (const text of texts) {
      if (knownDivergence(dir, text)) {
        console.log(`skip ${path.basename(dir)} ${path.basename(text)}: ${knownDivergence(dir, text)}`);
        continue;
      }
      const content = fs.readFileSync(text, 'utf8');
      // With special tokens only the template around the text changes: its first 4096 characters check it.
      const prefixFile = path.join(tmp, 'prefix.txt');
      const prefix = [...content].slice(0, 4096).join('');
      fs.writeFileSync(prefixFile, prefix);
      for (const special of [false, true]) {
        const want = tokenizer.encode(special ? prefix : content, { add_special_tokens: special });
        const args = ['tokenize', '--tokenizer', dir, '--text', special ? prefixFile : text, '--json', '--decode'];
        if (special) args.push('--special');
        const out = JSON.parse(execFileSync(quark, args, { maxBuffer: 1 << 28 }).toString());
        const got = out.ids;
        const at = firstDifference(want, got);
        const label = `${path.basename(dir)} ${path.basename(text)}${special ? ' +special' : ''}`;
        compared += want.length;
        if (at >= 0) {
          ++failures;
          console.log(`FAIL ${label}: ${got.length} ids vs reference ${want.length}; first difference at ${at}: ` +
                      `ours ${JSON.stringify(got.slice(at, at + 8))} reference ${JSON.stringify(want.slice(at, at + 8))}` +
                      ` (text ${JSON.stringify(tokenizer.decode(want.slice(Math.max(0, at - 4), at + 8)))})`);
          continue;
        }
        const decoded = tokenizer.decode(want, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
        if (!special && decoded !== out.decoded) {
          ++failures;
          const d = [...decoded].findIndex((c, i) => c !== [...out.decoded][i]);
          console.log(`FAIL ${label}: decode differs at character ${d}`);
          continue;
        }
        console.log(`ok   ${label}: ${want.length} ids equal${special ? '' : ', decode equal'}`);
      }
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  console.log(`${compared} ids compared over ${dirs.length} tokenizers, ${failures} mismatching runs`);
  process.exit(failures === 0 ? 0 : 1);
}

const argv = process.argv.slice(2);
if (argv[0] === '--print') {
  await printMode(argv.slice(1));
} else if (argv[0] === '--variants') {
  for (const dir of writeRegexVariants(argv[1])) console.log(dir);
} else {
  await compareMode();
}

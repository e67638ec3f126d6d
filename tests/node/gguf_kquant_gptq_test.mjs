// #37 item 4, K-quant-aware GPTQ checked by llama.cpp: `quark quantize --export gguf --gguf-type Q4_K_M` of tinyllama-a
// four ways — llama.cpp's rules on the float weights (plain), the same with the calibration pass's importance matrix,
// GPTQ rounding to the mixture's Q4_K/Q6_K tensors itself, and GPTQ with the imatrix weighting ggml's scale search —
// each file loaded by llama.cpp (node-llama-cpp 3.22.1's prebuilt), whose mean NLL over held-out text equals
// `quark eval --model FILE.gguf --token-ids` of the same ids within 5e-3; and GPTQ's files lose at most 0.01 NLL
// against llama.cpp's rules alone (with and without the imatrix; the figures are in docs/results/exports.md). That the writer's blocks are GPTQ's, decoding to its weights
// bit for bit, is checked by the writer on every tensor (INTERNAL otherwise) and by tests/algorithms/gptq_kquant_test.
//
// Usage: node gguf_kquant_gptq_test.mjs (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR). The measurement of
// docs/results/exports.md runs it with bigger settings (bench/export/kquant_gptq_accuracy.sh): QUARK_KGPTQ_SAMPLES,
// QUARK_KGPTQ_CALIB_SEQ, QUARK_KGPTQ_SEQ, QUARK_KGPTQ_WINDOWS, QUARK_KGPTQ_TWIN=1 (tinyllama-a's outlier twin too; =only: the twin alone),
// QUARK_KGPTQ_RESULTS=file.json. Exit 0 = pass, 1 = fail, 77 = skipped (peers not installed; 1 under CI=true).
import assert from 'node:assert';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {llamaCppFileNll} from './llama_cpp_nll.mjs';
import {builtFile, cpuLlama, sharedDir} from './llama_cpp_peer.mjs';

const llama = await cpuLlama();  // first: a missing peer stops the test before any work
const quark = builtFile('core/cli/quark');

const env = (name, fallback) => Number(process.env[name] || fallback);
const kSamples = env('QUARK_KGPTQ_SAMPLES', 16);
const kCalibSeq = env('QUARK_KGPTQ_CALIB_SEQ', 128);
const kSeqLen = env('QUARK_KGPTQ_SEQ', 128);
const kWindows = env('QUARK_KGPTQ_WINDOWS', 3);
const kBound = 5e-3;
const kNllSlack = 0.01;  // GPTQ-K's NLL at most this above llama.cpp's rules' (1 % in perplexity)
const calib = path.join(sharedDir, 'fixtures/eval/tinystories_train_split.txt');
const heldout = fs.readFileSync(path.join(sharedDir, 'fixtures/eval/tinystories_heldout_split.txt'), 'utf8');
const text = heldout.slice(0, Math.max(4000, kSeqLen * kWindows * 6));  // ~4 characters a token, with room

const calibration = ['--calib', calib, '--num-calib-samples', String(kSamples), '--seq-len', String(kCalibSeq)];
const variants = [
  {label: 'plain', args: []},
  {label: 'imatrix', args: [...calibration, '--imatrix-from-calibration']},
  {label: 'gptq', args: [...calibration, '--quant-algo', 'gptq']},
  {label: 'gptq+imatrix', args: [...calibration, '--quant-algo', 'gptq', '--imatrix-from-calibration']},
];

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_kquant_gptq_'));
const tinyllama = {name: 'tinyllama-a', dir: path.join(sharedDir, 'fixtures/tinyllama-a')};
const models = process.env.QUARK_KGPTQ_TWIN === 'only' ? [] : [tinyllama];
if (process.env.QUARK_KGPTQ_TWIN === '1' || process.env.QUARK_KGPTQ_TWIN === 'only') {
  const twin = path.join(work, 'twin');
  execFileSync(quark, ['outlier-twin', '--model', tinyllama.dir, '--output', twin], {encoding: 'utf8'});
  models.push({name: 'outlier twin', dir: twin});
}

function quarkEval(file, idsFile) {
  const out = execFileSync(quark, ['eval', '--model', file, '--seq-len', String(kSeqLen), '--max-windows',
    String(kWindows), '--json', '--token-ids', idsFile], {encoding: 'utf8'});
  return JSON.parse(out.trim().split('\n').pop());
}

const results = [];
let failures = 0;
const check = (fn) => {
  try {
    fn();
  } catch (e) {
    console.error('FAIL:', e.message);
    ++failures;
  }
};
try {
  for (const m of models) {
    const rows = {};
    for (const v of variants) {
      const out = path.join(work, `${m.name.replace(/ /g, '_')}_${v.label}`);
      const start = Date.now();
      execFileSync(quark, ['quantize', '--model', m.dir, '--export', 'gguf', '--gguf-type', 'Q4_K_M', ...v.args,
        '--output', out], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']});
      const seconds = (Date.now() - start) / 1000;
      const file = path.join(out, 'model.gguf');
      const idsFile = path.join(work, 'ids.txt');
      const {nll: theirs, ids} = await llamaCppFileNll(llama, file, text, idsFile, kSeqLen, kWindows);
      const ours = quarkEval(file, idsFile);
      const row = {model: m.name, variant: v.label, bytes: fs.statSync(file).size, quantize_seconds: seconds,
        llama_cpp_mean_nll: theirs, llama_cpp_ppl: Math.exp(theirs), quark_mean_nll: ours.mean_nll,
        diff: Math.abs(theirs - ours.mean_nll), tokens: ids.length};
      rows[v.label] = row;
      results.push(row);
      console.log(JSON.stringify(row));
      check(() => assert.ok(Number.isFinite(theirs) && row.diff <= kBound,
        `${m.name} ${v.label}: llama.cpp ${theirs} vs quark eval ${ours.mean_nll}`));
      fs.rmSync(out, {recursive: true, force: true});
    }
    // GPTQ-K is not reliably below llama.cpp's rules in perplexity on this model (docs/results/exports.md: below on
    // this short protocol, +0.04 % above on 16 windows of 256): a broken grid or misplaced codes would cost far more.
    for (const [ours, theirs] of [['gptq', 'plain'], ['gptq+imatrix', 'imatrix']]) {
      check(() => assert.ok(rows[ours].llama_cpp_mean_nll < rows[theirs].llama_cpp_mean_nll + kNllSlack,
        `${m.name}: ${ours} ${rows[ours].llama_cpp_mean_nll} vs ${theirs} ${rows[theirs].llama_cpp_mean_nll}`));
    }
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
if (process.env.QUARK_KGPTQ_RESULTS) fs.writeFileSync(process.env.QUARK_KGPTQ_RESULTS, JSON.stringify(results, null, 1));
console.log(`${results.length} files, ${failures} failures`);
process.exit(failures === 0 ? 0 : 1);

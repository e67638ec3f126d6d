// The MoE architectures' GGUF export checked by its real consumer: llama.cpp (node-llama-cpp 3.22.1's prebuilt)
// loads each exported file and its mean NLL over held-out text equals `quark eval --model FILE.gguf` on the same
// token ids, within the 5e-3.
//
// Models: mixtral (architecture llama: Q/K permuted, top-2 renormalized), qwen2_moe (qwen2moe: q/k/v biases, a
// sigmoid-gated shared expert, top-k weights not renormalized) and qwen3_moe (qwen3moe: q/k norms, renormalized),
// each grown from the trained tinyllama-a by gguf_export_tool --transplant (tests/export/gguf_moe_models.h: 4
// experts = tinyllama's MLP plus seeded noise, a decisive N(0, 0.5) router, top-2), so the model predicts text
// (its NLL is printed next to log(vocab) and must be well below it) and which experts a token takes varies; a control
// asserts that the engine on the same model with experts 0 and 1 swapped lands more than 5x the bound away. Types:
// F32, Q8_0 (llama-quantize's rules: every 2-D weight but the F32 gates), Q4_K_M (its mixture) and the engine's int8 codes of every
// expert (int8_wo_32 -> Q8_0). The windows are the project's protocol (non-overlapping windows of L, mean of each
// window's mean NLL); llama.cpp runs with flash attention off and an F32 KV cache.
//
// Usage: node gguf_moe_consumer_test.mjs  (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR; optional
// QUARK_GGUF_RESULTS=file.json to keep the figures). Exit 0 = pass, 1 = fail, 77 = skipped (peers not installed).
import assert from 'node:assert';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {llamaCppEnv} from './llama_cpp_env.mjs';
import {llamaCppMeanNll} from './llama_cpp_nll.mjs';

const {sharedDir, llama, binaries: [quark, tool]} =
  await llamaCppEnv(['core/cli/quark', 'tests/export/gguf_export_tool']);

const kSeqLen = 128;
const kWindows = 3;
const kBound = 5e-3;
// QUARK_GGUF_CASES=Q4_K_M,Q6_K runs only those cases (a quicker check of some types; ctest runs them all).
const onlyCases = process.env.QUARK_GGUF_CASES ? process.env.QUARK_GGUF_CASES.split(',') : null;
const donor = path.join(sharedDir, 'fixtures/tinyllama-a');
const heldout = fs.readFileSync(path.join(sharedDir, 'fixtures/eval/tinystories_heldout_split.txt'), 'utf8');
const text = heldout.slice(0, 4000);  // enough for kWindows windows of kSeqLen tokens
const vocabSize = JSON.parse(fs.readFileSync(path.join(donor, 'config.json'), 'utf8')).vocab_size;

const archs = ['mixtral', 'qwen2_moe', 'qwen3_moe'];
const cases = [
  {label: 'F32', args: ['--type', 'F32']},
  {label: 'Q8_0', args: ['--type', 'Q8_0']},
  {label: 'Q4_K_M', args: ['--file-type', 'Q4_K_M']},  // llama-quantize's mixture (#37)
  {label: 'int8_wo_32->Q8_0', args: ['--scheme', 'int8_wo_32']},
];

// A copy of the HF folder `dir` with experts 0 and 1 of every layer trading places (their router rows swapped): the
// control that shows the comparison sees which experts a token takes.
function swapFirstTwoExperts(dir, out) {
  fs.cpSync(dir, out, {recursive: true});
  const file = path.join(out, 'model.safetensors');
  const bytes = fs.readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8'));
  let routers = 0;
  for (const [name, t] of Object.entries(header)) {
    if (!name.endsWith('.gate.weight')) continue;  // block_sparse_moe.gate / mlp.gate: [experts, hidden] F32
    assert.strictEqual(t.dtype, 'F32', name);
    const row = t.shape[1] * 4;
    const base = 8 + n + t.data_offsets[0];
    const first = Buffer.from(bytes.subarray(base, base + row));
    bytes.copy(bytes, base, base + row, base + 2 * row);
    first.copy(bytes, base + row);
    ++routers;
  }
  assert.ok(routers > 0, `${dir}: no router found`);
  fs.writeFileSync(file, bytes);
}

function quarkEval(file, extra) {
  const out = execFileSync(quark, ['eval', '--model', file, '--seq-len', String(kSeqLen), '--max-windows',
    String(kWindows), '--json', ...extra], {encoding: 'utf8'});
  return JSON.parse(out.trim().split('\n').pop());
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_gguf_moe_consumer_'));
const results = [];
let failures = 0;
try {
  for (const arch of archs) {
    const dir = path.join(work, arch);
    execFileSync(tool, [dir, path.join(work, 'seed.gguf'), '--transplant', arch, donor], {encoding: 'utf8'});
    fs.rmSync(path.join(work, 'seed.gguf'));
    for (const c of cases.filter((x) => !onlyCases || onlyCases.includes(x.label))) {
      const file = path.join(work, `${arch}_${c.label.replace(/[^A-Za-z0-9_]/g, '_')}.gguf`);
      execFileSync(tool, [dir, file, ...c.args], {encoding: 'utf8'});
      const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
      const ids = [model.tokens.bos, ...model.tokenize(text)];
      const idsFile = path.join(work, 'ids.txt');
      fs.writeFileSync(idsFile, ids.join(' ') + '\n');
      const theirs = await llamaCppMeanNll(model, ids, kSeqLen, kWindows);
      await model.dispose();
      const ours = quarkEval(file, ['--token-ids', idsFile]);
      const textFile = path.join(work, 'text.txt');
      fs.writeFileSync(textFile, text);
      const ourText = quarkEval(file, ['--text', textFile]);
      const row = {model: `${arch} (tinyllama-a transplant)`, type: c.label, bytes: fs.statSync(file).size,
        llama_cpp_mean_nll: theirs, quark_mean_nll: ours.mean_nll, diff: Math.abs(theirs - ours.mean_nll),
        log_vocab: Math.log(vocabSize), llama_cpp_tokens: ids.length, quark_text_tokens: ourText.tokens};
      results.push(row);
      console.log(JSON.stringify(row));
      try {
        assert.ok(Number.isFinite(theirs), `${arch} ${c.label}: llama.cpp NLL ${theirs}`);
        assert.ok(row.diff <= kBound, `${arch} ${c.label}: llama.cpp ${theirs} vs quark ${ours.mean_nll}`);
        // A model that predicts: far from the uniform distribution's log(vocab), so agreement means something.
        assert.ok(theirs < row.log_vocab - 1, `${arch} ${c.label}: NLL ${theirs} is near log(vocab) ${row.log_vocab}`);
        assert.strictEqual(ourText.tokens, ids.length, `${arch} ${c.label}: quark eval --text tokenized differently`);
        assert.strictEqual(ourText.mean_nll, ours.mean_nll, `${arch} ${c.label}: --text and --token-ids differ`);
      } catch (e) {
        console.error('FAIL:', e.message);
        ++failures;
      }
    }
    // Control: the engine on the model with two experts swapped is far from llama.cpp's figure for the real one.
    const f32 = results.find((r) => r.model.startsWith(arch) && r.type === 'F32');
    const swapped = path.join(work, `${arch}_swapped`);
    swapFirstTwoExperts(dir, swapped);
    const control = quarkEval(swapped, ['--token-ids', path.join(work, 'ids.txt')]);
    const gap = Math.abs(control.mean_nll - f32.llama_cpp_mean_nll);
    console.log(JSON.stringify({model: arch, control: 'experts 0 and 1 swapped (quark eval)',
      quark_mean_nll: control.mean_nll, llama_cpp_unswapped_mean_nll: f32.llama_cpp_mean_nll, gap}));
    if (!(gap > 5 * kBound)) {
      console.error(`FAIL: ${arch}: swapping two experts moves the NLL by only ${gap}: the check cannot see routing`);
      ++failures;
    }
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
if (process.env.QUARK_GGUF_RESULTS) fs.writeFileSync(process.env.QUARK_GGUF_RESULTS, JSON.stringify(results, null, 1));
const maxDiff = Math.max(...results.map((r) => r.diff));
console.log(`${results.length} files, max |llama.cpp - quark| mean NLL ${maxDiff.toExponential(2)}, ${failures} failures`);
process.exit(failures === 0 && results.length === archs.length * cases.filter((x) => !onlyCases || onlyCases.includes(x.label)).length ? 0 : 1);

// The real consumer of the GGUF export: llama.cpp (node-llama-cpp 3.22.1's prebuilt) loads each exported file and
// its perplexity over held-out text equals `quark eval --model FILE.gguf` on the same token ids.
//
// For stories260K (GQA, tied embeddings, 172-wide FFN) and tinyllama-a (untied lm_head): float weights exported as
// F32, F16, BF16, Q8_0, Q4_0, Q4_1 (llama-quantize --pure's rules), the mixtures Q4_K_M, Q5_K_M, Q6_K, Q3_K_M and
// IQ4_XS (llama-quantize's per-tensor rules), and engine codes (uint4 asymmetric g32 -> Q4_1,
// int4 symmetric g32 -> Q4_0, int8 symmetric g32 -> Q8_0). The ids are llama.cpp's tokenization of the held-out text
// with BOS; a rotated stories260K (tied embeddings untied by the rotation: output.weight) goes through `quark
// quantize`; synthetic Qwen2 (q/k/v biases, no Q/K permutation) and Mistral models (seeded random weights, written by
// gguf_export_tool --synthetic) check those architectures with fewer types. The windows are the project's protocol (non-overlapping windows of L, mean of each window's mean NLL).
// llama.cpp runs with flash attention off and an F32 KV cache, so the two agree to ~1e-5; the bound is the issue's
// 5e-3. `quark eval --text` must also tokenize the text into llama.cpp's ids (the tokenizer.model beside the file; on
// each model's first file). A mixed recipe (#36 item 5) goes through `quark quantize --config` with per-tensor types.
//
// Usage: node gguf_consumer_test.mjs  (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR; optional
// QUARK_GGUF_RESULTS=file.json to keep the figures). Exit 0 = pass, 1 = fail, 77 = skipped (peers not installed).
import assert from 'node:assert';
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {llamaCppEnv} from './llama_cpp_env.mjs';
import {llamaCppFileNll} from './llama_cpp_nll.mjs';

const {sharedDir, llama, binaries: [quark, tool]} =
  await llamaCppEnv(['core/cli/quark', 'tests/export/gguf_export_tool']);

const kSeqLen = 128;
const kWindows = 3;
const kBound = 5e-3;
// QUARK_GGUF_CASES=Q4_K_M,Q6_K runs only those cases (a quicker check of some types; ctest runs them all).
const onlyCases = process.env.QUARK_GGUF_CASES ? process.env.QUARK_GGUF_CASES.split(',') : null;
const heldout = fs.readFileSync(path.join(sharedDir, 'fixtures/eval/tinystories_heldout_split.txt'), 'utf8');
const text = heldout.slice(0, 4000);  // enough for kWindows windows of kSeqLen tokens

const models = [
  {name: 'stories260K', dir: path.join(sharedDir, 'fixtures/stories260K'), exclude: ['*down_proj']},
  {name: 'tinyllama-a', dir: path.join(sharedDir, 'fixtures/tinyllama-a'), exclude: []},
  {name: 'qwen2-synthetic', synthetic: 'qwen2', exclude: [], only: ['F32', 'Q8_0', 'Q4_1', 'uint4_wo_32->Q4_1']},
  {name: 'mistral-synthetic', synthetic: 'mistral', exclude: [], only: ['F32', 'Q4_0', 'int8_wo_32->Q8_0']},
];
const cases = [
  ...['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_1'].map((t) => ({label: t, args: ['--type', t]})),
  // llama-quantize's K-quant mixtures (#37); stories260K's 64-wide rows take its fallbacks (Q5_0, Q5_1, Q8_0, IQ4_NL).
  ...['Q4_K_M', 'Q5_K_M', 'Q6_K', 'Q3_K_M', 'IQ4_XS'].map((t) => ({label: t, args: ['--file-type', t]})),
  {label: 'uint4_wo_32->Q4_1', scheme: 'uint4_wo_32'},
  {label: 'int4_wo_32->Q4_0', scheme: 'int4_wo_32'},
  {label: 'int8_wo_32->Q8_0', scheme: 'int8_wo_32'},
];

function quarkEval(file, extra) {
  const out = execFileSync(quark, ['eval', '--model', file, '--seq-len', String(kSeqLen), '--max-windows',
    String(kWindows), '--json', ...extra], {encoding: 'utf8'});
  return JSON.parse(out.trim().split('\n').pop());
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_gguf_consumer_'));
const results = [];
let failures = 0;
try {
  for (const m of models) {
    if (m.synthetic) {
      m.dir = path.join(work, m.name);
      execFileSync(tool, [m.dir, path.join(work, 'seed.gguf'), '--synthetic', m.synthetic,
        path.join(sharedDir, 'fixtures/stories260K/tokenizer.model')], {encoding: 'utf8'});
      fs.rmSync(path.join(work, 'seed.gguf'));
    }
    // `quark eval --text` tokenizes with the tokenizer.model beside the file, the same for every type: checked on
    // the model's first file (a third engine process for every file was a quarter of this test's time).
    let textChecked = false;
    for (const c of cases.filter((x) => (!m.only || m.only.includes(x.label)) && (!onlyCases || onlyCases.includes(x.label)))) {
      const file = path.join(work, `${m.name}_${c.label.replace(/[^A-Za-z0-9_]/g, '_')}.gguf`);
      const args = c.scheme ? ['--scheme', c.scheme, ...m.exclude.flatMap((e) => ['--exclude', e])] : c.args;
      execFileSync(tool, [m.dir, file, ...args], {encoding: 'utf8'});
      const idsFile = path.join(work, 'ids.txt');
      const {nll: theirs, ids} = await llamaCppFileNll(llama, file, text, idsFile, kSeqLen, kWindows);
      const ours = quarkEval(file, ['--token-ids', idsFile]);
      let ourText = null;
      if (!textChecked) {
        const textFile = path.join(work, 'text.txt');
        fs.writeFileSync(textFile, text);
        ourText = quarkEval(file, ['--text', textFile]);
        textChecked = true;
      }
      const row = {model: m.name, type: c.label, bytes: fs.statSync(file).size, llama_cpp_mean_nll: theirs,
        quark_mean_nll: ours.mean_nll, diff: Math.abs(theirs - ours.mean_nll), llama_cpp_tokens: ids.length,
        quark_text_tokens: ourText?.tokens};
      results.push(row);
      console.log(JSON.stringify(row));
      try {
        assert.ok(Number.isFinite(theirs), `${m.name} ${c.label}: llama.cpp NLL ${theirs}`);
        assert.ok(row.diff <= kBound, `${m.name} ${c.label}: llama.cpp ${theirs} vs quark ${ours.mean_nll}`);
        if (ourText) {
          assert.strictEqual(ourText.tokens, ids.length, `${m.name} ${c.label}: quark eval --text tokenized differently`);
          assert.strictEqual(ourText.mean_nll, ours.mean_nll, `${m.name} ${c.label}: --text and --token-ids differ`);
        }
      } catch (e) {
        console.error('FAIL:', e.message);
        ++failures;
      }
    }
  }
  // stories260K ties its LM head to the embedding; a rotation (through the pipeline, `quark quantize --quant-algo
  // rotation`) folds the final norm into the head and so unties them: the GGUF carries output.weight. In F32 the
  // rotation is an identity up to rounding, so llama.cpp must also give the unrotated F32 file's figure.
  {
    const out = path.join(work, 'rotated');
    // Every linear excluded: the weights stay float, only the rotation changes them.
    execFileSync(quark, ['quantize', '--model', models[0].dir, '--scheme', 'uint4_wo_32', '--exclude', '*',
      '--quant-algo', 'rotation', '--export', 'gguf', '--gguf-type', 'F32', '--output', out], {encoding: 'utf8'});
    const file = path.join(out, 'model.gguf');
    const idsFile = path.join(work, 'ids.txt');
    const {nll: theirs} = await llamaCppFileNll(llama, file, text, idsFile, kSeqLen, kWindows);
    const ours = quarkEval(file, ['--token-ids', idsFile]);
    const unrotated = results.find((r) => r.model === 'stories260K' && r.type === 'F32');
    const row = {model: 'stories260K rotated (untied)', type: 'F32', bytes: fs.statSync(file).size,
      llama_cpp_mean_nll: theirs, quark_mean_nll: ours.mean_nll, diff: Math.abs(theirs - ours.mean_nll),
      unrotated_llama_cpp_mean_nll: unrotated.llama_cpp_mean_nll};
    results.push(row);
    console.log(JSON.stringify(row));
    try {
      assert.ok(row.diff <= kBound, `rotated: llama.cpp ${theirs} vs quark ${ours.mean_nll}`);
      assert.ok(Math.abs(theirs - unrotated.llama_cpp_mean_nll) <= 1e-4,
        `rotated: llama.cpp ${theirs} vs the unrotated file's ${unrotated.llama_cpp_mean_nll}`);
      assert.ok(fs.statSync(file).size > unrotated.bytes, 'rotated: no output.weight of its own');
    } catch (e) {
      console.error('FAIL:', e.message);
      ++failures;
    }
  }
  // #36 item 5: a mixed recipe through `quark quantize --config` into GGUF and compressed-tensors in one pass
  // (tests/export/data/mixed_recipe_g32.json on tinyllama-a: uint4 g32 -> Q4_1 by default, every o_proj int8 g32 ->
  // Q8_0, layer 0's MLP int4 g32 -> Q4_0, layer 3's down_proj in float): llama.cpp loads the per-tensor types and its
  // NLL equals quark eval's of the same file, and of the compressed-tensors export of the same codes (the GGUF's block
  // scales are their fp16 roundings).
  {
    const out = path.join(work, 'mixed');
    const recipe = path.join(process.env.QUARK_SOURCE_DIR, 'tests/export/data/mixed_recipe_g32.json');
    execFileSync(quark, ['quantize', '--model', models[1].dir, '--config', recipe, '--export', 'gguf', '--export',
      'compressed_tensors', '--output', out], {encoding: 'utf8'});
    const file = path.join(out, 'model.gguf');  // beside the other formats' folders
    const idsFile = path.join(work, 'ids.txt');
    const {nll: theirs} = await llamaCppFileNll(llama, file, text, idsFile, kSeqLen, kWindows);
    const ours = quarkEval(file, ['--token-ids', idsFile]);
    const ct = quarkEval(path.join(out, 'compressed_tensors'), ['--token-ids', idsFile]);
    const uniform = results.find((r) => r.model === 'tinyllama-a' && r.type === 'uint4_wo_32->Q4_1');
    const row = {model: 'tinyllama-a', type: 'mixed Q4_1/Q4_0/Q8_0/F32 (quark quantize --config)',
      bytes: fs.statSync(file).size, llama_cpp_mean_nll: theirs, quark_mean_nll: ours.mean_nll,
      diff: Math.abs(theirs - ours.mean_nll), quark_compressed_tensors_mean_nll: ct.mean_nll};
    results.push(row);
    console.log(JSON.stringify(row));
    try {
      assert.ok(row.diff <= kBound, `mixed: llama.cpp ${theirs} vs quark ${ours.mean_nll}`);
      assert.ok(Math.abs(ct.mean_nll - ours.mean_nll) <= kBound,
        `mixed: compressed-tensors ${ct.mean_nll} vs GGUF ${ours.mean_nll}`);
      if (uniform) assert.ok(row.bytes > uniform.bytes, 'mixed: not larger than uniform Q4_1 (int8 and F32 tensors)');
    } catch (e) {
      console.error('FAIL:', e.message);
      ++failures;
    }
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
if (process.env.QUARK_GGUF_RESULTS) fs.writeFileSync(process.env.QUARK_GGUF_RESULTS, JSON.stringify(results, null, 1));
const maxDiff = Math.max(...results.map((r) => r.diff));
console.log(`${results.length} files, max |llama.cpp - quark| mean NLL ${maxDiff.toExponential(2)}, ${failures} failures`);
process.exit(failures === 0 ? 0 : 1);

// gpt-oss's and Llama 4's GGUF exports (#32: llama.cpp's gpt-oss and llama4 layouts, core/export/gguf_gpt_oss.h and
// gguf_llama4.h) checked by their real consumer: llama.cpp (node-llama-cpp 3.22.1's prebuilt, whose llama.cpp knows
// both architectures) loads the files tests/export/moe_gguf_tool writes for the tiny shapes, and its mean NLL over the
// same token windows equals `quark eval --model FILE.gguf` (the engine on the file's own weights, read back) within
// the 5e-3 for Q8_0 and MXFP4 experts (fake-quantized by the engine, held exactly as GGML MXFP4; llama.cpp
// quantizes those products' activations to Q8_0, the engine does not) and within 1e-4 for F32, whose figure also
// equals `quark eval` of the HF checkpoint it was written from within 1e-4. One more file comes from the pipeline
// itself: `quark quantize --scheme mxfp4_weight_only --export gguf` (every linear OCP MXFP4; the experts in the file
// as MXFP4, the others as their dequantized values), checked the same way. A control per family lands more than 5x
// the F32 bound away (gpt-oss without its attention sinks; Llama 4 with RoPE on its NoPE layer), so the check sees
// those features. gpt-oss's released YaRN (truncate false) is reported next to llama.cpp's figure, not bounded: llama.cpp
// always truncates the correction range (the tool's model says truncate true). llama.cpp runs with flash attention
// off and an F32 KV cache.
//
// Usage: node gguf_gpt_oss_llama4_consumer_test.mjs  (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR).
// Exit 0 = pass, 1 = fail, 77 = skipped (peers not installed; a failure under CI=true).
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {llamaCppEnv} from './llama_cpp_env.mjs';
import {llamaCppMeanNll} from './llama_cpp_nll.mjs';

const {sharedDir, llama, binaries: [quark, tool]} =
  await llamaCppEnv(['core/cli/quark', 'tests/export/moe_gguf_tool']);

const kSeqLen = 64;
const kWindows = 2;
const kBound = 5e-3;       // quantized files (the bound)
const kFloatBound = 1e-4;  // F32 files: the same weights, float arithmetic

function quarkEval(model, idsFile) {
  const out = execFileSync(quark, ['eval', '--model', model, '--token-ids', idsFile, '--seq-len', String(kSeqLen),
    '--max-windows', String(kWindows), '--json'], {encoding: 'utf8'});
  return JSON.parse(out.trim().split('\n').pop());
}

async function llamaCppNll(file, ids) {
  const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
  const nll = await llamaCppMeanNll(model, ids, kSeqLen, kWindows);
  await model.dispose();
  return nll;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_gguf_gpt_oss_llama4_'));
let failures = 0;
let compared = 0;
const fail = (message) => {
  console.error(`FAIL: ${message}`);
  ++failures;
};
try {
  for (const arch of ['gpt_oss', 'llama4']) {
    const dir = path.join(work, arch);
    const rows = execFileSync(tool, [dir, sharedDir, '--arch', arch, '--seq-len', String(kSeqLen),
      '--windows', String(kWindows)], {encoding: 'utf8'}).trim().split('\n').map((l) => JSON.parse(l));
    const ids = JSON.parse(fs.readFileSync(path.join(dir, 'ids.json'), 'utf8'));
    const idsFile = path.join(dir, 'ids.txt');
    // The pipeline's own GGUF: every linear OCP MXFP4, exported by `quark quantize --export gguf`.
    const pipeline = path.join(dir, 'pipeline');
    execFileSync(quark, ['quantize', '--model', path.join(dir, 'hf'), '--scheme', 'mxfp4_weight_only', '--export',
      'gguf', '--output', pipeline, '--num-calib-samples', '2', '--seq-len', String(kSeqLen)], {encoding: 'utf8'});
    if (!fs.existsSync(path.join(pipeline, 'tokenizer.model'))) {
      fs.copyFileSync(path.join(dir, 'tokenizer.model'), path.join(pipeline, 'tokenizer.model'));
    }
    rows.push({type: 'pipeline mxfp4_weight_only', file: path.join(pipeline, 'model.gguf')});
    let f32 = null;
    for (const row of rows) {
      const theirs = await llamaCppNll(row.file, ids);
      const ours = quarkEval(row.file, idsFile);
      const result = {model: `${arch} tiny`, type: row.type, bytes: fs.statSync(row.file).size,
        llama_cpp_mean_nll: theirs, quark_mean_nll: ours.mean_nll, diff: Math.abs(theirs - ours.mean_nll),
        mxfp4_tensors: row.mxfp4_tensors};
      console.log(JSON.stringify(result));
      ++compared;
      const bound = row.type === 'F32' ? kFloatBound : kBound;
      if (!(result.diff <= bound)) fail(`${arch} ${row.type}: llama.cpp ${theirs} vs quark eval ${ours.mean_nll}`);
      if (ours.tokens !== ids.length) fail(`${arch} ${row.type}: quark eval read ${ours.tokens} tokens of ${ids.length}`);
      if (row.type === 'MXFP4' && !(row.mxfp4_tensors > 0)) fail(`${arch}: the MXFP4 file holds no MXFP4 tensor`);
      if (row.type === 'F32') f32 = result;
    }
    const hf = quarkEval(path.join(dir, 'hf'), idsFile);
    const hfDiff = Math.abs(hf.mean_nll - f32.llama_cpp_mean_nll);
    console.log(JSON.stringify({model: `${arch} tiny`, quark_eval_hf_mean_nll: hf.mean_nll, diff_llama_cpp_f32: hfDiff}));
    if (!(hfDiff <= kFloatBound)) fail(`${arch}: quark eval of the HF folder ${hf.mean_nll} vs llama.cpp F32 ${f32.llama_cpp_mean_nll}`);
    const control = quarkEval(path.join(dir, 'hf_control'), idsFile);
    const gap = Math.abs(control.mean_nll - f32.llama_cpp_mean_nll);
    console.log(JSON.stringify({model: `${arch} tiny`,
      control: arch === 'gpt_oss' ? 'no attention sinks' : 'RoPE on the NoPE layer', quark_mean_nll: control.mean_nll,
      llama_cpp_f32_mean_nll: f32.llama_cpp_mean_nll, gap}));
    if (!(gap > 5 * kFloatBound)) fail(`${arch}: the control moves the NLL by only ${gap}: the check cannot see it`);
    if (arch === 'gpt_oss') {
      const untruncated = quarkEval(path.join(dir, 'hf_truncate_false'), idsFile);
      console.log(JSON.stringify({model: 'gpt_oss tiny', yarn_truncate_false_quark_mean_nll: untruncated.mean_nll,
        llama_cpp_f32_mean_nll: f32.llama_cpp_mean_nll, gap: Math.abs(untruncated.mean_nll - f32.llama_cpp_mean_nll)}));
    }
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
if (compared !== 2 * 4) fail(`${compared} files compared, expected 8`);
process.exit(failures === 0 ? 0 : 1);

// DeepSeek-V3's GGUF export (#32: llama.cpp's deepseek2 layout, core/export/gguf_deepseek.h) checked by its real
// consumer: llama.cpp (node-llama-cpp 3.22.1's prebuilt) loads the F32 and Q8_0 files tests/export/deepseek_gguf_tool
// writes for the tiny synthetic DeepSeek-V3 (MLA with YaRN, 16 experts in 4 groups with 2 kept, top-4 sigmoid routing
// with the correction bias, a shared expert, a dense first layer), and its mean NLL over the same token windows equals
// the engine's on the GGUF's own weights within the 5e-3, and equals `quark eval` itself (the CLI's streamed
// pipeline: ModelConfig, TransformerModel, the LayerStreamer) on the HF checkpoint the GGUFs were written from, on the
// same token ids, within 5e-3 too. A control: the engine with group-limited routing
// turned off lands more than 5x the bound away, so the check sees the routing. llama.cpp runs with flash attention off
// and an F32 KV cache.
//
// Usage: node gguf_deepseek_consumer_test.mjs  (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR).
// Exit 0 = pass, 1 = fail, 77 = skipped (peers not installed; a failure under CI=true).
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {builtFile, cpuLlama, sharedDir} from './llama_cpp_peer.mjs';
import {llamaCppMeanNll} from './llama_cpp_nll.mjs';

const llama = await cpuLlama();  // first: a missing peer stops the test before any work
const tool = builtFile('tests/export/deepseek_gguf_tool');
const quark = builtFile('core/cli/quark');

// `quark eval` of an HF folder over the tool's token ids (the project's windows: kWindows of kSeqLen).
function quarkEval(dir, idsFile) {
  const out = execFileSync(quark, ['eval', '--model', dir, '--token-ids', idsFile, '--seq-len', String(kSeqLen),
    '--max-windows', String(kWindows), '--json'], {encoding: 'utf8'});
  return JSON.parse(out.trim().split('\n').pop());
}

const kSeqLen = 64;
const kWindows = 2;
const kBound = 5e-3;

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_gguf_deepseek_'));
// tiny: q_a/q_b LoRA, 4 groups of 4 experts with 2 kept, an MTP layer left out of the file. (tiny-q-proj, a plain
// q_proj, is not a file llama.cpp reads: it takes a null q_lora_rank only from 26- or 27-layer models, and the export
// refuses it; its runtime is checked against HF's code in tests/runtime/deepseek_test.)
const shapes = ['tiny'];
let failures = 0;
let compared = 0;
try {
  for (const shape of shapes) {
    const dir = path.join(work, shape);
    const lines = execFileSync(tool, [dir, sharedDir, '--shape', shape, '--seq-len', String(kSeqLen),
      '--windows', String(kWindows), '--control'], {encoding: 'utf8'}).trim().split('\n').map((l) => JSON.parse(l));
    const ids = JSON.parse(fs.readFileSync(path.join(dir, 'ids.json'), 'utf8'));
    const evaluated = quarkEval(path.join(dir, 'hf_eval'), path.join(dir, 'ids.txt'));
    console.log(JSON.stringify({model: `deepseek_v3 ${shape} (seed 5)`, quark_eval_mean_nll: evaluated.mean_nll,
      quark_eval_tokens: evaluated.tokens}));
    if (evaluated.tokens !== ids.length) {
      console.error(`FAIL: quark eval read ${evaluated.tokens} tokens, the windows hold ${ids.length}`);
      ++failures;
    }
    const results = [];
    for (const row of lines.filter((l) => l.type)) {
      const model = await llama.loadModel({modelPath: row.file, gpuLayers: 0});
      const theirs = await llamaCppMeanNll(model, ids, kSeqLen, kWindows);
      await model.dispose();
      const result = {model: `deepseek_v3 ${shape} (seed 5)`, type: row.type, bytes: fs.statSync(row.file).size,
        llama_cpp_mean_nll: theirs, quark_mean_nll: row.quark_mean_nll, diff: Math.abs(theirs - row.quark_mean_nll),
        quark_eval_mean_nll: evaluated.mean_nll, diff_quark_eval: Math.abs(theirs - evaluated.mean_nll),
        log_vocab: Math.log(row.vocab)};
      results.push(result);
      ++compared;
      console.log(JSON.stringify(result));
      if (!(result.diff <= kBound)) {
        console.error(`FAIL: ${shape} ${row.type}: llama.cpp ${theirs} vs quark ${row.quark_mean_nll}`);
        ++failures;
      }
      if (!(result.diff_quark_eval <= kBound)) {
        console.error(`FAIL: ${shape} ${row.type}: llama.cpp ${theirs} vs quark eval ${evaluated.mean_nll}`);
        ++failures;
      }
    }
    const control = lines.find((l) => l.control);
    const f32 = results.find((r) => r.type === 'F32');
    const gap = Math.abs(control.quark_mean_nll - f32.llama_cpp_mean_nll);
    console.log(JSON.stringify({model: shape, control: control.control, quark_mean_nll: control.quark_mean_nll,
      llama_cpp_mean_nll: f32.llama_cpp_mean_nll, gap}));
    if (!(gap > 5 * kBound)) {
      console.error(`FAIL: ${shape}: group-limited routing off moves the NLL by only ${gap}: the check cannot see routing`);
      ++failures;
    }
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
if (compared !== 2 * shapes.length) ++failures;
process.exit(failures === 0 ? 0 : 1);

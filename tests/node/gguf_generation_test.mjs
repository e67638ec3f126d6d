// `quark generate` (the KV-cache greedy decoder GSM8K scoring runs) against llama.cpp's own greedy decoding
// (node-llama-cpp, its KV cache, argmax of its logits at each step) of our GGUF exports of tinyllama-a, from the same
// token ids (llama.cpp's tokenization of each prompt, BOS first). F32: the tokens must be equal for every prompt.
// Q8_0: printed, not asserted — llama.cpp quantizes the activations in Q8_0 dot products (Q8_0 x Q8_0), which our
// read-back (weights dequantized, activations in float) does not, so near-ties may resolve differently.
//
// Usage: node gguf_generation_test.mjs (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR). Exit 0 = pass,
// 1 = fail, 77 = skipped (peers not installed; a failure when CI=true).
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import {builtFile, cpuLlama, sharedDir} from './llama_cpp_peer.mjs';

const llama = await cpuLlama();  // first: a missing peer stops the test before any work
const quark = builtFile('core/cli/quark');
const tool = builtFile('tests/export/gguf_export_tool');
const kNewTokens = 48;
const kPrompts = [
  'Once upon a time',
  'Tom and Lily went to the park. Tom saw a big red ball and',
  'Question: Janet has 3 apples and buys 2 more. How many apples does she have?\nAnswer:',
  'The little dog was sad because',
];
const modelDir = path.join(sharedDir, 'fixtures/tinyllama-a');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'quark_gguf_generation_'));
let failures = 0;

function argmax(map) {  // next.logits: token -> logit; the first maximum in token order, as torch.argmax
  let best = -1, bestValue = -Infinity;
  for (const [token, value] of [...map.entries()].sort((a, b) => a[0] - b[0])) {
    if (value > bestValue) { best = token; bestValue = value; }
  }
  return best;
}

async function llamaCppGreedy(model, ids) {
  const context = await model.createContext({contextSize: 256, batchSize: 256, sequences: 1, flashAttention: false, threads: 1,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32'});
  const sequence = context.getSequence();
  const out = [];
  let res = await sequence.controlledEvaluate(ids.map((t, i) => (i === ids.length - 1 ? [t, {generateNext: {logits: true}}] : t)));
  for (let step = 0; step < kNewTokens; ++step) {
    const token = argmax(res.at(-1).next.logits);
    out.push(token);
    if (token === model.tokens.eos) break;
    res = await sequence.controlledEvaluate([[token, {generateNext: {logits: true}}]]);
  }
  await context.dispose();
  return out;
}

function quarkGreedy(file, ids) {
  const idsFile = path.join(work, 'ids.txt');
  fs.writeFileSync(idsFile, ids.join(' ') + '\n');
  return JSON.parse(execFileSync(quark, ['generate', '--model', file, '--token-ids', idsFile, '--max-new-tokens',
    String(kNewTokens), '--json'], {encoding: 'utf8', env: {...process.env, QUARK_THREADS: '1'}})).tokens;
}

try {
  for (const type of ['F32', 'Q8_0']) {
    const file = path.join(work, `${type}.gguf`);
    execFileSync(tool, [modelDir, file, '--type', type]);
    const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
    let agreeing = 0, total = 0;
    for (const prompt of kPrompts) {
      const ids = [model.tokens.bos, ...model.tokenize(prompt)];
      const theirs = await llamaCppGreedy(model, ids);
      const ours = quarkGreedy(file, ids);
      let same = 0;
      while (same < Math.min(ours.length, theirs.length) && ours[same] === theirs[same]) ++same;
      agreeing += same;
      total += theirs.length;
      const equal = same === theirs.length && ours.length === theirs.length;
      console.log(JSON.stringify({type, prompt, tokens: theirs.length, equal_prefix: same,
        llama_cpp: model.detokenize(theirs), quark: model.detokenize(ours)}));
      if (type === 'F32' && !equal) {
        console.error(`FAIL: F32 "${prompt}": quark and llama.cpp part after ${same} of ${theirs.length} tokens`);
        ++failures;
      }
    }
    console.log(`${type}: ${agreeing} of ${total} greedy tokens equal before the first difference`);
    await model.dispose();
  }
} finally {
  fs.rmSync(work, {recursive: true, force: true});
}
console.log(`${failures} failures`);
process.exit(failures === 0 ? 0 : 1);

// The project's perplexity protocol with llama.cpp (node-llama-cpp) computing the logits: non-overlapping windows of
// `seqLen` tokens of `ids`, at most `maxWindows` of them, the mean of each window's mean NLL. Flash attention off and
// an F32 KV cache, so llama.cpp and the engine agree to ~1e-5 on float weights.
import fs from 'node:fs';

export async function llamaCppMeanNll(model, ids, seqLen, maxWindows) {
  const context = await model.createContext({
    contextSize: seqLen, batchSize: seqLen, sequences: 1, flashAttention: false,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  });
  const sequence = context.getSequence();
  const windows = [];
  for (let start = 0; start + 1 < ids.length && windows.length < maxWindows; start += seqLen) {
    const window = ids.slice(start, start + seqLen);
    await sequence.clearHistory();
    const out = await sequence.controlledEvaluate(window.map((t) => [t, {generateNext: {logits: true}}]));
    let nll = 0;
    for (let i = 0; i + 1 < window.length; ++i) {
      const logits = out[i].next.logits;
      let max = -Infinity;
      for (const v of logits.values()) max = Math.max(max, v);
      let sum = 0;
      for (const v of logits.values()) sum += Math.exp(v - max);
      nll -= logits.get(window[i + 1]) - max - Math.log(sum);
    }
    windows.push(nll / (window.length - 1));
  }
  await context.dispose();
  return windows.reduce((a, b) => a + b, 0) / windows.length;
}

// Loads the GGUF `file` in llama.cpp, tokenizes `text` as llama.cpp does (with BOS), writes the ids to `idsFile` (for
// `quark eval --token-ids`) and returns them with llama.cpp's mean NLL over them (llamaCppMeanNll).
export async function llamaCppFileNll(llama, file, text, idsFile, seqLen, maxWindows) {
  const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
  const ids = [model.tokens.bos, ...model.tokenize(text)];
  fs.writeFileSync(idsFile, ids.join(' ') + '\n');
  const nll = await llamaCppMeanNll(model, ids, seqLen, maxWindows);
  await model.dispose();
  return {nll, ids};
}

// llama-perplexity --kl-divergence's definitions (tools/perplexity/perplexity.cpp: the base model's log-probs stored
// as uint16 rows over the 16 nats below the top token, per-token KLD / Δp / top-1, means with sqrt(var / (n - 1)),
// interpolated percentiles) written again in JavaScript over logits that llama.cpp (node-llama-cpp) computes, chunk
// by chunk: chunks of nCtx tokens, the first replaced by BOS, positions nCtx/2 .. nCtx-2 scored. Float32 rounding is
// kept with Math.fround where llama.cpp computes in float.
const f = Math.fround;

// llama.cpp's logits of every position of each chunk, [chunk][position] -> Float32Array(vocab).
export async function llamaCppChunkLogits(model, ids, nCtx, chunks, bos) {
  const context = await model.createContext({
    contextSize: nCtx, batchSize: nCtx, sequences: 1, flashAttention: false,
    experimentalKvCacheKeyType: 'F32', experimentalKvCacheValueType: 'F32',
  });
  const sequence = context.getSequence();
  const out = [];
  for (let c = 0; c < chunks; ++c) {
    const chunk = ids.slice(c * nCtx, (c + 1) * nCtx);
    chunk[0] = bos;
    await sequence.clearHistory();
    const res = await sequence.controlledEvaluate(chunk.map((t) => [t, {generateNext: {logits: true}}]));
    // next.logits is a Map token -> logit (not in token order): laid out by token id here.
    out.push({tokens: chunk, logits: res.map((r) => byToken(r.next.logits))});
  }
  await context.dispose();
  return out;
}

function byToken(map) {
  let n = 0;
  for (const k of map.keys()) n = Math.max(n, k + 1);
  const row = new Float32Array(n);
  for (const [k, v] of map) row[k] = v;
  return row;
}

function encodeBase(logits) {
  let max = logits[0];
  let min = logits[0];
  for (const v of logits) { max = Math.max(max, v); min = Math.min(min, v); }
  min = Math.max(min, f(max - 16));
  let sumExp = 0;
  for (const v of logits) sumExp += f(Math.exp(f(v - max)));
  const logSumExp = f(Math.log(sumExp));
  const minLogProb = f(f(min - max) - logSumExp);
  const scale = f(f(max - min) / 65535);
  const q = new Uint16Array(logits.length);
  if (scale !== 0) {
    const inv = f(1 / scale);
    for (let i = 0; i < logits.length; ++i) {
      if (logits[i] > min) {
        const x = f(inv * f(logits[i] - min));
        const r = Math.round(x);
        q[i] = (Math.abs(x % 1) === 0.5 && r % 2 !== 0) ? r - 1 : r;  // half to even
      }
    }
  }
  return {scale, minLogProb, q};
}

function meanAndError(sum, sum2, n) {
  const m = sum / n;
  const v = sum2 / n - m * m;
  return {value: m, stderr: v > 0 && n > 10 ? Math.sqrt(v / (n - 1)) : 0};
}

function percentile(sorted, fraction) {
  let p = f(fraction * (sorted.length - 1));
  const ip = Math.floor(p);
  p = f(p - ip);
  return (1 - p) * sorted[ip] + p * sorted[Math.min(ip + 1, sorted.length - 1)];
}

function median(sorted) {
  const n = sorted.length;
  return n % 2 === 0 ? 0.5 * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[(n - 1) / 2];
}

// base / model: what llamaCppChunkLogits returned for the float model and the quantized one (same tokens).
export function klDivergence(base, model) {
  let sumKld = 0, sumKld2 = 0, sumDp = 0, sumDp2 = 0, sumDp4 = 0, sameTop = 0, count = 0;
  const klds = [];
  const dps = [];
  for (let c = 0; c < base.length; ++c) {
    const nCtx = base[c].tokens.length;
    for (let j = Math.floor(nCtx / 2); j <= nCtx - 2; ++j) {
      const tok = base[c].tokens[j + 1];
      const {scale, minLogProb, q} = encodeBase(base[c].logits[j]);
      const logits = model[c].logits[j];
      let max = logits[0];
      let imax = 0;
      for (let i = 1; i < logits.length; ++i) if (logits[i] > max) { max = logits[i]; imax = i; }
      let sumExp = 0;
      for (const v of logits) sumExp += f(Math.exp(f(v - max)));
      const logSumExp = f(Math.log(sumExp));
      const nll = f(f(max + logSumExp) - logits[tok]);
      const nllBase = -f(f(scale * q[tok]) + minLogProb);
      const top = f(max + logSumExp);
      let kld = 0;
      let imaxBase = -1;
      let pMax = 0;
      for (let i = 0; i < logits.length; ++i) {
        const pLog = f(f(scale * q[i]) + minLogProb);
        if (i === 0 || pLog > pMax) { pMax = pLog; imaxBase = i; }
        if (pLog > -16) kld += f(f(Math.exp(pLog)) * f(f(pLog - logits[i]) + top));
      }
      const dp = f(f(Math.exp(-nll)) - f(Math.exp(-nllBase)));
      sumKld += kld; sumKld2 += kld * kld;
      sumDp += dp; sumDp2 += dp * dp; sumDp4 += dp * dp * dp * dp;
      if (imax === imaxBase) ++sameTop;
      ++count;
      klds.push(f(kld));
      dps.push(dp);
    }
  }
  klds.sort((a, b) => a - b);
  dps.sort((a, b) => a - b);
  const top = sameTop / count;
  return {
    tokens_scored: count,
    kld_mean: meanAndError(sumKld, sumKld2, count),
    kld_median: median(klds), kld_p90: percentile(klds, f(0.9)), kld_p95: percentile(klds, f(0.95)),
    kld_p99: percentile(klds, f(0.99)),
    same_top: {value: top, stderr: Math.sqrt(top * (1 - top) / (count - 1))},
    delta_p_mean: meanAndError(sumDp, sumDp2, count),
  };
}

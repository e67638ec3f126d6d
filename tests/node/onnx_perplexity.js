// The ONNX export's real consumer: ONNX Runtime (npm onnxruntime-node) loads our model.onnx (+ model.onnx.data) and
// computes the project's perplexity protocol (core/runtime/perplexity.h): non-overlapping windows of L tokens of the
// given ids (BOS already first), each window's mean next-token NLL, PPL = exp(mean over windows).
//
// Usage:
//   node onnx_perplexity.js --model DIR/model.onnx --ids IDS.txt --seq-len L [--max-windows N]
//        [--expect PPL] [--tolerance 1e-3] [--check-kv]
//   node onnx_perplexity.js --manifest-dir DIR   (every DIR/*.json: entries {model, ids, seq_len, max_windows, expect, check_kv},
//                                                   as tests/export/onnx_export_test leaves them in the build tree)
// Prints one JSON line per model {model, windows, mean_nll, ppl[, kv_max_diff]}. Exit 0 when every --expect holds,
// 1 on a mismatch or error, 77 (ctest: skipped) when onnxruntime-node or the manifest is missing.
//
// Sessions use graphOptimizationLevel 'basic': ORT's default level fuses DequantizeLinear -> MatMul into a kernel that
// also quantizes the activations to int8, which is not the model Quark describes.
'use strict';
const fs = require('fs');
const path = require('path');
const {peerMissing} = require('./peer_missing.cjs');

const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(__dirname, '../..');
const ortPath = path.join(sourceDir, 'tests/peers/node_modules/onnxruntime-node');
if (!fs.existsSync(ortPath)) {
  peerMissing('onnxruntime-node is not installed: run scripts/install-test-peers.sh');
}
const ort = require(ortPath);
// One thread, no spinning: ONNX Runtime's pool spins while it waits, and ctest runs this beside other tests on 2 cores.
const kSessionOptions = {graphOptimizationLevel: 'basic', intraOpNumThreads: 1, interOpNumThreads: 1};

function parseArgs(argv) {
  const args = {maxWindows: 0, tolerance: 1e-3, checkKv: false};
  for (let i = 0; i < argv.length; ++i) {
    const next = () => argv[++i];
    switch (argv[i]) {
      case '--model': args.model = next(); break;
      case '--ids': args.ids = next(); break;
      case '--seq-len': args.seqLen = Number(next()); break;
      case '--max-windows': args.maxWindows = Number(next()); break;
      case '--expect': args.expect = Number(next()); break;
      case '--tolerance': args.tolerance = Number(next()); break;
      case '--check-kv': args.checkKv = true; break;
      case '--manifest-dir': args.manifestDir = next(); break;
      default: throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  return args;
}

// The protocol's windows: starts 0, L, 2L, ...; the last may be shorter and is kept with at least 2 tokens.
function windows(numTokens, seqLen, maxWindows) {
  const out = [];
  for (let start = 0; start < numTokens; start += seqLen) {
    const length = Math.min(seqLen, numTokens - start);
    if (length < 2) break;
    out.push([start, length]);
    if (maxWindows > 0 && out.length === maxWindows) break;
  }
  return out;
}

// Feeds for tokens `ids` at positions offset.., with the given past (or empty past tensors).
function feeds(session, ids, offset, past) {
  const n = ids.length, total = offset + n;
  const f = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, n]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(total).fill(1n), [1, total]),
    position_ids: new ort.Tensor('int64', BigInt64Array.from(ids.map((_, i) => BigInt(offset + i))), [1, n]),
  };
  for (const name of session.inputNames) {
    if (!name.startsWith('past_key_values.')) continue;
    const present = name.replace('past_key_values.', 'present.');
    f[name] = past ? past[present] : emptyPast(session, name);
  }
  return f;
}

function emptyPast(session, name) {
  const meta = session.inputMetadata.find((m) => m.name === name);
  // [batch, kv_heads, past, head_dim]: the fixed dims come from the model.
  const dims = meta && meta.shape ? meta.shape.map((d, i) => (typeof d === 'number' ? d : i === 0 ? 1 : 0)) : null;
  if (!dims) throw new Error(`${name}: no shape metadata`);
  return new ort.Tensor('float32', new Float32Array(0), dims);
}

// Mean next-token NLL of one window, in float64: log-sum-exp of each row minus the target's logit.
function windowNll(logits, ids, vocab) {
  let sum = 0;
  for (let t = 0; t + 1 < ids.length; ++t) {
    const row = logits.subarray(t * vocab, (t + 1) * vocab);
    let max = -Infinity;
    for (let v = 0; v < vocab; ++v) max = Math.max(max, row[v]);
    let s = 0;
    for (let v = 0; v < vocab; ++v) s += Math.exp(row[v] - max);
    sum += max + Math.log(s) - row[ids[t + 1]];
  }
  return sum / (ids.length - 1);
}

// The KV-cache path against the full pass: the window's first half, then the rest one token at a time with the
// presents fed back as pasts; returns the largest |difference| of the last logits.
async function kvMaxDiff(session, ids, fullLogits, vocab) {
  const split = Math.max(1, Math.floor(ids.length / 2));
  let out = await session.run(feeds(session, ids.slice(0, split), 0, null));
  let maxDiff = 0;
  for (let t = split; t < ids.length; ++t) {
    out = await session.run(feeds(session, [ids[t]], t, out));
    const got = out.logits.data, want = fullLogits.subarray(t * vocab, (t + 1) * vocab);
    for (let v = 0; v < vocab; ++v) maxDiff = Math.max(maxDiff, Math.abs(got[v] - want[v]));
  }
  return maxDiff;
}

async function evaluate(entry) {
  const ids = fs.readFileSync(entry.ids, 'utf8').split(/[\s,]+/).filter((s) => s.length).map(Number);
  const session = await ort.InferenceSession.create(entry.model, kSessionOptions);
  const nlls = [];
  let kvDiff;
  for (const [start, length] of windows(ids.length, entry.seqLen, entry.maxWindows)) {
    const w = ids.slice(start, start + length);
    const out = await session.run(feeds(session, w, 0, null));
    const vocab = out.logits.dims[2];
    nlls.push(windowNll(out.logits.data, w, vocab));
    if (entry.checkKv && kvDiff === undefined && session.inputNames.some((n) => n.startsWith('past_key_values.'))) {
      kvDiff = await kvMaxDiff(session, w.slice(0, 24), out.logits.data, vocab);
    }
  }
  const meanNll = nlls.reduce((a, b) => a + b, 0) / nlls.length;
  const result = {model: entry.model, windows: nlls.length, mean_nll: meanNll, ppl: Math.exp(meanNll)};
  if (kvDiff !== undefined) result.kv_max_diff = kvDiff;
  return result;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let entries;
  if (args.manifestDir) {
    const files = fs.existsSync(args.manifestDir) ?
        fs.readdirSync(args.manifestDir).filter((f) => f.endsWith('.json')).sort() : [];
    if (!files.length) {
      peerMissing(`no manifest in ${args.manifestDir} (run onnx_export_test first: it writes them)`);
    }
    entries = [];
    for (const file of files) {
      for (const e of JSON.parse(fs.readFileSync(path.join(args.manifestDir, file), 'utf8'))) {
        entries.push({model: e.model, ids: e.ids, seqLen: e.seq_len, maxWindows: e.max_windows || 0,
                      expect: e.expect, tolerance: e.tolerance || 1e-3,
                      checkKv: e.check_kv !== false});
      }
    }
  } else {
    if (!args.model || !args.ids || !(args.seqLen > 0)) throw new Error('need --model, --ids and --seq-len');
    entries = [args];
  }
  let failed = false;
  for (const entry of entries) {
    const result = await evaluate(entry);
    console.log(JSON.stringify(result));
    if (entry.expect !== undefined && !(Math.abs(result.ppl - entry.expect) <= entry.tolerance)) {
      console.error(`MISMATCH: ${entry.model}: ONNX Runtime ppl ${result.ppl}, expected ${entry.expect}`);
      failed = true;
    }
    if (result.kv_max_diff !== undefined && !(result.kv_max_diff <= 1e-3)) {
      console.error(`MISMATCH: ${entry.model}: KV-cache logits differ from the full pass by ${result.kv_max_diff}`);
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}

main().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});

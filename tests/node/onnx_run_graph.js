// Runs a one-input, one-output float32 ONNX graph in ONNX Runtime (npm onnxruntime-node, optimization 'basic') on raw
// little-endian float32 bytes: the op-level check of tests/export/onnx_export_test (a quantization subgraph against
// the engine's own fake quantization on the same input).
// Usage: node onnx_run_graph.js MODEL.onnx INPUT.bin DIM,DIM,... OUTPUT.bin   (exit 77: onnxruntime-node missing)
'use strict';
const fs = require('fs');
const path = require('path');

const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(__dirname, '../..');
const ortPath = path.join(sourceDir, 'tests/peers/node_modules/onnxruntime-node');
if (!fs.existsSync(ortPath)) {
  console.error('SKIP: onnxruntime-node is not installed: run scripts/install-test-peers.sh');
  process.exit(77);
}
const ort = require(ortPath);
// One thread, no spinning: ONNX Runtime's pool spins while it waits, and the tests run beside others on 2 cores.
const kSessionOptions = {graphOptimizationLevel: 'basic', intraOpNumThreads: 1, interOpNumThreads: 1};

async function main() {
  const [model, input, dims, output] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, kSessionOptions);
  const bytes = fs.readFileSync(input);
  const x = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const shape = dims.split(',').map(Number);
  const out = await session.run({[session.inputNames[0]]: new ort.Tensor('float32', x, shape)});
  const y = out[session.outputNames[0]].data;
  fs.writeFileSync(output, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}

main().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});

// What the GGUF node tests share before their first check: the source, build and shared folders (QUARK_SOURCE_DIR,
// QUARK_BINARY_DIR, QUARK_SHARED_DIR, else beside this file), node-llama-cpp's prebuilt llama.cpp (a missing peer
// skips, or fails under CI=true: peer_missing.cjs), the built binaries the test names (missing ones fail), and a CPU
// Llama handle (llama_cpp_peer.mjs's cpuLlama: one thread).
import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

import {cpuLlama} from './llama_cpp_peer.mjs';
import {peerMissing} from './peer_missing.cjs';

/// binaries: paths under the build folder ("core/cli/quark"). Returns {sourceDir, binaryDir, sharedDir, llama,
/// binaries: absolute paths in the same order}.
export async function llamaCppEnv(binaries) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(here, '../..');
  const binaryDir = process.env.QUARK_BINARY_DIR || path.join(sourceDir, 'build');
  const sharedDir = process.env.QUARK_SHARED_DIR || path.resolve(sourceDir, '../shared');
  const modules = path.join(sourceDir, 'tests/peers/node_modules');
  const entry = path.join(modules, 'node-llama-cpp/dist/index.js');
  if (!fs.existsSync(entry) || !fs.existsSync(path.join(modules, '@node-llama-cpp/linux-x64'))) {
    peerMissing('node-llama-cpp is not installed: run scripts/install-test-peers.sh');
  }
  const paths = binaries.map((b) => path.join(binaryDir, b));
  for (const file of paths) {
    if (!fs.existsSync(file)) {
      console.error(`FAIL: ${file} is not built`);
      process.exit(1);
    }
  }
  const llama = await cpuLlama();
  return {sourceDir, binaryDir, sharedDir, llama, binaries: paths};
}

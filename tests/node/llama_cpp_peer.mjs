// The folders of a node test against llama.cpp (node-llama-cpp's prebuilt under tests/peers) and the module itself:
// a missing package is peer_missing.cjs's skip (a failure under CI=true), an unbuilt quark binary a failure.
import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

import {peerMissing} from './peer_missing.cjs';

export async function llamaCppPeer() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(here, '../..');
  const binaryDir = process.env.QUARK_BINARY_DIR || path.join(sourceDir, 'build');
  const sharedDir = process.env.QUARK_SHARED_DIR || path.resolve(sourceDir, '../shared');
  const modules = path.join(sourceDir, 'tests/peers/node_modules');
  const entry = path.join(modules, 'node-llama-cpp/dist/index.js');
  if (!fs.existsSync(entry) || !fs.existsSync(path.join(modules, '@node-llama-cpp/linux-x64'))) {
    peerMissing('node-llama-cpp is not installed: run scripts/install-test-peers.sh');
  }
  const quark = path.join(binaryDir, 'core/cli/quark');
  if (!fs.existsSync(quark)) {
    console.error(`FAIL: ${quark} is not built`);
    process.exit(1);
  }
  return {sourceDir, binaryDir, sharedDir, quark, nodeLlamaCpp: await import(pathToFileURL(entry).href)};
}

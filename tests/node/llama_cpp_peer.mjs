// What the node GGUF tests share before their first check: the source, build and shared folders (QUARK_SOURCE_DIR,
// QUARK_BINARY_DIR, QUARK_SHARED_DIR, else relative to this file) and node-llama-cpp, imported from tests/peers (a
// missing peer goes through peer_missing.cjs: skipped, or a failure under CI=true).
import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath, pathToFileURL} from 'node:url';

import {peerMissing} from './peer_missing.cjs';

const here = path.dirname(fileURLToPath(import.meta.url));

export const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(here, '../..');
export const binaryDir = process.env.QUARK_BINARY_DIR || path.join(sourceDir, 'build');
export const sharedDir = process.env.QUARK_SHARED_DIR || path.resolve(sourceDir, '../shared');

/// node-llama-cpp's module ({getLlama, LlamaLogLevel, ...}).
export async function importNodeLlamaCpp() {
  const modules = path.join(sourceDir, 'tests/peers/node_modules');
  const entry = path.join(modules, 'node-llama-cpp/dist/index.js');
  if (!fs.existsSync(entry) || !fs.existsSync(path.join(modules, '@node-llama-cpp/linux-x64'))) {
    peerMissing('node-llama-cpp is not installed: run scripts/install-test-peers.sh');
  }
  return import(pathToFileURL(entry).href);
}

/// A CPU llama.cpp handle with errors-only logging and one thread per context. ggml's threads spin while they wait
/// for work, and ctest runs these tests beside others on a 2-core machine: with every core's thread, a node test took
/// 4-5x the CPU time of one thread and starved the tests beside it (gguf_consumer_test's F32/Q8_0/Q4_K_M cases beside
/// two busy processes: 112 s of CPU and 138 s wall with every core, 24 s and 52 s with one thread, quark's children
/// also held to one thread as in every other test of the suite).
export async function cpuLlama() {
  const {getLlama, LlamaLogLevel} = await importNodeLlamaCpp();
  return getLlama({gpu: false, build: 'never', logLevel: LlamaLogLevel.error, maxThreads: 1});
}

/// The built file `relative` under the build folder; exits 1 (FAIL) when it is not built.
export function builtFile(relative) {
  const file = path.join(binaryDir, relative);
  if (!fs.existsSync(file)) {
    console.error(`FAIL: ${file} is not built`);
    process.exit(1);
  }
  return file;
}

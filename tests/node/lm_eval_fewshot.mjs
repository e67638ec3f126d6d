// An independent check of `quark eval --num-fewshot` and of GSM8K: rebuilds lm-evaluation-harness's few-shot
// prompts from the task files (lm_eval_docs.mjs) with its sampler's rules — Python's random.Random(1234).sample
// reimplemented here (MT19937's init_by_array, getrandbits, _randbelow, CPython 3.11's sample), k + 1 drawn and the
// evaluated doc dropped, first_n per subject for mmlu, description + (example + "\n\n") * k + the doc — and compares
// every request's context with quark's --log-samples; re-applies acc to the log-likelihoods, and for gsm8k
// gsm8k.yaml's filters (strict-match, flexible-extract as JS regexes) and exact_match's normalisation to each
// generation. Exit 0 = pass, 1 = fail. Env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR.
import {execFileSync} from 'node:child_process';
import path from 'node:path';

import {builtFile, sharedDir} from './llama_cpp_peer.mjs';
import {taskBuilders} from './lm_eval_docs.mjs';

const tasksDir = path.join(sharedDir, 'fixtures/tasks');
const quark = builtFile('core/cli/quark');

class PythonRandom {
  constructor(seed) {  // seed < 2**32: init_by_array([seed])
    const mt = new Array(624);
    mt[0] = 19650218;
    for (let i = 1; i < 624; ++i) mt[i] = (Math.imul(1812433253, mt[i - 1] ^ (mt[i - 1] >>> 30)) + i) >>> 0;
    const key = [seed >>> 0];
    let i = 1, j = 0;
    for (let k = Math.max(624, key.length); k > 0; --k) {
      mt[i] = ((mt[i] ^ Math.imul(mt[i - 1] ^ (mt[i - 1] >>> 30), 1664525)) + key[j] + j) >>> 0;
      ++i; ++j;
      if (i >= 624) { mt[0] = mt[623]; i = 1; }
      if (j >= key.length) j = 0;
    }
    for (let k = 623; k > 0; --k) {
      mt[i] = ((mt[i] ^ Math.imul(mt[i - 1] ^ (mt[i - 1] >>> 30), 1566083941)) - i) >>> 0;
      ++i;
      if (i >= 624) { mt[0] = mt[623]; i = 1; }
    }
    mt[0] = 0x80000000;
    this.mt = mt;
    this.index = 624;
  }
  next32() {
    const mt = this.mt;
    if (this.index >= 624) {
      for (let k = 0; k < 624; ++k) {
        const y = (mt[k] & 0x80000000) | (mt[(k + 1) % 624] & 0x7fffffff);
        mt[k] = (mt[(k + 397) % 624] ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0)) >>> 0;
      }
      this.index = 0;
    }
    let y = mt[this.index++];
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }
  randbelow(n) {
    const k = n.toString(2).length;
    let r = this.next32() >>> (32 - k);
    while (r >= n) r = this.next32() >>> (32 - k);
    return r;
  }
  sample(n, k) {
    let setsize = 21;
    if (k > 5) setsize += 4 ** Math.ceil(Math.log(k * 3) / Math.log(4));
    const result = [];
    if (n <= setsize) {
      const pool = [...Array(n).keys()];
      for (let i = 0; i < k; ++i) {
        const j = this.randbelow(n - i);
        result.push(pool[j]);
        pool[j] = pool[n - i - 1];
      }
      return result;
    }
    const selected = new Set();
    for (let i = 0; i < k; ++i) {
      let j = this.randbelow(n);
      while (selected.has(j)) j = this.randbelow(n);
      selected.add(j);
      result.push(j);
    }
    return result;
  }
}

const builders = taskBuilders(tasksDir);
// The docs of `task` (first `limit`) with `k` shots from the whole file, as lm-eval's fewshot_context.
function fewshotDocs(task, limit, k) {
  const pool = builders[task](0);
  const docs = builders[task](limit);
  const groups = new Map();
  pool.forEach((d, i) => groups.set(d.group, [...(groups.get(d.group) || []), i]));
  const rngs = new Map();
  return docs.map((doc) => {
    const members = groups.get(doc.group);
    let drawn = members;
    if (task !== 'mmlu') {
      if (!rngs.has(doc.group)) rngs.set(doc.group, new PythonRandom(1234));
      drawn = rngs.get(doc.group).sample(members.length, k + 1).map((i) => members[i]);
    }
    const shots = drawn.filter((i) => pool[i].example !== doc.example).slice(0, k);
    const prefix = doc.description + shots.map((i) => pool[i].example + '\n\n').join('');
    return {...doc, requests: doc.requests.map(([c, t]) => [prefix + c.slice(doc.description.length), t])};
  });
}

function findAll(re, text) { return [...text.matchAll(re)]; }
function strictMatch(text) {
  const m = findAll(/#### (\-?[0-9\.\,]+)/g, text);
  return m.length ? m[0][1].trim() : '[invalid]';
}
function flexibleExtract(text) {
  const m = findAll(/(-?[$0-9.,]{2,})|(-?[0-9]+)/g, text);
  if (!m.length) return '[invalid]';
  const last = m.at(-1);
  return (last[1] || last[2]).trim();
}
const normalize = (s) => s.replace(/,/g, '').replace(/\$/g, '').replace(/^[\s\S]*#### /, '')
  .replace(/\.(?=\n?$)/g, '').toLowerCase();

let failures = 0;
const check = (ok, what) => { if (!ok) { console.error('FAIL:', what); ++failures; } };
const near = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
const argmax = (xs) => xs.reduce((best, x, i) => (x > xs[best] ? i : best), 0);
function run(tasks, limit, k) {
  const args = ['eval', '--model', path.join(sharedDir, 'fixtures/tinyllama-a'), '--tasks', tasks.join(','),
    '--limit', String(limit), '--tasks-dir', tasksDir, '--json', '--log-samples'];
  if (k !== undefined) args.push('--num-fewshot', String(k));
  return JSON.parse(execFileSync(quark, args, {encoding: 'utf8', maxBuffer: 1 << 28})).tasks;
}

const runs = [
  {tasks: ['arc_easy', 'piqa', 'winogrande', 'lambada_openai'], limit: 4, k: 2},
  {tasks: ['mmlu'], limit: 1, k: undefined, expect: 5},   // lm-eval's default for mmlu
  {tasks: ['gsm8k'], limit: 2, k: undefined, expect: 5},  // and for gsm8k
];
for (const {tasks, limit, k, expect} of runs) {
  for (const result of run(tasks, limit, k)) {
    const shots = k ?? expect;
    check(result.num_fewshot === shots, `${result.task}: num_fewshot ${result.num_fewshot}, not ${shots}`);
    const docs = fewshotDocs(result.task, limit, shots);
    check(result.samples.length === docs.length, `${result.task}: ${result.samples.length} samples`);
    const acc = [], strict = [], flexible = [];
    result.samples.forEach((s, i) => {
      const doc = docs[i];
      const label = `${result.task} ${s.id}`;
      if (result.task === 'gsm8k') {
        check(s.context === doc.requests[0][0], `${label}: context differs`);
        check(s.target === doc.requests[0][1], `${label}: target differs`);
        const f = {'strict-match': strictMatch(s.generation), 'flexible-extract': flexibleExtract(s.generation)};
        for (const name of Object.keys(f)) {
          check(s.filtered[name] === f[name], `${label}: ${name} ${s.filtered[name]} vs ${f[name]}`);
        }
        strict.push(normalize(f['strict-match']) === normalize(doc.requests[0][1]) ? 1 : 0);
        flexible.push(normalize(f['flexible-extract']) === normalize(doc.requests[0][1]) ? 1 : 0);
        return;
      }
      s.requests.forEach((r, c) => check(r.context === doc.requests[c][0] && r.continuation === doc.requests[c][1],
        `${label} request ${c}: context differs`));
      acc.push(doc.choices ? (argmax(s.loglikelihoods) === doc.gold ? 1 : 0) : (s.is_greedy[0] ? 1 : 0));
    });
    if (result.task === 'gsm8k') {
      check(near(result.metrics.exact_match_strict_match.value, mean(strict)), `gsm8k strict ${mean(strict)}`);
      check(near(result.metrics.exact_match_flexible_extract.value, mean(flexible)), `gsm8k flexible ${mean(flexible)}`);
    } else {
      check(near(result.metrics.acc.value, mean(acc)), `${result.task}: acc ${result.metrics.acc.value} vs ${mean(acc)}`);
    }
    console.log(JSON.stringify({task: result.task, num_fewshot: result.num_fewshot, examples: result.samples.length,
      metrics: result.metrics}));
  }
}
// The JS generator against CPython's values (random.Random(1234)): the same numbers the C++ test pins.
const r = new PythonRandom(1234);
check(JSON.stringify(r.sample(1319, 6)) === '[902,239,15,185,1192,71]', 'PythonRandom sample(1319, 6)');
check(JSON.stringify(new PythonRandom(1234).sample(10, 6)) === '[7,1,0,9,4,6]', 'PythonRandom sample(10, 6)');
console.log(`${failures} failures`);
process.exit(failures === 0 ? 0 : 1);

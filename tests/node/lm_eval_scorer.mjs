// An independent scorer for `quark eval --tasks ... --json --log-samples`: builds each task's requests from the task
// files with lm-evaluation-harness's rules (its YAMLs' doc_to_text / doc_to_choice / doc_to_target, target delimiter
// " ", winogrande's partial scoring, mmlu's description), re-adds the continuation tokens' log-probs that the model
// gave, and applies lm-eval's metrics (acc = argmax ll, acc_norm = argmax ll / len(choice) in characters with numpy's
// first-maximum argmax, lambada acc = all tokens greedy and perplexity = exp(-mean ll), stderr = sample std / sqrt(n)).
// Compares example by example with quark's JSON.
//
// Usage: node lm_eval_scorer.mjs (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR, QUARK_SHARED_DIR). Exit 0 = pass, 1 = fail.
import {execFileSync} from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {fileURLToPath} from 'node:url';

import {taskBuilders} from './lm_eval_docs.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(here, '../..');
const binaryDir = process.env.QUARK_BINARY_DIR || path.join(sourceDir, 'build');
const sharedDir = process.env.QUARK_SHARED_DIR || path.resolve(sourceDir, '../shared');
const tasksDir = path.join(sharedDir, 'fixtures/tasks');
const quark = path.join(binaryDir, 'core/cli/quark');
const kLimit = 8;
const kMmluLimit = 1;  // per subject: 57 questions

const taskDocs = taskBuilders(tasksDir);
const builders = Object.fromEntries(Object.entries(taskDocs).filter(([name]) => name !== 'gsm8k')
  .map(([name, build]) => [name, () => build(name === 'mmlu' ? kMmluLimit : kLimit)]));
const argmax = (xs) => xs.reduce((best, x, i) => (x > xs[best] ? i : best), 0);
function meanStderr(xs) {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  const ss = xs.reduce((a, x) => a + (x - m) * (x - m), 0);
  return {value: m, stderr: Math.sqrt(ss / (xs.length - 1)) / Math.sqrt(xs.length)};
}

let failures = 0;
const check = (ok, what) => { if (!ok) { console.error('FAIL:', what); ++failures; } };
const near = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
const tasks = Object.keys(builders);
const run = (names, limit) => JSON.parse(execFileSync(quark, ['eval', '--model',
  path.join(sharedDir, 'fixtures/tinyllama-a'), '--tasks', names.join(','), '--num-fewshot', '0', '--limit',
  String(limit), '--tasks-dir', tasksDir, '--json', '--log-samples'], {encoding: 'utf8', maxBuffer: 1 << 28})).tasks;
const out = {tasks: [...run(tasks.filter((t) => t !== 'mmlu'), kLimit), ...run(['mmlu'], kMmluLimit)]};
for (const result of out.tasks) {
  const docs = builders[result.task]();
  check(result.samples.length === docs.length, `${result.task}: ${result.samples.length} samples, not ${docs.length}`);
  const samples = result.samples;
  const acc = [], accNorm = [], lls = [];
  samples.forEach((s, i) => {
    const doc = docs[i];
    const label = `${result.task} ${s.id}`;
    check(s.requests.length === doc.requests.length, `${label}: ${s.requests.length} requests`);
    s.requests.forEach((r, c) => {
      check(r.context === doc.requests[c][0] && r.continuation === doc.requests[c][1], `${label} request ${c}: text`);
      const sum = r.token_logprobs.reduce((a, b) => a + b, 0);
      check(near(sum, s.loglikelihoods[c]), `${label} request ${c}: ll ${s.loglikelihoods[c]} vs sum ${sum}`);
    });
    check(s.gold === doc.gold, `${label}: gold ${s.gold} vs ${doc.gold}`);
    if (doc.choices) {
      const pred = argmax(s.loglikelihoods);
      const predNorm = argmax(s.loglikelihoods.map((ll, c) => ll / [...doc.choices[c]].length));
      check(pred === s.pred && predNorm === s.pred_norm, `${label}: pred ${s.pred}/${s.pred_norm} vs ${pred}/${predNorm}`);
      acc.push(pred === doc.gold ? 1 : 0);
      accNorm.push(predNorm === doc.gold ? 1 : 0);
    } else {
      acc.push(s.is_greedy[0] ? 1 : 0);
      lls.push(s.loglikelihoods[0]);
    }
  });
  const ours = meanStderr(acc);
  check(near(result.metrics.acc.value, ours.value) && near(result.metrics.acc.stderr, ours.stderr),
    `${result.task}: acc ${JSON.stringify(result.metrics.acc)} vs ${JSON.stringify(ours)}`);
  if (result.metrics.acc_norm) {
    const norm = meanStderr(accNorm);
    check(near(result.metrics.acc_norm.value, norm.value), `${result.task}: acc_norm ${result.metrics.acc_norm.value}`);
  }
  if (result.metrics.perplexity) {
    const ppl = Math.exp(-lls.reduce((a, b) => a + b, 0) / lls.length);
    check(near(result.metrics.perplexity.value, ppl), `${result.task}: perplexity ${result.metrics.perplexity.value}`);
  }
  console.log(JSON.stringify({task: result.task, examples: samples.length, metrics: result.metrics}));
}
check(out.tasks.length === tasks.length, `${out.tasks.length} tasks scored`);
console.log(`${failures} failures`);
process.exit(failures === 0 ? 0 : 1);

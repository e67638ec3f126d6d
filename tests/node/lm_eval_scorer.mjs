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

const here = path.dirname(fileURLToPath(import.meta.url));
const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(here, '../..');
const binaryDir = process.env.QUARK_BINARY_DIR || path.join(sourceDir, 'build');
const sharedDir = process.env.QUARK_SHARED_DIR || path.resolve(sourceDir, '../shared');
const tasksDir = path.join(sharedDir, 'fixtures/tasks');
const quark = path.join(binaryDir, 'core/cli/quark');
const kLimit = 8;
const kMmluLimit = 1;  // per subject: 57 questions

const jsonl = (f) => fs.readFileSync(path.join(tasksDir, f), 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));

function csv(text) {  // RFC 4180
  const rows = [];
  let row = [], field = '', i = 0, quoted = false;
  while (i < text.length) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i += 2; continue; }
      if (c === '"') { quoted = false; ++i; continue; }
      field += c; ++i; continue;
    }
    if (c === '"') { quoted = true; ++i; continue; }
    if (c === ',') { row.push(field); field = ''; ++i; continue; }
    if (c === '\n' || c === '\r') {
      row.push(field); field = ''; rows.push(row); row = [];
      i += (c === '\r' && text[i + 1] === '\n') ? 2 : 1;
      continue;
    }
    field += c; ++i;
  }
  if (field !== '' || row.length) { row.push(field); rows.push(row); }
  return rows;
}

// task -> [{requests: [[context, continuation]], choices, gold}]
const builders = {
  arc_easy: () => jsonl('arc_easy_test.jsonl').slice(0, kLimit).map(arc),
  arc_challenge: () => jsonl('arc_challenge_test.jsonl').slice(0, kLimit).map(arc),
  piqa: () => {
    const labels = fs.readFileSync(path.join(tasksDir, 'piqa_valid-labels.lst'), 'utf8').split('\n');
    return jsonl('piqa_valid.jsonl').slice(0, kLimit).map((d, i) => same(`Question: ${d.goal}\nAnswer:`,
      [d.sol1, d.sol2], Number(labels[i])));
  },
  winogrande: () => jsonl('winogrande_xl_dev.jsonl').slice(0, kLimit).map((d) => {
    const idx = d.sentence.indexOf('_');
    const target = d.sentence.slice(idx + 1).trim();
    const choices = [d.option1, d.option2].map((o) => d.sentence.slice(0, idx) + o);
    return {requests: choices.map((c) => [c, ' ' + target]), choices, gold: {1: 0, 2: 1}[d.answer]};
  }),
  lambada_openai: () => jsonl('lambada_test.jsonl').slice(0, kLimit).map((d) => {
    const words = d.text.split(' ');
    return {requests: [[words.slice(0, -1).join(' '), ' ' + words.at(-1)]], choices: null, gold: 0};
  }),
  mmlu: () => fs.readdirSync(path.join(tasksDir, 'mmlu_test')).filter((f) => f.endsWith('_test.csv')).sort()
    .flatMap((f) => {
      const subject = f.slice(0, -'_test.csv'.length).replaceAll('_', ' ');
      const text = fs.readFileSync(path.join(tasksDir, 'mmlu_test', f), 'utf8');
      return csv(text).slice(0, kMmluLimit).map(([q, a, b, c, d, key]) => same(
        `The following are multiple choice questions (with answers) about ${subject}.\n\n` +
        `${q.trim()}\nA. ${a}\nB. ${b}\nC. ${c}\nD. ${d}\nAnswer:`, ['A', 'B', 'C', 'D'], 'ABCD'.indexOf(key)));
    }),
};
function same(context, choices, gold) {
  return {requests: choices.map((c) => [context, ' ' + c]), choices, gold};
}
function arc(d) {
  return same(`Question: ${d.question}\nAnswer:`, d.choices.text, d.choices.label.indexOf(d.answerKey));
}
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

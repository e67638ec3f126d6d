// lm-evaluation-harness's docs for the task files, rebuilt independently of quark (its YAMLs' doc_to_text /
// doc_to_choice / doc_to_target, target delimiter " ", winogrande's partial scoring, mmlu's description), shared by
// lm_eval_scorer.mjs and lm_eval_fewshot.mjs. Each doc: {requests: [[context, continuation]], choices, gold,
// description, example (the doc as a labeled few-shot example), group (mmlu's subject)}.
import fs from 'node:fs';
import path from 'node:path';

export function taskBuilders(tasksDir) {
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
    arc_easy: (limit) => jsonl('arc_easy_test.jsonl').slice(0, limit || undefined).map(arc),
    arc_challenge: (limit) => jsonl('arc_challenge_test.jsonl').slice(0, limit || undefined).map(arc),
    piqa: (limit) => {
      const labels = fs.readFileSync(path.join(tasksDir, 'piqa_valid-labels.lst'), 'utf8').split('\n');
      return jsonl('piqa_valid.jsonl').slice(0, limit || undefined).map((d, i) => same(`Question: ${d.goal}\nAnswer:`,
        [d.sol1, d.sol2], Number(labels[i])));
    },
    winogrande: (limit) => jsonl('winogrande_xl_dev.jsonl').slice(0, limit || undefined).map((d) => {
      const idx = d.sentence.indexOf('_');
      const target = d.sentence.slice(idx + 1).trim();
      const choices = [d.option1, d.option2].map((o) => d.sentence.slice(0, idx) + o);
      const gold = {1: 0, 2: 1}[d.answer];
      return {requests: choices.map((c) => [c, ' ' + target]), choices, gold, example: `${choices[gold]} ${target}`};
    }),
    lambada_openai: (limit) => jsonl('lambada_test.jsonl').slice(0, limit || undefined).map((d) => {
      const words = d.text.split(' ');
      return {requests: [[words.slice(0, -1).join(' '), ' ' + words.at(-1)]], choices: null, gold: 0, example: d.text};
    }),
    mmlu: (limit) => fs.readdirSync(path.join(tasksDir, 'mmlu_test')).filter((f) => f.endsWith('_test.csv')).sort()
      .flatMap((f) => {
        const subject = f.slice(0, -'_test.csv'.length).replaceAll('_', ' ');
        const text = fs.readFileSync(path.join(tasksDir, 'mmlu_test', f), 'utf8');
        const description = `The following are multiple choice questions (with answers) about ${subject}.\n\n`;
        return csv(text).slice(0, limit || undefined).map(([q, a, b, c, d, key]) => ({...same(
          `${q.trim()}\nA. ${a}\nB. ${b}\nC. ${c}\nD. ${d}\nAnswer:`, ['A', 'B', 'C', 'D'], 'ABCD'.indexOf(key)),
        description, group: subject}));
      }),
    gsm8k: (limit) => jsonl('gsm8k_test.jsonl').slice(0, limit || undefined).map((d) => {
      const context = `Question: ${d.question}\nAnswer:`;
      return {requests: [[context, d.answer]], choices: null, gold: 0, example: `${context} ${d.answer}`};
    }),
  };
  function same(context, choices, gold) {
    return {requests: choices.map((c) => [context, ' ' + c]), choices, gold, example: `${context} ${choices[gold]}`};
  }
  function arc(d) {
    return same(`Question: ${d.question}\nAnswer:`, d.choices.text, d.choices.label.indexOf(d.answerKey));
  }
  // Every request's context begins with the description (mmlu's), as lm-eval's prompt.
  for (const name of Object.keys(builders)) {
    const build = builders[name];
    builders[name] = (limit) => build(limit).map((doc) => ({description: '', group: '', ...doc,
      requests: doc.requests.map(([c, t]) => [(doc.description || '') + c, t])}));
  }
  return builders;
}

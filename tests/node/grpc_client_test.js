// The second-language client: Node (@grpc/grpc-js + @grpc/proto-loader loading proto/ at run time) submits a job
// to a real quarkd with a spawned noop test worker, follows WatchJob to the end and reads the job back.
// Usage: node grpc_client_test.js  (env: QUARK_SOURCE_DIR, QUARK_BINARY_DIR; exits 0 on success)
'use strict';
const assert = require('assert');
const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const {peerMissing} = require('./peer_missing.cjs');

const sourceDir = process.env.QUARK_SOURCE_DIR || path.resolve(__dirname, '../..');
const binaryDir = process.env.QUARK_BINARY_DIR || path.resolve(sourceDir, 'build');
const modules = path.join(sourceDir, 'tests/peers/node_modules');
if (!fs.existsSync(path.join(modules, '@grpc/grpc-js'))) {
  peerMissing('@grpc/grpc-js is not installed: run scripts/install-test-peers.sh');
}
const grpc = require(path.join(modules, '@grpc/grpc-js'));
const protoLoader = require(path.join(modules, '@grpc/proto-loader'));

function startQuarkd(dir, extraArgs = []) {
  const ready = path.join(dir, 'ready.json');
  const log = fs.openSync(path.join(dir, 'quarkd.log'), 'w');
  const child = childProcess.spawn(path.join(binaryDir, 'server/quarkd'), [...extraArgs,
    '--data-dir', path.join(dir, 'data'), '--listen', '127.0.0.1:0', '--metrics-listen', '',
    '--workers', '1', '--worker-binary', path.join(binaryDir, 'tests/worker/quark-test-worker'),
    '--worker-arg=--test-mode=sleep:0.5', '--worker-arg=--lease-wait-ms=1000',
    `--worker-arg=--data-dir=${path.join(dir, 'worker')}`, `--worker-arg=--allowed-roots=${dir}`,
    '--allowed-roots', dir, '--heartbeat-interval-ms', '200', '--ready-file', ready,
  ], {stdio: ['ignore', log, log]});
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + 30000;
    const poll = () => {
      if (fs.existsSync(ready)) return resolve({child, port: JSON.parse(fs.readFileSync(ready)).grpc_port});
      if (child.exitCode !== null || Date.now() > deadline) {
        return reject(new Error('quarkd did not start:\n' + fs.readFileSync(path.join(dir, 'quarkd.log'))));
      }
      setTimeout(poll, 50);
    };
    poll();
  });
}

function loadService() {
  const definition = protoLoader.loadSync('quark/v1/service.proto', {
    includeDirs: [path.join(sourceDir, 'proto')], keepCase: true, longs: String, enums: String, defaults: false,
  });
  return grpc.loadPackageDefinition(definition).quark.v1.QuantizationService;
}

const call = (client, method, request) => new Promise((resolve, reject) =>
  client[method](request, (err, response) => (err ? reject(err) : resolve(response))));

function watch(client, id) {
  return new Promise((resolve, reject) => {
    const events = [];
    const stream = client.WatchJob({id, after_sequence: 0});
    stream.on('data', (event) => {
      events.push(event);
      if (event.state && ['JOB_STATE_SUCCEEDED', 'JOB_STATE_FAILED', 'JOB_STATE_CANCELLED'].includes(event.state)) {
        stream.cancel();
        resolve(events);
      }
    });
    stream.on('error', (err) => (err.code === grpc.status.CANCELLED ? resolve(events) : reject(err)));
    stream.on('end', () => resolve(events));
  });
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quark-node-'));
  const {child, port} = await startQuarkd(dir);
  try {
    const Service = loadService();
    const client = new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const presets = await call(client, 'ListPresets', {});
    assert.ok(Array.isArray(presets.presets), 'ListPresets answers a list');
    const job = await call(client, 'SubmitJob', {
      request_id: 'node-1',
      spec: {model_uri: `file://${dir}/models/m`, preset: 'fp8', output_uri: `file://${dir}/out`,
        labels: {client: 'node'}},
    });
    assert.ok(job.id, 'SubmitJob returns a job id');
    assert.strictEqual(job.state, 'JOB_STATE_QUEUED');
    const events = await watch(client, job.id);
    const sequences = events.map((e) => Number(e.sequence));
    assert.deepStrictEqual(sequences, [...sequences].sort((a, b) => a - b), 'events arrive in sequence order');
    assert.ok(events.some((e) => e.progress && e.progress.num_layers > 0), 'progress events stream through');
    assert.strictEqual(events[events.length - 1].state, 'JOB_STATE_SUCCEEDED');
    const done = await call(client, 'GetJob', {id: job.id});
    assert.strictEqual(done.state, 'JOB_STATE_SUCCEEDED');
    assert.strictEqual(done.spec.labels.client, 'node');
    const again = await call(client, 'SubmitJob', {request_id: 'node-1', spec: job.spec});
    assert.strictEqual(again.id, job.id, 'a repeated request_id returns the same job');
    client.close();
    console.log(`node client: job ${job.id} SUCCEEDED after ${events.length} events`);
  } finally {
    child.kill('SIGTERM');
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

// The same client against a quarkd with a tokens file: no token is UNAUTHENTICATED, a viewer cannot submit
// (PERMISSION_DENIED), a submitter's token in the metadata works, and another tenant sees nothing of its job.
async function authenticated() {
  const crypto = require('crypto');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'quark-node-auth-'));
  const sha = (token) => crypto.createHash('sha256').update(token).digest('hex');
  const tokens = {submitter: 'qk_node_submitter_1', viewer: 'qk_node_viewer_2', other: 'qk_node_other_3'};
  fs.writeFileSync(path.join(dir, 'tokens.json'), JSON.stringify({tokens: [
    {name: 'node-ci', sha256: sha(tokens.submitter), tenant: 'node', role: 'submitter'},
    {name: 'node-view', sha256: sha(tokens.viewer), tenant: 'node', role: 'viewer'},
    {name: 'other-ci', sha256: sha(tokens.other), tenant: 'other', role: 'submitter'},
  ]}), {mode: 0o600});
  const {child, port} = await startQuarkd(dir, ['--tokens-file', path.join(dir, 'tokens.json')]);
  const withToken = (token) => {
    const metadata = new grpc.Metadata();
    if (token) metadata.add('authorization', `Bearer ${token}`);
    return metadata;
  };
  const callAs = (client, method, request, token) => new Promise((resolve, reject) =>
    client[method](request, withToken(token), (err, response) => (err ? reject(err) : resolve(response))));
  try {
    const Service = loadService();
    const client = new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const spec = {model_uri: `file://${dir}/models/m`, preset: 'fp8', output_uri: `file://${dir}/out`};
    await assert.rejects(callAs(client, 'ListPresets', {}, ''), (e) => e.code === grpc.status.UNAUTHENTICATED);
    await assert.rejects(callAs(client, 'SubmitJob', {spec}, tokens.viewer),
      (e) => e.code === grpc.status.PERMISSION_DENIED);
    const job = await callAs(client, 'SubmitJob', {spec}, tokens.submitter);
    assert.strictEqual(job.tenant, 'node');
    const seen = await callAs(client, 'GetJob', {id: job.id}, tokens.viewer);
    assert.strictEqual(seen.id, job.id);
    await assert.rejects(callAs(client, 'GetJob', {id: job.id}, tokens.other),
      (e) => e.code === grpc.status.NOT_FOUND);
    const others = await callAs(client, 'ListJobs', {}, tokens.other);
    assert.strictEqual((others.jobs || []).length, 0, 'another tenant lists none of it');
    client.close();
    console.log(`node client (tokens): job ${job.id} of tenant node; refusals as expected`);
  } finally {
    child.kill('SIGTERM');
    fs.rmSync(dir, {recursive: true, force: true});
  }
}

main().then(authenticated).catch((err) => {
  console.error(err);
  process.exit(1);
});

// deploy/kubernetes/ checked offline: every object validates against the Kubernetes OpenAPI schemas (npm
// kubernetes-models), and the pieces fit together: Secrets, ConfigMap keys and selectors that the Deployments
// name exist, quarkd.toml's keys are flags `quarkd --help` lists, the workers' flags are quark-worker's, GPUs
// are requested, the HPA scales the worker Deployment on a metric quarkd exports, probes use grpc.health.v1.
// Exit 77 (skipped) when tests/peers is not installed.
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";
import assert from "node:assert/strict";
import { peerMissing } from "./peer_missing.cjs";

const root = process.env.QUARK_SOURCE_DIR ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
const build = process.env.QUARK_BINARY_DIR ?? path.join(root, "build");
const peers = path.join(root, "tests/peers");
const require = createRequire(path.join(peers, "package.json"));
let YAML;
try {
  YAML = require("yaml");
  if (!existsSync(path.join(peers, "node_modules/kubernetes-models/v1/index.js"))) throw new Error("no kubernetes-models");
} catch (error) {
  peerMissing(`tests/peers not installed (bash scripts/install-test-peers.sh): ${error.message}`);
}

// kubernetes-models is ESM only: its per-group modules are imported by path.
async function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  const file = path.join(peers, "node_modules/kubernetes-models", ...(group ? [group, version] : [version]), "index.js");
  const module = await import(pathToFileURL(file).href);
  assert.ok(module[kind], `kubernetes-models has no ${apiVersion} ${kind}`);
  return module[kind];
}

// The validator itself rejects a bad object (so a passing run means something).
const Deployment = await modelFor("apps/v1", "Deployment");
assert.throws(() => new Deployment({ metadata: { name: "x" }, spec: { replicas: "three", selector: {}, template: {} } }).validate());

const dir = path.join(root, "deploy/kubernetes");
const kustomization = YAML.parse(readFileSync(path.join(dir, "kustomization.yaml"), "utf8"));
const files = readdirSync(dir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml").sort();
assert.deepEqual([...kustomization.resources].sort(), files, "kustomization.yaml lists every manifest");

const objects = [];
for (const file of files) {
  for (const doc of YAML.parseAllDocuments(readFileSync(path.join(dir, file), "utf8"))) {
    assert.equal(doc.errors.length, 0, `${file}: ${doc.errors}`);
    const object = doc.toJS();
    const Model = await modelFor(object.apiVersion, object.kind);
    try {
      new Model(object).validate();
    } catch (error) {
      assert.fail(`${file}: ${object.kind}/${object.metadata?.name} does not validate: ${error.message}`);
    }
    objects.push(object);
  }
}
const find = (kind, name) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  assert.ok(found, `no ${kind} ${name}`);
  return found;
};
const matches = (selector, labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

function checkSecretRefs(podSpec) {
  for (const container of podSpec.containers) {
    for (const env of container.env ?? []) {
      const ref = env.valueFrom?.secretKeyRef;
      if (!ref) continue;
      const secret = find("Secret", ref.name);
      assert.ok(ref.key in (secret.stringData ?? secret.data ?? {}), `Secret ${ref.name} has no key ${ref.key}`);
    }
  }
  for (const volume of podSpec.volumes ?? []) {
    if (volume.secret) find("Secret", volume.secret.secretName);
    if (volume.configMap) find("ConfigMap", volume.configMap.name);
  }
}

function flagsOf(binary) {
  const help = execFileSync(binary, ["--help"], { encoding: "utf8" });
  return new Set([...help.matchAll(/--([a-z][a-z0-9-]*)/g)].map((m) => m[1]));
}

// quarkd: replicas on the shared store, probes on grpc.health.v1, config keys that quarkd knows.
const quarkd = find("Deployment", "quarkd");
assert.ok(quarkd.spec.replicas >= 2, "quarkd runs replicated");
const quarkdPod = quarkd.spec.template.spec;
checkSecretRefs(quarkdPod);
const server = quarkdPod.containers[0];
assert.ok(server.env.some((e) => e.name === "QUARKD_STORE" && e.valueFrom.secretKeyRef.name === "quarkd-postgres"));
for (const probe of [server.readinessProbe, server.livenessProbe]) {
  assert.ok(probe.grpc || probe.exec.command[0] === "grpc_health_probe", "probes speak grpc.health.v1");
}
assert.ok(server.readinessProbe.exec.command.includes("-service=quark.v1.QuantizationService"));
const toml = find("ConfigMap", "quarkd-config").data["quarkd.toml"];
const quarkdBinary = path.join(build, "server/quarkd");
if (existsSync(quarkdBinary)) {
  const known = flagsOf(quarkdBinary);
  for (const [, key] of toml.matchAll(/^([a-z][a-z0-9-]*)\s*=/gm)) assert.ok(known.has(key), `quarkd has no --${key}`);
  const drain = Number(/drain-grace-ms = (\d+)/.exec(toml)[1]);
  assert.ok(drain / 1000 < quarkdPod.terminationGracePeriodSeconds, "the pod outlives quarkd's drain grace");
}
const service = find("Service", "quarkd");
assert.ok(matches(service.spec.selector, quarkd.spec.template.metadata.labels));
const portNames = new Set(server.ports.map((p) => p.name));
for (const port of service.spec.ports) assert.ok(portNames.has(port.targetPort), `no container port ${port.targetPort}`);

// GPU workers: a GPU each, the token from a Secret, flags quark-worker knows, the CA from quarkd's TLS Secret.
const worker = find("Deployment", "quark-worker");
const workerPod = worker.spec.template.spec;
checkSecretRefs(workerPod);
const agent = workerPod.containers[0];
assert.equal(agent.resources.limits["nvidia.com/gpu"], "1");
assert.ok(agent.env.some((e) => e.name === "QUARK_WORKER_TOKEN" && e.valueFrom.secretKeyRef));
assert.ok(agent.args.includes(`${service.metadata.name}:${service.spec.ports.find((p) => p.name === "grpc").port}`));
const workerBinary = path.join(build, "tests/worker/quark-test-worker");  // quark-worker's flags, without the engine
if (existsSync(workerBinary)) {
  const known = flagsOf(workerBinary);
  for (const arg of agent.args.filter((a) => a.startsWith("--"))) assert.ok(known.has(arg.slice(2)), `quark-worker has no ${arg}`);
}

// Scaling on quarkd's queue depth, and disruption budgets that select the right pods.
const hpa = find("HorizontalPodAutoscaler", "quark-worker");
assert.equal(hpa.spec.scaleTargetRef.name, worker.metadata.name);
const metric = hpa.spec.metrics[0].external.metric.name;
const exported = readFileSync(path.join(root, "server/metrics/server_metrics.cc"), "utf8");
assert.ok(exported.includes(`"${metric}"`), `quarkd exports no ${metric}`);
for (const [pdbName, deployment] of [["quarkd", quarkd], ["quark-worker", worker]]) {
  const pdb = find("PodDisruptionBudget", pdbName);
  assert.ok(matches(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels));
}
if (quarkd.spec.replicas <= find("PodDisruptionBudget", "quarkd").spec.minAvailable) assert.fail("PDB blocks every drain");
console.log(`k8s manifests: ${objects.length} objects in ${files.length} files validate`);

// A fault-injecting HTTP proxy for storage tests: node fault_proxy.js TARGET_URL RULES_JSON|@RULES_FILE
// Each rule {method, path (regex), status | reset | hang | delay_ms, times (-1 = always), every (default 1)} answers
// every `every`-th matching request with that status (an S3-style XML error), resets the connection, never answers
// (hang), or forwards it after delay_ms, `times` times; everything else is forwarded as is (Host header included, so
// SigV4 signatures made for the proxy's address still verify at the target). With @RULES_FILE the rules are read
// again whenever the file changes (the chaos driver switches faults on and off that way; a missing file is no rules).
// Forwarded lines end with "key=ACCESS_KEY_ID" from the SigV4 Authorization header ("key=-" when unsigned), so
// tests can tell whose keys a request was signed with.
'use strict';
const http = require('http');

const target = new URL(process.argv[2]);
const fs = require('fs');
const parse = (text) => JSON.parse(text || '[]').map((r) => ({...r, re: new RegExp(r.path || '.*'), seen: 0}));
const rulesArg = process.argv[3] || '[]';
const rulesFile = rulesArg.startsWith('@') ? rulesArg.slice(1) : null;
let rules = rulesFile ? [] : parse(rulesArg);
let rulesStamp = '';

function currentRules() {
  if (!rulesFile) return rules;
  let stamp = 'missing';
  try {
    const st = fs.statSync(rulesFile);
    stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
  } catch (e) { /* no file: no rules */ }
  if (stamp !== rulesStamp) {
    rulesStamp = stamp;
    try {
      rules = stamp === 'missing' ? [] : parse(fs.readFileSync(rulesFile, 'utf8'));
    } catch (e) {
      console.log(`rules-error ${e.message}`);
      rules = [];
    }
  }
  return rules;
}

function matchRule(req) {
  for (const rule of currentRules()) {
    if (rule.method && rule.method !== req.method) continue;
    if (!rule.re.test(req.url)) continue;
    if (rule.times === 0) continue;
    rule.seen += 1;
    if ((rule.seen - 1) % (rule.every || 1) !== 0) continue;
    if (rule.times > 0) rule.times -= 1;
    return rule;
  }
  return null;
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const rule = matchRule(req);
    if (rule && rule.hang) {
      // Never answered: the client is stuck in this request (a test kills it there).
      console.log(`hang ${req.method} ${req.url}`);
      return;
    }
    if (rule && rule.reset) {
      console.log(`fault ${req.method} ${req.url} reset`);
      req.socket.destroy();
      return;
    }
    if (rule && rule.delay_ms) {
      console.log(`fault ${req.method} ${req.url} delay ${rule.delay_ms}`);
      setTimeout(() => forward(req, res, body), rule.delay_ms);
      return;
    }
    if (rule) {
      console.log(`fault ${req.method} ${req.url} ${rule.status}`);
      const xml = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InjectedFault</Code>` +
          `<Message>fault proxy answered ${rule.status}</Message></Error>`;
      res.writeHead(rule.status, {'Content-Type': 'application/xml', 'Content-Length': Buffer.byteLength(xml)});
      res.end(xml);
      return;
    }
    forward(req, res, body);
  });
});

function forward(req, res, body) {
  const credential = /Credential=([^/,\s]+)\//.exec(req.headers.authorization || '');
  console.log(`forward ${req.method} ${req.url} key=${credential ? credential[1] : '-'}`);
  const upstream = http.request({
    host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers,
  }, (up) => {
    res.writeHead(up.statusCode, up.headers);
    up.pipe(res);
  });
  upstream.on('error', (e) => {
    console.log(`upstream-error ${req.method} ${req.url} ${e.message}`);
    req.socket.destroy();
  });
  upstream.end(body);
}

server.listen(0, '127.0.0.1', () => {
  console.log(`fault-proxy listening on ${server.address().port}`);
});
process.on('SIGTERM', () => process.exit(0));

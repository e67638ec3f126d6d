// s3rver with more access keys than its one built-in pair (S3RVER/S3RVER), for tests that must tell whose keys
// signed a request: node s3rver_keys.js NODE_MODULES_DIR KEYS_JSON <s3rver's own arguments...>
// KEYS_JSON is {"ACCESS_KEY_ID": "SECRET", ...}. A request signed with an unknown key id gets 403
// InvalidAccessKeyId, as from S3. (s3rver 3.7 does not recompute SigV4 signatures, so only key ids are checked.)
'use strict';
const path = require('path');

const modules = process.argv[2];
const keys = JSON.parse(process.argv[3]);
const account = require(path.join(modules, 's3rver/lib/models/account'));
for (const [id, secret] of Object.entries(keys)) account.DUMMY_ACCOUNT.createKeyPair(id, secret);
// s3rver's command line reads process.argv from index 2 on.
process.argv.splice(2, 2);
require(path.join(modules, 's3rver/bin/s3rver.js'));

// s3rver as the tests start it: node s3rver_launcher.js NODE_MODULES_DIR KEYS_JSON <s3rver's own arguments...>
//
// - Read-after-write: s3rver 3.7's filesystem store answers a PUT of a small body (a Buffer) as soon as it has handed
//   the bytes to a write stream, before the stream has even opened the object's file; a GET or HEAD right after the
//   PUT's answer can then find no file and answer 404 (seen once in a loaded suite: the worker's publish HEADs every
//   file it has just put). Real S3 is read-after-write consistent, so the launcher makes s3rver so: a PUT answers
//   once the object's file holds all its bytes.
// - Access keys: KEYS_JSON is {"ACCESS_KEY_ID": "SECRET", ...} beside s3rver's one built-in pair (S3RVER/S3RVER), for
//   tests that must tell whose keys signed a request ({} for none). A request signed with an unknown key id gets 403
//   InvalidAccessKeyId, as from S3. (s3rver 3.7 does not recompute SigV4 signatures, so only key ids are checked.)
'use strict';
const fs = require('fs');
const path = require('path');

const modules = process.argv[2];
const keys = JSON.parse(process.argv[3]);
const account = require(path.join(modules, 's3rver/lib/models/account'));
for (const [id, secret] of Object.entries(keys)) account.DUMMY_ACCOUNT.createKeyPair(id, secret);

const FilesystemStore = require(path.join(modules, 's3rver/lib/stores/filesystem'));
const putObject = FilesystemStore.prototype.putObject;
FilesystemStore.prototype.putObject = async function putObjectReadAfterWrite(object) {
  const stored = await putObject.call(this, object);
  const file = this.getResourcePath(object.bucket, object.key, 'object');
  // Bounded: a file that never fills (a full disk) leaves the answer to s3rver's own error handling.
  for (let waited = 0; waited < 10000; waited += 2) {
    try {
      if (fs.statSync(file).size >= stored.size) break;
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  return stored;
};

// s3rver's command line reads process.argv from index 2 on.
process.argv.splice(2, 2);
require(path.join(modules, 's3rver/bin/s3rver.js'));

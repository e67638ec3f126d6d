// The node tests' side of tests/support/require_peer.h: a test whose real peer (an npm package under tests/peers, a
// manifest another test writes, the quark CLI) is missing exits 77, which ctest reports as skipped; with CI=true or
// QUARK_REQUIRE_PEERS=1 it exits 1 instead, so that a CI run cannot pass without its peers.
'use strict';

function peersRequired() {
  const require = process.env.QUARK_REQUIRE_PEERS;
  if (require !== undefined && require !== '' && require !== '0') return true;
  return ['1', 'true', 'TRUE', 'True'].includes(process.env.CI);
}

function peerMissing(why) {
  if (peersRequired()) {
    console.error(`FAIL: a required test peer is missing (CI=true or QUARK_REQUIRE_PEERS=1): ${why}`);
    process.exit(1);
  }
  console.error(`SKIP: ${why}`);
  process.exit(77);
}

module.exports = {peersRequired, peerMissing};

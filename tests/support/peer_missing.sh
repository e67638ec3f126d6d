#!/bin/sh
# The shell side of tests/support/require_peer.h: `peer_missing.sh WHY` exits 77 (ctest: skipped), or 1 with
# CI=true or QUARK_REQUIRE_PEERS=1, for a test registered in place of one whose peer was not found at configure time.
case "${QUARK_REQUIRE_PEERS:-0}" in
  ''|0) ;;
  *) echo "FAIL: a required test peer is missing (QUARK_REQUIRE_PEERS=$QUARK_REQUIRE_PEERS): $*" >&2; exit 1 ;;
esac
case "${CI:-}" in
  1|true|TRUE|True) echo "FAIL: a required test peer is missing (CI=$CI): $*" >&2; exit 1 ;;
esac
echo "SKIP: $*" >&2
exit 77

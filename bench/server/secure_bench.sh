#!/usr/bin/env bash
# What TLS + bearer tokens cost per call: server_bench in one run, plaintext without authentication and TLS
# (ECDSA P-256 certificate made here with openssl) with a tokens file (every call authenticated and authorized; the
# client a submitter of a tenant with roots and a storage quota): the full tables once each, then REPEATS alternating
# pairs of one client's sequential GetJob, SubmitJob and ValidateConfig calls; the overhead per call is the
# difference of the medians (and of the minima) of those pairs.
#   bash bench/server/secure_bench.sh [BUILD_DIR]      (env: CALLS REPEATS ROUNDS SECONDS_GETJOB JOBS WORKERS CLIENTS)
set -euo pipefail
build="$(cd "${1:-build}" && pwd)"
calls=${CALLS:-2000}; repeats=${REPEATS:-7}; rounds=${ROUNDS:-200}; seconds=${SECONDS_GETJOB:-3}; jobs=${JOBS:-2000}
workers=${WORKERS:-4}; clients=${CLIENTS:-8}
dir=$(mktemp -d /tmp/quark-sbench-XXXXXX)
trap 'rm -rf "$dir"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=bench-ca \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$dir/ext"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
  -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
openssl x509 -req -days 2 -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
  -extfile "$dir/ext" -out "$dir/server.pem" 2>/dev/null
client_token="qk_bench_admin_$(openssl rand -hex 16)"
worker_token="qk_bench_worker_$(openssl rand -hex 16)"
sha() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }
# The client is a submitter of a tenant with every #29 check on: model roots, output prefixes and a storage quota
# (1 TiB: never reached, but every SubmitJob sums the tenant's stored bytes).
cat > "$dir/tokens.json" <<JSON
{"tokens": [{"name": "bench-client", "sha256": "$(sha "$client_token")", "tenant": "bench", "role": "submitter"},
            {"name": "bench-worker", "sha256": "$(sha "$worker_token")", "role": "worker"}],
 "tenants": {"bench": {"model_roots": ["file:///tmp"], "output_prefixes": ["file:///tmp"],
                       "max_stored_bytes": 1099511627776}}}
JSON
chmod 600 "$dir/tokens.json"

common=(--rounds "$rounds" --seconds "$seconds" --jobs "$jobs" --workers "$workers" --clients "$clients"
        --sequential-calls "$calls")
secure=(--tls-cert "$dir/server.pem" --tls-key "$dir/server.key" --tls-ca "$dir/ca.pem"
        --tokens-file "$dir/tokens.json" --token "$client_token" --worker-token "$worker_token")
bench="$build/bench/server/server_bench"
echo "## plaintext, authentication off"
"$bench" "${common[@]}" | tee "$dir/off.txt"
echo
echo "## TLS + bearer tokens"
"$bench" "${common[@]}" "${secure[@]}" | tee "$dir/on.txt"
echo
for i in $(seq "$repeats"); do
  "$bench" --sequential-only --sequential-calls "$calls" >> "$dir/off.txt"
  "$bench" --sequential-only --sequential-calls "$calls" "${secure[@]}" >> "$dir/on.txt"
done
if grep -q " [1-9][0-9]* failed" "$dir/on.txt"; then echo "some secure calls failed" >&2; exit 1; fi
# "median min" of a call's us/call figures in a file.
stats() {
  grep "$1, one client, sequential" "$2" | awk -F'|' '{gsub(/ /, "", $3); print $3}' | sort -g |
    awk '{v[NR] = $1} END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1] }'
}
echo "## one client, sequential calls: $((repeats + 1)) runs of $calls calls per mode, alternating"
for call in GetJob SubmitJob ValidateConfig; do
  read -r off_med off_min <<< "$(stats "$call" "$dir/off.txt")"
  read -r on_med on_min <<< "$(stats "$call" "$dir/on.txt")"
  awk -v c="$call" -v a="$off_med" -v b="$on_med" -v x="$off_min" -v y="$on_min" 'BEGIN {
    printf "%s: median %.1f us/call plaintext, %.1f TLS + tokens: +%.1f us/call; minimum %.1f vs %.1f: +%.1f us/call\n",
           c, a, b, b - a, x, y, y - x }'
done

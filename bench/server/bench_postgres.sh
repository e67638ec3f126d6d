# Sourced by the server benchmarks: start_bench_postgres DIR starts a throwaway PostgreSQL in DIR/pg (as nobody
# under root; fsync on, as in production; the socket in DIR/pg, no TCP) and sets pg_bin, as, dsn and sql().
# The caller stops it: $as "$pg_bin/pg_ctl" -D "$DIR/pg/data" -m immediate stop
start_bench_postgres() {
  local dir=$1
  as=""; [ "$(id -u)" = 0 ] && as="runuser -u nobody --"
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  mkdir "$dir/pg"; [ -n "$as" ] && chown nobody "$dir/pg"
  $as "$pg_bin/initdb" -D "$dir/pg/data" -A trust -U quark --no-sync >/dev/null
  $as "$pg_bin/pg_ctl" -D "$dir/pg/data" -o "-k $dir/pg -c listen_addresses='' -c max_connections=200" \
      -l "$dir/pg/log" -w start >/dev/null
  dsn="postgres:///postgres?host=$dir/pg&user=quark"
  bench_pg_host="$dir/pg"
}
sql() { psql -qAtX -h "$bench_pg_host" -U quark postgres -c "$1"; }

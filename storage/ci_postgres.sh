#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 and print its SQLAlchemy URL (nothing else on
# stdout). Never fails CI: when PostgreSQL cannot be installed or started it exits 0 and prints
# nothing, and tests/test_storage_postgres.py then skips with its reason.
#
#   export TEST_DATABASE_URL="$(bash storage/ci_postgres.sh)"
#   .venv/bin/python -m pytest tests/test_storage_postgres.py -q
#   bash storage/ci_postgres.sh stop
#
# Env: INFILL_PG_PORT (default 54329), INFILL_PG_DIR (default /tmp/infill-pg).
set -u
PORT="${INFILL_PG_PORT:-54329}"
DIR="${INFILL_PG_DIR:-/tmp/infill-pg}"
DB=infill_test
log() { echo "ci_postgres: $*" >&2; }

find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
BIN="$(find_bin)"

# run a command as the postgres user when we are root (initdb refuses to run as root)
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    if command -v runuser >/dev/null 2>&1; then runuser -u postgres -- "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
  else
    "$@"
  fi
}

if [ "${1:-}" = stop ]; then
  [ -n "$BIN" ] && [ -f "$DIR/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$DIR" -m fast -w stop >&2
  exit 0
fi

if [ -z "$BIN" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log "installing postgresql with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null 2>&1 \
      || { log "apt-get install failed; skipping"; exit 0; }
    BIN="$(find_bin)"
  fi
  [ -z "$BIN" ] && { log "no PostgreSQL available; skipping"; exit 0; }
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  log "no postgres user to run the server as; skipping"; exit 0
fi

if ! "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
  if [ ! -f "$DIR/PG_VERSION" ]; then
    mkdir -p "$DIR" && { [ "$(id -u)" != 0 ] || chown postgres "$DIR"; } && chmod 700 "$DIR" \
      || { log "cannot create $DIR; skipping"; exit 0; }
    as_pg "$BIN/initdb" -D "$DIR" -U postgres -A trust --no-sync >/dev/null 2>&1 \
      || { log "initdb failed; skipping"; exit 0; }
  fi
  # loopback only, socket in the data dir, durability off (a test server)
  as_pg "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 \
    -o "-p $PORT -c listen_addresses=127.0.0.1 -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null 2>&1 || { log "server did not start (see $DIR/server.log); skipping"; exit 0; }
fi

if ! "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" 2>/dev/null | grep -q 1; then
  "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >/dev/null 2>&1 \
    || { log "createdb failed; skipping"; exit 0; }
fi
echo "postgresql+psycopg://postgres@127.0.0.1:$PORT/$DB"

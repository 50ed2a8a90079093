#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 and print its SQLAlchemy URL (nothing else on
# stdout). By default, when PostgreSQL cannot be installed or started it exits 0 and prints nothing,
# and tests/storage/test_storage_postgres.py then skips with its reason. With --require (what .ci/run uses)
# it exits 1 instead, with the reason on stderr: CI must not pass on a broken install step.
#
#   export TEST_DATABASE_URL="$(bash tools/ci_postgres.sh)"
#   .venv/bin/python -m pytest tests/storage/test_storage_postgres.py -q
#   bash tools/ci_postgres.sh stop
#
# Env: INFILL_PG_PORT (default 54329), INFILL_PG_DIR (default /tmp/infill-pg).
set -u
PORT="${INFILL_PG_PORT:-54329}"
DIR="${INFILL_PG_DIR:-/tmp/infill-pg}"
DB=infill_test
REQUIRE=0
[ "${1:-}" = --require ] && { REQUIRE=1; shift; }
log() { echo "ci_postgres: $*" >&2; }
# cannot set the server up: skip (exit 0, no URL), or fail under --require
give_up() {
  if [ "$REQUIRE" = 1 ]; then log "$*; failing (--require)"; exit 1; fi
  log "$*; skipping"; exit 0
}

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
      || give_up "apt-get install postgresql failed"
    BIN="$(find_bin)"
  fi
  [ -z "$BIN" ] && give_up "no PostgreSQL available"
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  give_up "no postgres user to run the server as"
fi

if ! "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
  if [ ! -f "$DIR/PG_VERSION" ]; then
    mkdir -p "$DIR" && { [ "$(id -u)" != 0 ] || chown postgres "$DIR"; } && chmod 700 "$DIR" \
      || give_up "cannot create $DIR"
    as_pg "$BIN/initdb" -D "$DIR" -U postgres -A trust --no-sync >/dev/null 2>&1 \
      || give_up "initdb failed"
  fi
  # loopback only, socket in the data dir, durability off (a test server)
  as_pg "$BIN/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 \
    -o "-p $PORT -c listen_addresses=127.0.0.1 -k $DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null 2>&1 || give_up "server did not start (see $DIR/server.log)"
fi

if ! "$BIN/psql" -h 127.0.0.1 -p "$PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" 2>/dev/null | grep -q 1; then
  "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DB" >/dev/null 2>&1 \
    || give_up "createdb failed"
fi
echo "postgresql+psycopg://postgres@127.0.0.1:$PORT/$DB"

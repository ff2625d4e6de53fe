#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests and benchmarks.
#
#   eval "$(bash scripts/postgres-fixture.sh start [--owner PID])"
#       removes clusters left behind by runs that were killed, then creates a new cluster in a
#       fresh /tmp/arbor-pg-XXXXXX folder, listening on 127.0.0.1 only, on a free port, with a
#       role `arbor` (random password, CREATEDB) owning a database `arbor`. Prints
#           export ARBOR_TEST_POSTGRES_URL=postgres://arbor:PASSWORD@127.0.0.1:PORT/arbor
#           export ARBOR_TEST_POSTGRES_DIR=/tmp/arbor-pg-XXXXXX
#       The cluster belongs to process PID (default: the caller's parent shell); once PID is
#       gone, the next `start` or `clean` removes it.
#   bash scripts/postgres-fixture.sh stop [DIR]
#       stops the cluster in DIR (default $ARBOR_TEST_POSTGRES_DIR) and removes the folder.
#   bash scripts/postgres-fixture.sh clean
#       stops and removes every /tmp/arbor-pg-* cluster whose owner process is gone.
#
# initdb, pg_ctl and postgres refuse to run as root, so as root they run as the `postgres` user
# (runuser). Logs go to standard error; only the export lines go to standard output.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/tmp/arbor-pg-

log() { echo "postgres-fixture: $*" >&2; }

find_bindir() {
  if [ -n "${ARBOR_POSTGRES_BIN:-}" ] && [ -x "$ARBOR_POSTGRES_BIN/initdb" ]; then echo "$ARBOR_POSTGRES_BIN"; return 0; fi
  local candidate
  for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n -r); do
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ]; then echo "$candidate"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

# Runs a command as the cluster's owner: `postgres` when we are root, ourselves otherwise.
as_owner() {
  # From /: PostgreSQL 15's programs find their own path by changing into their folder and
  # back, which fails where the owner cannot enter the current folder (a clone under /root).
  if [ "$(id -u)" -eq 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# The start time of a process (field 22 of /proc/PID/stat), to tell a live owner from a reused PID.
start_time() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null || true; }

owner_alive() {
  local dir=$1 pid recorded
  [ -f "$dir/owner" ] || return 1
  read -r pid recorded <"$dir/owner" || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(start_time "$pid")" = "$recorded" ]
}

stop_cluster() {
  local dir=$1
  [ -n "$dir" ] && [ -d "$dir" ] || return 0
  case "$dir" in "$prefix"*) ;; *) log "refusing to remove $dir: not a fixture folder"; return 1 ;; esac
  if [ -f "$dir/data/postmaster.pid" ]; then
    local bindir pid
    bindir=$(find_bindir || true)
    if [ -n "$bindir" ]; then
      as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
    fi
    pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q postgres "/proc/$pid/comm" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -rf "$dir" || log "could not remove $dir"
}

# Whose clusters this user may remove: its own, or as root those run by `postgres`. Another
# user's folders are left alone (removing them would fail, and stop every later start).
ours() {
  local user
  user=$(stat -c %U "$1" 2>/dev/null) || return 1
  if [ "$(id -u)" -eq 0 ]; then [ "$user" = postgres ] || [ "$user" = root ]; else [ "$user" = "$(id -un)" ]; fi
}

clean_stale() {
  local dir
  for dir in "$prefix"*; do
    [ -d "$dir" ] || continue
    ours "$dir" || continue
    # A folder a concurrent start has just made has no owner file yet: not stale.
    if [ ! -s "$dir/owner" ] && [ -n "$(find "$dir" -maxdepth 0 -newermt '-60 seconds' 2>/dev/null)" ]; then continue; fi
    if ! owner_alive "$dir"; then
      log "removing the cluster left behind in $dir"
      stop_cluster "$dir"
    fi
  done
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local owner=$PPID
  if [ "${1:-}" = "--owner" ]; then owner=$2; fi
  clean_stale

  local bindir
  if ! bindir=$(find_bindir); then
    log "PostgreSQL server binaries not found; installing them"
    bash scripts/install-dependencies.sh >&2
    bindir=$(find_bindir) || { log "error: initdb still not found after installing postgresql"; exit 1; }
  fi

  if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    log "error: running as root, the server runs as the postgres user, and there is none (install the postgresql package, or run as another user)"
    exit 1
  fi
  local dir password port attempt
  dir=$(mktemp -d "${prefix}XXXXXX")
  # Ctrl-C or a failure before the export lines are printed: nobody else knows the folder yet.
  trap 'stop_cluster "$dir"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  echo "$owner $(start_time "$owner")" >"$dir/owner.new" && mv "$dir/owner.new" "$dir/owner"
  # Only the cluster's owner may enter: the socket in it takes local logins without a password.
  chmod 700 "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  password=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)

  as_owner "$bindir/initdb" -D "$dir/data" -U postgres -E UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; stop_cluster "$dir"; exit 1; }
  # Throwaway data: durability off for speed. Only 127.0.0.1; the socket stays in our folder.
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
unix_socket_permissions = 0700
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 128MB
EOF

  for attempt in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 40000))
    if port_in_use "$port"; then port=""; continue; fi
    if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -w -t 30 start >/dev/null 2>&1; then
      break
    fi
    port=""
  done
  if [ -z "$port" ]; then
    log "error: the server did not start:"; tail -n 20 "$dir/server.log" >&2 || true
    stop_cluster "$dir"; exit 1
  fi
  for attempt in $(seq 1 50); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" && break
    sleep 0.1
  done

  as_owner "$bindir/psql" -q -X -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE arbor LOGIN CREATEDB PASSWORD '$password'" \
    -c "CREATE DATABASE arbor OWNER arbor" >&2 \
    || { stop_cluster "$dir"; exit 1; }
  trap - EXIT INT TERM
  log "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') running on 127.0.0.1:$port in $dir"
  echo "export ARBOR_TEST_POSTGRES_URL=postgres://arbor:$password@127.0.0.1:$port/arbor"
  echo "export ARBOR_TEST_POSTGRES_DIR=$dir"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop_cluster "${2:-${ARBOR_TEST_POSTGRES_DIR:-}}" ;;
  clean) clean_stale ;;
  *) echo "usage: $0 start [--owner PID] | stop [DIR] | clean" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# A throwaway PostgreSQL server for the ledger tests, on 127.0.0.1 only.
#
#   eval "$(.ci/postgres.sh)"        # start (installs Debian's postgresql when missing, as root)
#   pytest -m postgres tests/ledger  #   ... reads APPROVAL_GUARD_TEST_DSN
#   .ci/postgres.sh stop             # stop it and delete its directory
#
# Only the `export APPROVAL_GUARD_TEST_DSN=...` line goes to stdout; progress goes to stderr.
# Settings (environment):
#   APPROVAL_GUARD_PG_DIR      where the server lives (default /tmp/approval-guard-pg)
#   APPROVAL_GUARD_PG_PORT     TCP port (default: the first free one from 54329)
#   APPROVAL_GUARD_PG_INSTALL  0 = never apt-get install; fail instead (default 1)
#   APPROVAL_GUARD_PG_DURABLE  1 = fsync, synchronous_commit and full_page_writes on, as in
#                              production (the benchmarks' write rates); default 0
# The data directory is throwaway: fsync is off unless durable, and `stop` deletes everything.
set -euo pipefail

BASE="${APPROVAL_GUARD_PG_DIR:-/tmp/approval-guard-pg}"
MARKER="$BASE/.approval-guard-pg"
PGDATA_DIR="$BASE/data"
USER_NAME=approval_guard
DB_NAME=approval_guard_test

say() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

find_bindir() {
    local candidates=() found
    if found="$(command -v pg_ctl 2>/dev/null)"; then
        candidates+=("$(dirname "$(readlink -f "$found")")")
    fi
    # Debian keeps the server binaries off PATH, one directory per major version.
    while IFS= read -r dir; do candidates+=("$dir"); done \
        < <(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r)
    for dir in "${candidates[@]}"; do
        if [[ -x "$dir/pg_ctl" && -x "$dir/initdb" && -x "$dir/postgres" ]]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

# Root may not run the server: run its programs as the `postgres` user then.
as_owner() {
    if [[ $EUID -ne 0 ]]; then
        "$@"
    elif command -v runuser >/dev/null; then
        runuser -u postgres -- "$@"
    else
        su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
    fi
}

port_in_use() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() { [[ -f "$MARKER" ]] && as_owner "$BINDIR/pg_ctl" -D "$PGDATA_DIR" status >/dev/null 2>&1; }

start() {
    if ! BINDIR="$(find_bindir)"; then
        [[ "${APPROVAL_GUARD_PG_INSTALL:-1}" != 0 ]] || die "no initdb/pg_ctl found and installing is off"
        [[ $EUID -eq 0 ]] || die "no initdb/pg_ctl found; install Debian's postgresql package (as root)"
        say "installing postgresql (apt-get)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >&2
        apt-get install -y -qq postgresql >&2
        BINDIR="$(find_bindir)" || die "postgresql installed, but no initdb/pg_ctl found"
    fi
    if [[ $EUID -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || die "running as root, but there is no 'postgres' user to run the server"
    fi

    if running; then
        say "already running in $BASE"
        echo "export APPROVAL_GUARD_TEST_DSN='$(cat "$BASE/dsn")'"
        return 0
    fi
    if [[ -e "$BASE" ]]; then
        [[ -f "$MARKER" ]] || die "$BASE exists and was not made by this script; set APPROVAL_GUARD_PG_DIR"
        rm -rf -- "$BASE"
    fi

    local port="${APPROVAL_GUARD_PG_PORT:-}"
    if [[ -z "$port" ]]; then
        for port in $(seq 54329 54399); do port_in_use "$port" || break; done
    fi
    port_in_use "$port" && die "port $port is in use"

    local password
    password="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"
    mkdir -p "$BASE/sock"
    touch "$MARKER"
    printf '%s\n' "$password" >"$BASE/pwfile"
    chmod 700 "$BASE"
    if [[ $EUID -eq 0 ]]; then chown -R postgres: "$BASE"; fi

    say "initdb in $PGDATA_DIR ($BINDIR)"
    as_owner "$BINDIR/initdb" -D "$PGDATA_DIR" -U "$USER_NAME" --pwfile="$BASE/pwfile" \
        --auth-host=scram-sha-256 --auth-local=trust --encoding=UTF8 --no-sync >"$BASE/initdb.log" 2>&1 \
        || { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
    rm -f "$BASE/pwfile"

    local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    if [[ "${APPROVAL_GUARD_PG_DURABLE:-0}" == 1 ]]; then
        durability="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
    fi
    say "starting on 127.0.0.1:$port ($durability)"
    as_owner "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -l "$BASE/server.log" -w -t 60 \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $BASE/sock $durability -c max_connections=200" \
        start >&2 || { cat "$BASE/server.log" >&2; die "the server did not start"; }

    as_owner "$BINDIR/createdb" -h "$BASE/sock" -p "$port" -U "$USER_NAME" "$DB_NAME" \
        || die "createdb failed"

    local dsn="postgresql://$USER_NAME:$password@127.0.0.1:$port/$DB_NAME"
    printf '%s\n' "$dsn" >"$BASE/dsn"
    chmod 600 "$BASE/dsn"
    echo "export APPROVAL_GUARD_TEST_DSN='$dsn'"
}

stop() {
    if [[ ! -e "$BASE" ]]; then
        say "nothing at $BASE"
        return 0
    fi
    [[ -f "$MARKER" ]] || die "$BASE was not made by this script; not touching it"
    if BINDIR="$(find_bindir)" && running; then
        as_owner "$BINDIR/pg_ctl" -D "$PGDATA_DIR" -m fast -w -t 60 stop >&2 || say "pg_ctl stop failed"
    fi
    rm -rf -- "$BASE"
    say "stopped; removed $BASE"
}

case "${1:-start}" in
    start) start ;;
    stop) stop ;;
    *) die "usage: $0 [start|stop]" ;;
esac

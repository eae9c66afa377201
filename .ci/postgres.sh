#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: in a temp dir, on a free loopback port, trusted
# local connections, no fsync. CI and developers use the same script.
#
#   .ci/postgres.sh run cargo test --workspace   # start, run the command with the env, stop
#                                                # (a cluster already running is used and kept)
#   eval "$(.ci/postgres.sh start)"              # start (or reuse) and print the exports
#   .ci/postgres.sh env                          # print the exports of the running cluster
#   .ci/postgres.sh stop                         # stop it and delete its directory
#   .ci/postgres.sh install                      # apt-get install postgresql if missing (root)
#
# The exports the tests read:
#   RETRY_TEST_POSTGRES_URL  postgres://postgres@127.0.0.1:PORT/postgres
#   RETRY_TEST_PG_BIN        the directory of initdb, pg_ctl and postgres
#   RETRY_TEST_PG_DATA       the cluster's data directory (for `pg_ctl -D ... restart`)
#   RETRY_TEST_PG_USER       the OS user that runs the server: pg_ctl and initdb refuse root,
#                            so as root the cluster runs as `postgres`; run pg_ctl as that user
#                            (`runuser -u "$RETRY_TEST_PG_USER" -- "$RETRY_TEST_PG_BIN/pg_ctl" ...`)
#   RETRY_TEST_PG_PORT       the port
#
# Server binaries are looked up in $RETRY_TEST_PG_BIN, then `pg_config --bindir`, then the
# newest /usr/lib/postgresql/*/bin (Debian's layout).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
state="$root/target/postgres-cluster.env"

find_bin() {
    if [[ -n "${RETRY_TEST_PG_BIN:-}" && -x "$RETRY_TEST_PG_BIN/initdb" ]]; then
        echo "$RETRY_TEST_PG_BIN"
        return
    fi
    if command -v pg_config >/dev/null 2>&1; then
        local dir
        dir="$(pg_config --bindir 2>/dev/null || true)"
        if [[ -x "$dir/initdb" ]]; then
            echo "$dir"
            return
        fi
    fi
    local newest
    newest="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "$newest" && -x "$newest/initdb" ]]; then
        echo "$newest"
        return
    fi
    if command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v initdb)"
    fi
}

install() {
    if [[ -n "$(find_bin)" ]]; then
        return
    fi
    if [[ "$(id -u)" != 0 ]]; then
        echo "PostgreSQL's server binaries are missing; install them (Debian: sudo apt-get install postgresql)" >&2
        exit 1
    fi
    echo "installing Debian's postgresql package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
}

# Runs a command as the cluster's user: itself, or `postgres` when this is root.
as_user() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u "$user" -- "$@"
    else
        "$@"
    fi
}

free_port() {
    local port
    for port in $(seq 55432 55631); do
        if ! (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
    echo "no free port in 55432-55631" >&2
    exit 1
}

print_env() {
    cat "$state"
}

running() {
    [[ -f "$state" ]] || return 1
    # shellcheck disable=SC1090
    source "$state"
    [[ -d "$RETRY_TEST_PG_DATA" ]] || return 1
    user="$RETRY_TEST_PG_USER"
    as_user "$RETRY_TEST_PG_BIN/pg_ctl" -D "$RETRY_TEST_PG_DATA" status >/dev/null 2>&1
}

start() {
    if running; then
        print_env
        return
    fi
    local bin
    bin="$(find_bin)"
    if [[ -z "$bin" ]]; then
        echo "PostgreSQL's server binaries are missing: run \`.ci/postgres.sh install\` as root, or install Debian's postgresql package" >&2
        exit 1
    fi
    user="$(id -un)"
    if [[ "$(id -u)" == 0 ]]; then
        user=postgres
        id -u "$user" >/dev/null 2>&1 || useradd --system --no-create-home "$user"
    fi
    local dir port
    dir="$(mktemp -d "${TMPDIR:-/tmp}/retry-pg.XXXXXX")"
    chmod 755 "$dir"
    [[ "$(id -u)" == 0 ]] && chown "$user" "$dir"
    port="$(free_port)"
    as_user "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=400" \
        start >/dev/null || {
        cat "$dir/server.log" >&2
        exit 1
    }
    mkdir -p "$(dirname "$state")"
    cat >"$state" <<EOF
export RETRY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:$port/postgres
export RETRY_TEST_PG_BIN=$bin
export RETRY_TEST_PG_DATA=$dir/data
export RETRY_TEST_PG_USER=$user
export RETRY_TEST_PG_PORT=$port
EOF
    echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir/data (server log: $dir/server.log)" >&2
    print_env
}

stop() {
    if [[ ! -f "$state" ]]; then
        return
    fi
    # shellcheck disable=SC1090
    source "$state"
    user="$RETRY_TEST_PG_USER"
    as_user "$RETRY_TEST_PG_BIN/pg_ctl" -D "$RETRY_TEST_PG_DATA" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$(dirname "$RETRY_TEST_PG_DATA")"
    rm -f "$state"
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    stop) stop ;;
    env)
        if running; then print_env; else echo "no cluster is running: .ci/postgres.sh start" >&2; exit 1; fi
        ;;
    run)
        shift
        [[ $# -gt 0 ]] || { echo "usage: .ci/postgres.sh run COMMAND [ARGS...]" >&2; exit 2; }
        # Stop the cluster afterwards only if this command started it.
        running || trap stop EXIT
        cluster_env="$(start)"
        eval "$cluster_env"
        "$@"
        ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
        exit 2
        ;;
esac

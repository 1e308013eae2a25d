# Source this file: starts a throwaway PostgreSQL cluster on a loopback port (as the
# postgres user when run as root: initdb refuses root), exports
# TRANSFER_TEST_POSTGRES_URL, and stops and removes the cluster when the shell exits,
# also on failure. TRANSFER_PG_SETTINGS replaces the server settings: the default turns
# fsync off, which suits tests only (bench/run keeps fsync on).
start_throwaway_postgres() {
    local bindir
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
        echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2
        return 1
    fi
    TRANSFER_PG_DIR=$(mktemp -d /tmp/transfer-pg.XXXXXX)
    chmod 755 "$TRANSFER_PG_DIR"
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    TRANSFER_PG_RUN=()
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$TRANSFER_PG_DIR"
        TRANSFER_PG_RUN=(runuser -u postgres --)
    fi
    TRANSFER_PG_CTL="$bindir/pg_ctl"
    "${TRANSFER_PG_RUN[@]}" "$bindir/initdb" -D "$TRANSFER_PG_DIR/data" -U transfer --auth=trust -E UTF8 >/dev/null
    "${TRANSFER_PG_RUN[@]}" "$bindir/pg_ctl" -D "$TRANSFER_PG_DIR/data" -l "$TRANSFER_PG_DIR/log" -w \
        -o "-p $port -k $TRANSFER_PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=300 ${TRANSFER_PG_SETTINGS:--c fsync=off -c synchronous_commit=off}" \
        start >/dev/null
    trap stop_throwaway_postgres EXIT
    export TRANSFER_TEST_POSTGRES_URL="postgres://transfer@127.0.0.1:$port/postgres"
    echo "Throwaway PostgreSQL on 127.0.0.1:$port" >&2
}

stop_throwaway_postgres() {
    if [ -n "${TRANSFER_PG_DIR:-}" ] && [ -d "$TRANSFER_PG_DIR/data" ]; then
        "${TRANSFER_PG_RUN[@]}" "$TRANSFER_PG_CTL" -D "$TRANSFER_PG_DIR/data" -m immediate stop >/dev/null 2>&1 || true
        rm -rf "$TRANSFER_PG_DIR"
    fi
}

# Source this file: start_pgbouncer URL starts a PgBouncer in transaction pooling mode on a
# loopback port in front of the PostgreSQL server of URL (postgres://user@host:port/db), every
# database name passed through (`*`), and exports TRANSFER_TEST_POSTGRES_POOLER (host:port);
# stop_pgbouncer stops it. As the postgres user when run as root (PgBouncer refuses root).
# Debian's PgBouncer 1.18 keeps no named prepared statement across transactions.
start_pgbouncer() {
    local url=$1 server user port
    server=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(f"host={p.hostname} port={p.port or 5432}")' "$url")
    user=$(python3 -c 'import sys, urllib.parse as u; print(u.urlsplit(sys.argv[1]).username)' "$url")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    TRANSFER_PGBOUNCER_DIR=$(mktemp -d /tmp/transfer-pgbouncer.XXXXXX)
    chmod 755 "$TRANSFER_PGBOUNCER_DIR"
    printf '"%s" ""\n' "$user" >"$TRANSFER_PGBOUNCER_DIR/users.txt"
    cat >"$TRANSFER_PGBOUNCER_DIR/pgbouncer.ini" <<INI
[databases]
* = $server

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $TRANSFER_PGBOUNCER_DIR/users.txt
pool_mode = transaction
server_reset_query =
max_client_conn = 2000
default_pool_size = 8
logfile = $TRANSFER_PGBOUNCER_DIR/pgbouncer.log
pidfile = $TRANSFER_PGBOUNCER_DIR/pgbouncer.pid
INI
    local run=()
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres "$TRANSFER_PGBOUNCER_DIR"
        run=(runuser -u postgres --)
    fi
    "${run[@]}" pgbouncer -d "$TRANSFER_PGBOUNCER_DIR/pgbouncer.ini"
    for _ in $(seq 50); do
        python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$port" 2>/dev/null && break
        sleep 0.1
    done
    export TRANSFER_TEST_POSTGRES_POOLER="127.0.0.1:$port"
    echo "PgBouncer $(pgbouncer --version | head -n 1 | awk '{print $2}') (transaction pooling) on 127.0.0.1:$port" >&2
}

stop_pgbouncer() {
    if [ -n "${TRANSFER_PGBOUNCER_DIR:-}" ] && [ -f "$TRANSFER_PGBOUNCER_DIR/pgbouncer.pid" ]; then
        kill "$(cat "$TRANSFER_PGBOUNCER_DIR/pgbouncer.pid")" 2>/dev/null || true
        sleep 0.2
    fi
    [ -n "${TRANSFER_PGBOUNCER_DIR:-}" ] && rm -rf "$TRANSFER_PGBOUNCER_DIR"
    unset TRANSFER_TEST_POSTGRES_POOLER
}

#!/usr/bin/env bash
# Fuzzes a running transfer-server with schemathesis, driven by the server's own
# /openapi.yaml and schemathesis's default checks (no 5xx, documented statuses, response
# schemas, …), authenticated with a real token. Fails if any check fails or the server dies.
set -euo pipefail
cd "$(dirname "$0")/.."
# A key twice in one mapping is no YAML 1.2: generators refuse the file or keep either value.
python3 scripts/check-openapi-keys.py openapi.yaml
bin=.build/debug/transfer-server
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Sign in with Apple on, so its routes are fuzzed past 501; its key URL goes nowhere (no
# fuzzed token is a JWT that would make the server fetch keys).
"$bin" --database "sqlite:$dir/fuzz.sqlite" --port "$port" --argon2-memory-kib 1024 --argon2-iterations 1 \
    --account-creation-limit off --claim-limit off --setup-limit off --nonce-limit off --handoff-limit off \
    --apple-client-ids com.example.fuzz --apple-jwks-url http://127.0.0.1:9/auth/keys --handoff-clients com.example.fuzz >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/readyz" && break
    sleep 0.1
done
# A new device's session: its access token.
new_token() {
    local device secret
    device=$(python3 -c 'import uuid; print(uuid.uuid4())')
    secret=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
    curl -s -H 'Content-Type: application/json' -d "{\"deviceId\":\"$device\",\"deviceSecret\":\"$secret\"}" \
        "http://127.0.0.1:$port/v1/devices/login" | python3 -c 'import json, sys; print(json.load(sys.stdin)["accessToken"])'
}
# An app backend's service key, for the /v1/service/ operations (they refuse a device's token).
service_key=$(.build/debug/transfer service-key create fuzz --reason "schemathesis" --json --database "sqlite:$dir/fuzz.sqlite" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["key"])')
# Every operation runs with the credentials it takes, so it is fuzzed past its 401. Logout
# would end the token's session midway, and DELETE /v1/me the account: they are fuzzed last,
# each with a session of its own. What schemathesis still reports as "only 401/403" are the
# contract's own answers to data it cannot guess: a claim's credentials (401
# invalid_transfer_credentials), another device's account ids (403), a sibling client id the
# server was not started with (403).
run() {
    local credential=$1
    shift
    schemathesis --config-file scripts/schemathesis.toml run "http://127.0.0.1:$port/openapi.yaml" -H "Authorization: Bearer $credential" "$@" \
        --max-examples "${SCHEMATHESIS_EXAMPLES:-40}" --seed "${SCHEMATHESIS_SEED:-20261121}"
}
run "$(new_token)" --exclude-path-regex '^/v1/(logout|me|service/.*)$'
run "$service_key" --include-path-regex '^/v1/service/'
run "$(new_token)" --include-path /v1/logout
run "$(new_token)" --include-path /v1/me
kill -0 "$pid"  # the server survived all of it
if grep -q "internal error" "$dir/server.log"; then
    echo "the server logged internal errors during fuzzing" >&2
    exit 1
fi
echo "schemathesis: 1 passed, 0 failed"

#!/usr/bin/env bash
# Fuzzes the strict CBOR decoder (Sources/TransferAttestation/CBOR.swift) with libFuzzer and
# AddressSanitizer. The decoder depends on the standard library only, so it is built alone
# with the fuzz entry point (Tests/Fuzz/CBORFuzz.swift) and the test-only encoder, into a
# folder outside the repository. The committed seeds (Tests/Fuzz/cbor-corpus) are copied to a
# scratch corpus, so a run never changes the repository; a crash leaves its input in the
# scratch folder and the run exits non-zero.
#
#   scripts/fuzz-cbor.sh --smoke          20 seconds (for CI)
#   scripts/fuzz-cbor.sh --runs 5000000   a number of inputs
#   scripts/fuzz-cbor.sh --time 600       a number of seconds
# FUZZ_CBOR_DIR chooses the scratch folder (default /tmp/transfer-fuzz-cbor).
set -euo pipefail
cd "$(dirname "$0")/.."

limit=(-max_total_time=20)
case "${1:---smoke}" in
    --smoke) ;;
    --runs) limit=(-runs="${2:?--runs needs a count}") ;;
    --time) limit=(-max_total_time="${2:?--time needs seconds}") ;;
    *) echo "usage: $0 [--smoke | --runs N | --time SECONDS]" >&2; exit 2 ;;
esac

dir="${FUZZ_CBOR_DIR:-/tmp/transfer-fuzz-cbor}"
mkdir -p "$dir/corpus" "$dir/artifacts"
swiftc -O -sanitize=fuzzer,address -parse-as-library -use-ld=lld -module-name CBORFuzz \
    Sources/TransferAttestation/CBOR.swift \
    Tests/TransferTestSupport/CBOREncoder.swift \
    Tests/Fuzz/CBORFuzz.swift \
    -o "$dir/fuzz-cbor"
cp -n Tests/Fuzz/cbor-corpus/* "$dir/corpus/" 2>/dev/null || true

# 64 KiB inputs at most (an attestation object is about 6 KiB), 5 s per input, 2 GiB memory.
"$dir/fuzz-cbor" "$dir/corpus" -artifact_prefix="$dir/artifacts/" \
    -max_len=65536 -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 "${limit[@]}"

#!/usr/bin/env bash
# Type-checks TransferKit's Apple-only sources (the `#if canImport(Security)`, `DeviceCheck`, `CoreImage` and
# `AuthenticationServices` parts, never compiled by Linux CI) against the stub modules in
# AppleStubs/, which carry Apple's signatures for what TransferKit calls. Then it shows the check
# has teeth: the same sources with one wrong argument to SecItemDelete must fail.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sources="$here/../Sources/TransferKit"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for module in Security DeviceCheck AuthenticationServices CoreImage; do
    swiftc -parse-as-library -swift-version 6 -module-name "$module" -emit-module \
        -emit-module-path "$work/$module.swiftmodule" "$here/AppleStubs/$module.swift"
done

typecheck() { swiftc -typecheck -swift-version 6 -warnings-as-errors -I "$work" -module-name TransferKit "$@"; }

typecheck "$sources"/*.swift
echo "typecheck-apple: the Apple-only sources type-check against the stubs"

mkdir "$work/wrong"
cp "$sources"/*.swift "$work/wrong/"
sed -i 's/SecItemDelete(Self.dictionary(query) as CFDictionary)/SecItemDelete(Self.dictionary(query) as CFDictionary, nil)/' \
    "$work/wrong/KeychainCredentialStore.swift"
grep -q 'as CFDictionary, nil)' "$work/wrong/KeychainCredentialStore.swift" || { echo "typecheck-apple: the deliberate mistake was not applied" >&2; exit 1; }
if typecheck "$work/wrong"/*.swift >"$work/wrong.log" 2>&1; then
    echo "typecheck-apple: a wrong argument to SecItemDelete type-checked: the stubs check nothing" >&2
    exit 1
fi
grep -q "extra argument" "$work/wrong.log" || { cat "$work/wrong.log" >&2; echo "typecheck-apple: failed for another reason" >&2; exit 1; }
echo "typecheck-apple: a deliberate wrong argument fails, as it should"

#!/usr/bin/env bash
# CI part "verify": `cargo xtask verify`: the loom models of the protocols (each must also
# fail its broken variants), ThreadSanitizer on the simulation suite (its standard library
# built instrumented from Debian's library source: rust-web-src, installed here if missing,
# as .ci/cross.sh does; the TSan runtime is the rustup nightly's), Miri on the portable
# core (or, where `cargo miri` is missing, the next best, named in its output), the property
# tests and their longer fuzz run. A missing tool is printed and skipped, not a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(rustc-web cargo-web rust-web-src)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null; then
    echo "installing: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
start=$(date +%s)
cargo xtask verify "$@"
echo "cargo xtask verify took $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# CI part "verify": `cargo xtask verify`: the loom models of the protocols (each must also
# fail its broken variants), ThreadSanitizer on the simulation suite, Miri on the portable
# core (or, where `cargo miri` is missing, the next best, named in its output), the property
# tests and their longer fuzz run. A missing tool is printed and skipped, not a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
cargo xtask verify "$@"
echo "cargo xtask verify took $(( $(date +%s) - start )) s"

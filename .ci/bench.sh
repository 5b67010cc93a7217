#!/usr/bin/env bash
# CI for the benchmarks (issue 5): a smoke test of the harness and of `cargo xtask bench`.
# Quick rounds only (well under a minute after the build): the committed docs/BENCHMARKS.md
# comes from a full `cargo xtask bench` run, which takes about a minute or two on the 2-core
# machines. Needs nothing beyond the crates on crates.io; `objdump` (binutils) is optional.
set -euo pipefail
cd "$(dirname "$0")/.."

# The bench binary in test mode runs its quick rounds and asserts every count.
cargo test --features sim --bench peers

# The whole pipeline (release build, quick run, report and plot) into a scratch folder, so the
# committed report is left alone.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cargo xtask bench --quick --docs "$scratch"
test -s "$scratch/BENCHMARKS.md"
grep -q '<svg' "$scratch/throughput.svg"
grep -q '| pcpu-counter |' "$scratch/BENCHMARKS.md"
echo "bench CI: ok"

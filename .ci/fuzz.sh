#!/usr/bin/env bash
# CI part "fuzz": a bounded run of each cargo-fuzz target (fuzz/, docs/fuzzing.md) from its
# seed corpus: a fixed number of inputs (-runs) from a fixed seed, not a time, so the run is
# the same on every machine. Any crash, failed assertion, leak or timeout fails the part.
# Installs the rustup nightly (libFuzzer's instrumentation needs it) and cargo-fuzz when they
# are missing. New inputs go to a scratch folder: the committed seed corpus stays as it is.
#
#   .ci/fuzz.sh                  # every target, FUZZ_RUNS inputs each (default 20000)
#   FUZZ_RUNS=200000 .ci/fuzz.sh capi ratecheck
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${FUZZ_RUNS:-20000}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(zone_layout zone_ops capi ratecheck)
t0=$(date +%s)
since() { echo "$(( $(date +%s) - $1 )) s"; }

# `cargo +nightly` needs the rustup proxy; `rustup run` works with any cargo on PATH.
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null; then
    start=$(date +%s)
    # A debug build: cargo-fuzz only drives cargo and libFuzzer, and builds in half the time
    # (27 s of CPU instead of 50 on the development machine).
    cargo install --locked --debug cargo-fuzz
    echo "cargo install cargo-fuzz took $(since "$start")"
fi

start=$(date +%s)
rustup run nightly cargo fuzz build
echo "fuzz targets built (address sanitizer, debug assertions) in $(since "$start")"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do
    start=$(date +%s)
    mkdir -p "$scratch/$t"
    # -runs counts inputs after the seeds; -seed fixes the mutations. The last lines are
    # libFuzzer's totals (cov: edges, ft: features, corp: inputs kept).
    rustup run nightly cargo fuzz run "$t" "$scratch/$t" "fuzz/corpus/$t" -- \
        -runs="$runs" -seed=1 -max_len=1024 -timeout=10 -print_final_stats=1 >"$scratch/$t.log" 2>&1 \
        || {
            tail -n 120 "$scratch/$t.log"
            echo "FAIL: fuzz target $t (the input is in fuzz/artifacts/$t/)"
            exit 1
        }
    grep -aE '^#[0-9]+[[:space:]]+(INITED|DONE)' "$scratch/$t.log" | sed "s/^/$t: /"
    echo "$t: $runs runs in $(since "$start")"
done
echo "fuzz: ${#targets[@]} targets passed in $(since "$t0")"

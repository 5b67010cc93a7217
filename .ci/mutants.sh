#!/usr/bin/env bash
# CI part "mutants": mutation testing of the core with cargo-mutants (docs/mutation.md).
#
#   .ci/mutants.sh                 the CI step: the core files below (CORE), each with its tests
#   .ci/mutants.sh src/zone.rs ... those files (any file of `cargo mutants --list-files`)
#
# Each file is mutated with only the tests that exercise it (`tests_for`), in place
# (`--in-place`: the mutant is written into src/ and restored after, so the target dir that
# `cargo test` left is reused instead of a scratch copy rebuilding every dependency). Fails
# on a missed mutant; a timeout (a mutant that made the tests hang) counts as caught, and an
# unviable mutant (one that does not build) as neither. Installs cargo-mutants if missing.
# Outcomes: target/mutants/<file>/mutants.out.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_MUTANTS_VERSION=27.1.0
# The CI set: the core's smallest files with the most logic per mutant, within the step's
# budget (about 4 minutes with the install; docs/mutation.md has the times).
CORE=(src/layout.rs src/bitmap.rs src/area.rs src/counter.rs)

# The tests that exercise each file (cargo test arguments).
tests_for() {
    case "$1" in
        src/layout.rs) echo --lib --test zone --test area --test config_fuzz ;;
        src/bitmap.rs) echo --lib --test zone --test model ;;
        src/area.rs) echo --lib --test area --test zone --test config_fuzz ;;
        src/zone.rs) echo --lib --test zone --test area --test counting --test zero --test config_fuzz --test model ;;
        src/counter.rs) echo --lib --test counting --test zero --test zone ;;
        src/array.rs) echo --lib --test array --test model ;;
        src/early.rs) echo --lib --test early ;;
        src/ratecheck.rs) echo --lib --test ratecheck ;;
        src/registry.rs) echo --lib --test registry ;;
        src/freebsd.rs) echo --lib --test freebsd_api --test hosted --test array --test zero ;;
        src/memory.rs | src/protect.rs | src/platform.rs | src/error.rs) echo --lib --test zone --test counting --test platform_macro --test hosted ;;
        */arch/x86_64/*) echo --lib --test counting --test zone --test hosted --test disasm ;;
        src/capi/*) echo --lib --test capi --test config_fuzz ;;
        src/rseq/*) echo --lib --test rseq ;;
        *) echo --lib --tests ;;
    esac
}

if ! cargo mutants --version 2>/dev/null | grep -qxF "cargo-mutants $CARGO_MUTANTS_VERSION"; then
    start=$(date +%s)
    # A debug build of the tool: it only drives cargo, and it builds in about half the time.
    cargo install --locked --debug --version "$CARGO_MUTANTS_VERSION" cargo-mutants
    echo "cargo-mutants install took $(($(date +%s) - start)) s"
fi

# Where a file's outcomes go: target/mutants/<file, every / or * as _>/mutants.out.
outdir() { echo "target/mutants/$(tr -c 'A-Za-z0-9.\n-' _ <<<"$1")"; }

files=("$@")
[ ${#files[@]} -gt 0 ] || files=("${CORE[@]}")
failed=()
for file in "${files[@]}"; do
    start=$(date +%s)
    out=$(outdir "$file")
    mkdir -p "$out"
    rc=0
    # shellcheck disable=SC2046 # tests_for's words are separate arguments
    cargo mutants --in-place --no-shuffle --colors never --file "$file" --output "$out" \
        -- $(tests_for "$file") || rc=$?
    echo "mutants: $file took $(($(date +%s) - start)) s (exit $rc)"
    # cargo-mutants exits 0 when every mutant was caught or unviable, 2 on a missed one, 3 on
    # a timeout (and none missed: the mutant made the tests hang, which is not a pass; the
    # mutant is listed in timeout.txt), 1 or 4 on a broken run or failing baseline.
    case $rc in 0 | 3) ;; *) failed+=("$file") ;; esac
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAIL: surviving mutants (or a failed run) in: ${failed[*]}"
    for file in "${failed[@]}"; do
        cat "$(outdir "$file")/mutants.out/missed.txt" 2>/dev/null || true
    done
    exit 1
fi
echo "mutants: every mutant caught (or unviable) in ${files[*]}"

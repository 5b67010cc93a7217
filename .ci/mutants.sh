#!/usr/bin/env bash
# CI part "mutants": mutation testing with cargo-mutants (docs/mutation.md).
#
#   .ci/mutants.sh                 the CI step: the mutants in the code the last commit
#                                  changed (src/, arch/), at most MUTANTS_MAX (10) of them;
#                                  when it changed no mutable code, a slice of at most
#                                  MUTANTS_MAX mutants of one core file, a different slice
#                                  for each commit
#   .ci/mutants.sh FILE...         every mutant of those files (globs of
#                                  `cargo mutants --list-files`), as docs/mutation.md's run
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
# The CI step's bound: 6 to 12 s a mutant on a 2-core machine (docs/mutation.md), so 10 are
# one to two minutes.
MUTANTS_MAX=${MUTANTS_MAX:-10}
# When the last commit changed no mutable code: one slice of one of these, by commit (a
# quoted glob is one module's files, as `cargo mutants --file` reads it).
CORE=(src/zone.rs src/layout.rs src/bitmap.rs src/area.rs src/counter.rs src/array.rs
    src/early.rs src/ratecheck.rs 'src/registry/*.rs' src/freebsd.rs src/zone/global.rs)

# The tests that exercise each file (cargo test arguments).
tests_for() {
    case "$1" in
        src/layout.rs) echo --lib --test zone --test area --test config_fuzz ;;
        src/bitmap.rs) echo --lib --test zone --test model --test slots ;;
        src/area.rs) echo --lib --test area --test zone --test config_fuzz ;;
        src/zone.rs) echo --lib --test zone --test area --test counting --test zero --test config_fuzz --test model --test grow ;;
        src/zone/global.rs) echo --lib --test freebsd_api --test capi --test array --test grow ;;
        src/chunk.rs | src/zone/*) echo --lib --test grow --test zone --test model ;;
        src/counter.rs) echo --lib --test counting --test zero --test zone ;;
        src/array.rs) echo --lib --test array --test model --test group ;;
        src/early.rs) echo --lib --test early ;;
        src/ratecheck.rs) echo --lib --test ratecheck ;;
        src/approx.rs) echo --lib --test approx --test ratecheck ;;
        src/registry/*) echo --lib --test registry --test group --test export ;;
        src/group.rs) echo --lib --test group --test array --test registry --test capi ;;
        src/export.rs) echo --lib --test export ;;
        src/freebsd.rs) echo --lib --test freebsd_api --test hosted --test array --test zero ;;
        src/memory.rs | src/protect.rs | src/platform/* | src/error.rs) echo --lib --test zone --test counting --test platform_macro --test hosted ;;
        */arch/x86_64/*) echo --lib --test counting --test zone --test hosted --test disasm ;;
        src/capi/*) echo --lib --test capi --test capi_early --test capi_null_slot --test capi_approx --test config_fuzz --test export ;;
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

# mutate FILE [cargo-mutants options...]: one file's mutants, with its tests.
failed=()
mutate() {
    local file=$1 start out rc=0
    shift
    start=$(date +%s)
    out=$(outdir "$file")
    mkdir -p "$out"
    # shellcheck disable=SC2046 # tests_for's words are separate arguments
    cargo mutants --in-place --no-shuffle --colors never --file "$file" --output "$out" "$@" \
        -- $(tests_for "$file") || rc=$?
    echo "mutants: $file took $(($(date +%s) - start)) s (exit $rc)"
    # cargo-mutants exits 0 when every mutant was caught or unviable, 2 on a missed one, 3 on
    # a timeout (which it reports over a missed one: read missed.txt, not the code), 1 or 4
    # on a broken run or a failing baseline. A timeout (the mutant made the tests hang, which
    # is not a pass; listed in timeout.txt) counts as caught.
    if [ -s "$out/mutants.out/missed.txt" ] || ! [[ $rc =~ ^[023]$ ]]; then
        failed+=("$file")
    fi
}

# A number from the commit, to pick a different slice (and fallback file) for each commit.
seed=$(($(git rev-parse HEAD 2>/dev/null | cut -c1-6 | sed 's/^/0x/' || echo 0)))
ran=0
# bounded FILE [cargo-mutants options...]: FILE's mutants (with the options' filter), or one
# slice of them when there are more than what is left of MUTANTS_MAX.
bounded() {
    local file=$1 count left shards shard
    count=$(cargo mutants --list --file "$@" | grep -c ':[0-9]*:[0-9]*: ' || true)
    [ "$count" -gt 0 ] || return 0
    left=$((MUTANTS_MAX - ran))
    if [ "$left" -le 0 ]; then
        echo "mutants: $file: $count mutants, over the bound: not run"
        return 0
    fi
    shards=$(((count + left - 1) / left))
    shard=$((seed % shards))
    ran=$((ran + (count + shards - 1) / shards))
    echo "mutants: $file: $count mutants, shard $shard/$shards"
    mutate "$@" --shard "$shard/$shards"
}

if [ $# -gt 0 ]; then
    for file in "$@"; do mutate "$file"; done
else
    # The last commit's changes to the product, as cargo-mutants names its files.
    diff=target/mutants/last-commit.diff
    mkdir -p target/mutants
    changed=()
    if git rev-parse -q --verify HEAD~1 >/dev/null; then
        git diff HEAD~1 HEAD -- src arch >"$diff"
        mapfile -t changed < <(git diff --name-only HEAD~1 HEAD -- src arch | grep '\.rs$' || true)
    fi
    listed=$(cargo mutants --list-files | sed 's|^src/\.\./||')
    for file in "${changed[@]}"; do
        grep -qxF "$file" <<<"$listed" || continue # excluded (.cargo/mutants.toml) or removed
        name=$file
        [[ $file == arch/* ]] && name="**/$file"
        bounded "$name" --in-diff "$diff"
    done
    if [ "$ran" -eq 0 ]; then
        file=${CORE[$((seed % ${#CORE[@]}))]}
        echo "mutants: the last commit changed no mutable product code; a slice of $file"
        bounded "$file"
    fi
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAIL: surviving mutants (or a failed run) in: ${failed[*]}"
    for file in "${failed[@]}"; do
        cat "$(outdir "$file")/mutants.out/missed.txt" 2>/dev/null || true
    done
    exit 1
fi
echo "mutants: no mutant survived"

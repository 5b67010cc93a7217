#!/usr/bin/env bash
# CI part "semver": no break of the public API lands unannounced. `cargo semver-checks`
# (crates.io) compares the rustdoc of this tree with that of the last release and names each
# break (a removed or moved item, a changed signature, a new variant of an exhaustive enum, a
# removed feature...).
#
# The rule: the breaks since the last release are exactly the ones in .ci/semver-breaks.txt,
# each of which CHANGELOG.md's Unreleased section announces (a rename or move with its old and
# new path). A break not in that list fails with its lint and item; a listed break that is
# no longer reported fails too, so the list stays the truth. Breaking on purpose is: the
# change, its CHANGELOG line, and the lines this script prints added to the list.
#
# The version: Cargo.toml says 0.1.0 until the release. The Unreleased work breaks the API, so
# that release is 0.2.0 (before 1.0 a minor bump may break; semver-checks calls 0.1 -> 0.2 a
# major release, and so would pass every break with the version raised: it could then catch
# no new one until the next release, which is why the version stays and the list decides).
# At the release: the version becomes 0.2.0 (with the docs' `version = "0.1"` lines, which
# .ci/cquickstart.sh's [patch] needs to match), RELEASED the release commit, and the list
# empties.
#
# RELEASED: the crate is not published and has no tags, so the baseline is a commit:
# 2ea5b7a, the last one before the first change CHANGELOG.md lists as Unreleased (404d04b,
# "features: sim is the host simulation"). The CHANGELOG was first written (486fce3) with a
# `## 0.1.0` section describing that tree and an Unreleased section beside it, so no commit
# has a complete 0.1.0 section without an Unreleased one; 2ea5b7a is the tree it describes.
#
# Features: the API as docs.rs documents it (Cargo.toml's [package.metadata.docs.rs]
# features; the kernel API is in every rustdoc through cfg(doc)). 0.1.0 had no `sim`: its
# `std` was the simulation, so its set is the same names less `sim`.
#
# The tool: each cargo-semver-checks release reads the rustdoc JSON formats of a range of
# rustc versions; 0.51.0 (the newest, rust-version 1.93) reads the installed stable's (rustc
# 1.95). It is installed when missing: `cargo install --locked` took 11 minutes on 2 shared
# cores (about 11 minutes of CPU; its release profile's LTO is not what costs: without it, the
# same), once per machine. The check builds the rustdoc JSON of this tree and of the baseline
# and compares them: 12 s from a clean target/, 2 s warm.
set -euo pipefail
cd "$(dirname "$0")/.."

SEMVER_CHECKS_VERSION=0.51.0
RELEASED=2ea5b7a4b43c47ec60eafc99f95b460fc13d37b5   # 0.1.0, as above
accepted=.ci/semver-breaks.txt

export PATH="$HOME/.cargo/bin:$PATH"
if ! cargo semver-checks --version 2>/dev/null | grep -qxF "cargo-semver-checks $SEMVER_CHECKS_VERSION"; then
    echo "== installing cargo-semver-checks $SEMVER_CHECKS_VERSION"
    start=$SECONDS
    cargo install --locked cargo-semver-checks --version "$SEMVER_CHECKS_VERSION"
    echo "installed in $((SECONDS - start)) s"
fi

# A shallow clone lacks the baseline.
git cat-file -e "$RELEASED^{commit}" 2>/dev/null || git fetch --quiet --unshallow origin

docs_rs_features=$(sed -n '/^\[package.metadata.docs.rs\]/,/^\[/s/^features = \[\(.*\)\]/\1/p' Cargo.toml \
    | tr -d '" ')
[ -n "$docs_rs_features" ] || { echo "FAIL: no features in Cargo.toml's [package.metadata.docs.rs]"; exit 1; }
released_features=$(tr ',' '\n' <<<"$docs_rs_features" | grep -vx sim | paste -sd,)

echo "== cargo semver-checks against 0.1.0 ($RELEASED), as a release that may not break"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
status=0
CARGO_TERM_COLOR=never cargo semver-checks check-release --baseline-rev "$RELEASED" \
    --release-type minor --only-explicit-features \
    --baseline-features "$released_features" --current-features "$docs_rs_features" \
    >"$log" 2>&1 || status=$?
echo "(semver-checks: $((SECONDS - start)) s, exit status $status)"
if [ "$status" != 0 ] && ! grep -q '^--- failure ' "$log"; then
    cat "$log"
    echo "FAIL: cargo semver-checks did not run to a verdict (above)"
    exit 1
fi
# One line per break, `lint: item`, without the files' paths (they name this checkout).
found=$(awk '
    /^--- failure / { lint = $3; sub(/:$/, "", lint); listing = 0; next }
    /^Failed in:/ { listing = 1; next }
    listing && /^  / { sub(/^  /, ""); print lint ": " $0; next }
    listing && !/^  / { listing = 0 }' "$log" \
    | sed -E 's/,? (previously )?in (file )?\/.*$//' | sort -u)
announced=$(grep -v '^#' "$accepted" | grep -v '^$' | sort -u)
new=$(comm -23 <(echo "$found") <(echo "$announced") | grep -v '^$' || true)
gone=$(comm -13 <(echo "$found") <(echo "$announced") | grep -v '^$' || true)
echo "$(grep -c . <<<"$found") breaks since 0.1.0 reported; $accepted lists $(grep -c . <<<"$announced")"
if [ -n "$new" ]; then
    echo "FAIL: breaks since 0.1.0 that $accepted does not list:"
    sed 's/^/  /' <<<"$new"
    echo "Announce each in CHANGELOG.md's Unreleased section (a rename with the old path and the new),"
    echo "then add the lines above to $accepted. The report:"
    cat "$log"
    exit 1
fi
if [ -n "$gone" ]; then
    echo "FAIL: $accepted lists breaks that are no longer reported (remove them, and their CHANGELOG line if the break is undone):"
    sed 's/^/  /' <<<"$gone"
    exit 1
fi
echo "semver: every break since 0.1.0 is announced"

#!/usr/bin/env bash
# CI part "package": checks the crate a user installs, not the repository.
#  1. `cargo package`; the .crate holds only what ships (src/, arch/, include/, README.md,
#     LICENSE, CHANGELOG.md and cargo's own files), with src/capi/ and include/pcpu_counter.h,
#     and no boot code.
#  2. The .crate unpacked outside the repository (none of its .cargo/ or workspace applies)
#     builds with no features, each public feature alone and all together (warnings are
#     errors), and for x86_64-unknown-none (default features, alloc,capi); its doctests run.
#  3. `cargo metadata` of the package lists exactly the public features.
#  4. rust-version: that toolchain (rustup) builds the unpacked library; when rustup cannot
#     fetch it the step says what is missing and is skipped.
#  5. The probe (.ci/probe), a program outside the project with a path dependency on the
#     unpacked package, runs for each public feature alone and all together, in debug and
#     release: exact sums from several threads through the API that the features offer, and,
#     where the kernel-style API is not offered (a hosted target without `sim`), its
#     absent.rs fails to build because the items are configured out.
# Build folders are target/package-check/{package,crate,msrv,probe} (kept, so a second run is
# warm); the unpacked package and the probe are copied to a fixed folder under $TMPDIR, made
# afresh each run. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

expected_features="alloc capi custom-protection default riscv-gp rseq sim std"
# Each public feature alone, none, and all (`--all-features`).
feature_sets=(none alloc std rseq capi custom-protection riscv-gp sim all)
bare_metal=x86_64-unknown-none

out=$repo/target/package-check
# Outside the repository, one folder per checkout: paths stay the same from run to run, so
# the build folders stay warm.
work=${TMPDIR:-/tmp}/pcpu-counter-package-check-$(printf %s "$repo" | cksum | cut -d' ' -f1)
mkdir -p "$out"

part_start=$(date +%s)
step_start=
step() {
    local now
    now=$(date +%s)
    [ -z "$step_start" ] || echo "(step: $(( now - step_start )) s)"
    step_start=$now
    printf '\n== %s\n' "$*"
}
fail() {
    printf '\npackage: FAILED: %s\n' "$*" >&2
    exit 1
}
# cargo's flags for a feature set: `none`, `all` or a comma-separated list.
features_of() {
    case $1 in
        none) ;;
        all) echo --all-features ;;
        *) echo --features "$1" ;;
    esac
}

name=$(sed -n 's/^name = "\(.*\)"/\1/p' Cargo.toml | head -1)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$name" ] && [ -n "$version" ] || fail "no name/version in Cargo.toml"

# ---------------------------------------------------------------------------------------
step "1. cargo package ($name $version): the files that ship"
dirty=()
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    echo "note: the working tree has uncommitted changes: packaging with --allow-dirty (a CI clone is clean)"
    dirty=(--allow-dirty)
fi
# Verified below, more thoroughly than `cargo package`'s own check (default features only).
cargo package --quiet --no-verify --target-dir "$out" "${dirty[@]}"
crate=$out/package/$name-$version.crate
[ -f "$crate" ] || fail "cargo package made no $crate"
# What is in the .crate itself (cargo package --list says the same, before packing).
files=$(tar -tzf "$crate" | sed "s|^$name-$version/||" | grep -v '/$' | sort)
echo "$crate: $(wc -l <<<"$files") files, $(( $(stat -c %s "$crate") / 1024 )) KiB"
awk -F/ '{ print (NF > 1 ? $1 "/" : $1) }' <<<"$files" | uniq -c
stray=$(grep -vE '^(src|arch|include)/|^(README\.md|LICENSE|CHANGELOG\.md|Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|\.cargo_vcs_info\.json)$' <<<"$files" || true)
[ -z "$stray" ] || fail "files outside src/, arch/, include/ and the top-level docs are in the package (Cargo.toml's include = [...] should leave them out):
$stray"
boot=$(grep -E '(^|/)boot/' <<<"$files" || true)
[ -z "$boot" ] || fail "boot code is in the package (it belongs to the test beds):
$boot"
for required in src/lib.rs src/capi/ include/pcpu_counter.h README.md LICENSE; do
    grep -q "^$required" <<<"$files" \
        || fail "$required is missing from the package (check Cargo.toml's include = [...])"
done
[ -n "$(grep -x CHANGELOG.md <<<"$files")" ] || echo "note: no CHANGELOG.md in the package"
echo "ok: only src/, arch/, include/ and the top-level docs; src/capi/ and include/pcpu_counter.h present"

# ---------------------------------------------------------------------------------------
step "2. the unpacked package: builds, bare metal, doctests"
rm -rf "$work"
mkdir -p "$work"
tar -xzf "$crate" -C "$work"
mv "$work/$name-$version" "$work/$name"
pkg=$work/$name
echo "unpacked in $pkg"
# `cargo` in the unpacked package, its own build folder, the shipped Cargo.lock as it is.
in_pkg() {
    (cd "$pkg" && cargo "$@" --locked --target-dir "$out/crate")
}
for set in "${feature_sets[@]}"; do
    t=$(date +%s)
    # shellcheck disable=SC2046
    RUSTFLAGS="-D warnings" in_pkg build --quiet $(features_of "$set") \
        || fail "the unpacked package does not build with features: $set (cd $pkg && cargo build $(features_of "$set"))"
    echo "ok: cargo build $(features_of "$set") ($(( $(date +%s) - t )) s)"
done

# One bare-metal target: rustup's prebuilt core/alloc, else Debian's cargo building them from
# source (see xtask/src/toolchain.rs; .ci/cross.sh installs rustc-web cargo-web rust-web-src).
if command -v rustup >/dev/null \
    && { rustup target list --installed 2>/dev/null | grep -qx "$bare_metal" \
         || rustup target add "$bare_metal"; }; then
    bm_cargo=(cargo)
    bm_args=()
    bm_how="rustup, prebuilt core/alloc"
elif [ -x /usr/bin/cargo ] && [ -f /usr/lib/rustlib/src/rust/library/core/src/lib.rs ]; then
    bm_cargo=(env PATH="/usr/bin:$PATH" RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
        RUSTC_BOOTSTRAP=1 /usr/bin/cargo)
    bm_args=(-Zbuild-std=core,alloc -Zbuild-std-features=compiler-builtins-mem)
    bm_how="Debian's /usr/bin/cargo, -Zbuild-std"
else
    fail "no toolchain builds $bare_metal: run \`rustup target add $bare_metal\`, or \`apt-get install rustc-web cargo-web rust-web-src\` (Debian's cargo with the library source, for -Zbuild-std)"
fi
for set in none alloc,capi; do
    t=$(date +%s)
    # shellcheck disable=SC2046
    (cd "$pkg" && RUSTFLAGS="-D warnings" "${bm_cargo[@]}" build --quiet --locked \
        --target-dir "$out/crate" --target "$bare_metal" "${bm_args[@]}" $(features_of "$set")) \
        || fail "the unpacked package does not build for $bare_metal with features: $set"
    echo "ok: $bare_metal ($bm_how) $(features_of "$set") ($(( $(date +%s) - t )) s)"
done

# The doctests need the features that the repository's dev-dependency on the crate itself
# turns on: `cargo package` drops that path-only dev-dependency, so they are named here.
doc_features=$(grep -E "^$name = \{ *path = \"\.\"" "$pkg/Cargo.toml.orig" \
    | sed -n 's/.*features *= *\[\([^]]*\)\].*/\1/p' | tr -d '" ' || true)
t=$(date +%s)
doc_log=$(in_pkg test --doc ${doc_features:+--features "$doc_features"} 2>&1) \
    || { echo "$doc_log"; fail "the unpacked package's doctests fail (cd $pkg && cargo test --doc --features $doc_features)"; }
passed=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' <<<"$doc_log" | awk '{ s += $1 } END { print s + 0 }')
[ "$passed" -gt 0 ] || { echo "$doc_log"; fail "no doctest ran in the unpacked package"; }
grep -E '^test result' <<<"$doc_log"
echo "ok: cargo test --doc --features $doc_features: $passed doctests ($(( $(date +%s) - t )) s)"

# ---------------------------------------------------------------------------------------
step "3. cargo metadata: the package's features are the public ones"
metadata=$(cargo metadata --format-version 1 --no-deps --manifest-path "$pkg/Cargo.toml")
# The package's "features" is the only object-valued "features" key (dependencies' are
# lists), and feature values are lists of strings: the keys are the `"name":[` inside it.
features=$(grep -o '"features":{[^}]*}' <<<"$metadata" | grep -o '"[^"]*":\[' \
    | sed 's/^"\(.*\)":\[$/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
echo "features: $features"
[ "$features" = "$expected_features" ] \
    || fail "the package's features are [$features]; the public ones are [$expected_features] (a test-only switch is a --cfg, not a feature)"
echo "ok: no feature but the public ones"

# ---------------------------------------------------------------------------------------
step "4. rust-version ${msrv:-(none)}: that toolchain builds the library"
if [ -z "$msrv" ]; then
    fail "Cargo.toml has no rust-version"
elif ! command -v rustup >/dev/null; then
    echo "SKIPPED: rustup is not installed, so toolchain $msrv cannot be fetched (install rustup from https://rustup.rs, then \`rustup toolchain install $msrv --profile minimal\`)"
elif ! msrv_log=$(rustup toolchain install "$msrv" --profile minimal --no-self-update 2>&1); then
    echo "$msrv_log" | tail -5
    echo "SKIPPED: rustup could not install toolchain $msrv (\`rustup toolchain install $msrv --profile minimal\` failed, above)"
else
    echo "$(rustup run "$msrv" rustc --version)"
    for set in none rseq,capi sim; do
        t=$(date +%s)
        # shellcheck disable=SC2046
        (cd "$pkg" && rustup run "$msrv" cargo build --quiet --locked --target-dir "$out/msrv" \
            $(features_of "$set")) \
            || fail "rust-version = \"$msrv\", but that toolchain does not build the unpacked package with features: $set"
        echo "ok: $msrv: cargo build $(features_of "$set") ($(( $(date +%s) - t )) s)"
    done
    if rustup target add --toolchain "$msrv" "$bare_metal" >/dev/null 2>&1; then
        t=$(date +%s)
        (cd "$pkg" && rustup run "$msrv" cargo build --quiet --locked --target-dir "$out/msrv" \
            --target "$bare_metal") \
            || fail "rust-version = \"$msrv\", but that toolchain does not build the unpacked package for $bare_metal"
        echo "ok: $msrv: cargo build --target $bare_metal ($(( $(date +%s) - t )) s)"
    else
        echo "skipped: $msrv for $bare_metal (\`rustup target add --toolchain $msrv $bare_metal\` failed)"
    fi
fi

# ---------------------------------------------------------------------------------------
step "5. the probe: a program outside the project on the unpacked package"
cp -r .ci/probe "$work/probe"
# The versions the package was tested with (cargo adds the probe itself).
[ -f "$pkg/Cargo.lock" ] && cp "$pkg/Cargo.lock" "$work/probe/Cargo.lock"
in_probe() {
    (cd "$work/probe" && RUSTFLAGS="-D warnings" cargo "$@" --target-dir "$out/probe")
}
for set in "${feature_sets[@]}"; do
    for profile in debug release; do
        t=$(date +%s)
        release=()
        [ "$profile" = debug ] || release=(--release)
        # shellcheck disable=SC2046
        probe_log=$(in_probe run --quiet "${release[@]}" $(features_of "$set") 2>&1) \
            || { echo "$probe_log"; fail "the probe fails with features: $set ($profile) (cd $work/probe && cargo run ${release[*]} $(features_of "$set"))"; }
        sed 's/^/   /' <<<"$probe_log"
        echo "ok: probe $(features_of "$set") $profile ($(( $(date +%s) - t )) s)"
    done
    # The kernel-style API: offered with `sim` (and on targets that are not hosted), absent
    # (configured out) on this hosted target otherwise.
    t=$(date +%s)
    if [ "$set" = sim ] || [ "$set" = all ]; then
        # shellcheck disable=SC2046
        absent_log=$(in_probe run --quiet --example absent $(features_of "$set") 2>&1) \
            || { echo "$absent_log"; fail "with features: $set the kernel-style API must be offered, but the probe's absent.rs does not build"; }
        echo "ok: $(features_of "$set"): pcpu_counter::Zone is offered ($absent_log) ($(( $(date +%s) - t )) s)"
    else
        # shellcheck disable=SC2046
        if absent_log=$(in_probe build --quiet --example absent $(features_of "$set") 2>&1); then
            fail "with features: $set on this hosted target, pcpu_counter::Zone must be configured out, but the probe's absent.rs builds"
        fi
        codes=$(grep -oE '^error\[E[0-9]+\]' <<<"$absent_log" | sort -u | tr '\n' ' ')
        if ! grep -qE '^error\[E0432\]: unresolved imports? .*`pcpu_counter::Zone`' <<<"$absent_log" \
            || ! grep -q 'configured out' <<<"$absent_log" \
            || grep -oE '^error\[E[0-9]+\]' <<<"$absent_log" | grep -qv 'E0432'; then
            echo "$absent_log"
            fail "with features: $set, absent.rs fails to build, but not only because pcpu_counter::Zone is configured out (errors: $codes)"
        fi
        echo "ok: $(features_of "$set"): pcpu_counter::Zone is configured out ($codes; rustc: \"$(grep -o 'found an item that was configured out' <<<"$absent_log" | head -1)\") ($(( $(date +%s) - t )) s)"
    fi
done

step "done"
echo "package: all checks passed in $(( $(date +%s) - part_start )) s"

#!/usr/bin/env bash
# CI part "package": checks the crate a user installs, not the repository.
#  1. `cargo package`: the .crate holds only what ships (src/, arch/, include/, build.rs, the
#     manuals docs/ and examples/ that the crate docs render, README.md,
#     LICENSE, CHANGELOG.md and cargo's own files), src/capi/ and include/pcpu_counter.h
#     among them, and no boot code.
#  2. The .crate unpacked outside the repository (so none of the repository's .cargo/ or
#     workspace applies) builds with no features, each public feature alone and all together
#     (warnings are errors), and for x86_64-unknown-none (default features; alloc,capi); its
#     doctests run.
#  3. `cargo metadata` of the package lists exactly the public features.
#  4. rust-version: that toolchain (through rustup) builds the unpacked library; when rustup
#     cannot fetch it, the step says what is missing and is skipped.
#  5. The probe (.ci/probe/), a program outside the project with a path dependency on the
#     unpacked package, runs for each public feature alone and all together, in debug and
#     release: exact sums from several threads through the API the features offer; and its
#     driver.rs (a driver's code on the kernel-style API) builds, documents and runs with
#     every feature set: without `sim` every zone constructor refuses (Error::NoCpuRegister).
# A failed check is reported and the part goes on; it fails at the end, listing them all.
# Build folders: target/package-check/{package,crate,msrv,probe}, kept so that a second run is
# warm. The unpacked package and the probe are copied afresh each run into one fixed folder
# under $TMPDIR per checkout. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

expected_features="alloc capi custom-protection default platform-base riscv-gp rseq sim std"
# `none`, each public feature alone, and `all` (--all-features).
feature_sets=(none alloc std rseq capi custom-protection riscv-gp platform-base sim all)
bare_metal=x86_64-unknown-none

out=$repo/target/package-check
# Outside the repository, and the same path from run to run (the build folders stay warm).
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
problems=()
# A failed check: reported now, and the part fails at the end.
problem() {
    printf 'FAILED: %s\n' "$1"
    problems+=("$1")
}
# A failure after which nothing else can be checked.
fail() {
    printf '\npackage: FAILED: %s\n' "$*"
    exit 1
}
since() { echo "$(( $(date +%s) - $1 )) s"; }
# cargo's flags for a feature set (`none`, `all`, or a comma-separated list).
features_of() {
    case $1 in
        none) ;;
        all) echo --all-features ;;
        *) echo --features "$1" ;;
    esac
}
# The same with a leading space, for messages (nothing for `none`).
flags() { features_of "$1" | sed 's/^/ /'; }

name=$(sed -n 's/^name = "\(.*\)"/\1/p' Cargo.toml | head -1)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$name" ] && [ -n "$version" ] || fail "no name or version in Cargo.toml"

# ---------------------------------------------------------------------------------------
step "1. cargo package ($name $version): the files that ship"
dirty=()
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
    echo "note: uncommitted changes in the working tree: packaging with --allow-dirty (a CI clone is clean)"
    dirty=(--allow-dirty)
fi
# --no-verify: cargo's own check builds default features only; the steps below do more.
cargo package --quiet --no-verify --target-dir "$out" "${dirty[@]}" \
    || fail "cargo package failed"
crate=$out/package/$name-$version.crate
[ -f "$crate" ] || fail "cargo package made no $crate"
# The .crate's own list (what `cargo package --list` announces, as packed).
files=$(tar -tzf "$crate" | sed "s|^$name-$version/||" | grep -v '/$' | sort)
echo "$crate: $(wc -l <<<"$files") files, $(( $(stat -c %s "$crate") / 1024 )) KiB"
awk -F/ '{ print (NF > 1 ? $1 "/" : $1) }' <<<"$files" | uniq -c
stray=$(grep -vE '^(src|arch|include|docs|examples)/|^(build\.rs|README\.md|LICENSE|CHANGELOG\.md|Cargo\.toml|Cargo\.toml\.orig|Cargo\.lock|\.cargo_vcs_info\.json)$' <<<"$files" || true)
[ -z "$stray" ] || problem "files outside src/, arch/, include/, docs/, examples/ and the top-level docs are in the package (Cargo.toml's include = [...] should leave them out): $(echo $stray)"
boot=$(grep -E '(^|/)boot/' <<<"$files" || true)
[ -z "$boot" ] || problem "boot code is in the package ($(wc -l <<<"$boot") files; it belongs to the test beds): $(echo $boot)"
for required in src/lib.rs src/capi/ include/pcpu_counter.h README.md LICENSE CHANGELOG.md; do
    grep -q "^$required" <<<"$files" \
        || problem "$required is missing from the package (Cargo.toml's include = [...])"
done
[ ${#problems[@]} -gt 0 ] \
    || echo "ok: only src/, arch/, include/ and the top-level docs; no boot code; src/capi/ and include/pcpu_counter.h present"

# ---------------------------------------------------------------------------------------
step "2. the unpacked package: each feature, bare metal, doctests"
rm -rf "$work"
mkdir -p "$work"
tar -xzf "$crate" -C "$work"
mv "$work/$name-$version" "$work/$name"
pkg=$work/$name
echo "unpacked in $pkg"
# cargo in the unpacked package, with its own build folder and the shipped Cargo.lock as is.
in_pkg() {
    (cd "$pkg" && cargo "$@" --locked --target-dir "$out/crate")
}
for set in "${feature_sets[@]}"; do
    t=$(date +%s)
    # shellcheck disable=SC2046
    if RUSTFLAGS="-D warnings" in_pkg build --quiet $(features_of "$set"); then
        echo "ok: cargo build$(flags "$set") ($(since "$t"))"
    else
        problem "the unpacked package does not build (warnings are errors) with features: $set (cd $pkg && RUSTFLAGS='-D warnings' cargo build$(flags "$set"))"
    fi
done

# One bare-metal target: rustup's prebuilt core/alloc, else Debian's cargo building them from
# source (as xtask/src/toolchain.rs does; .ci/cross.sh installs rustc-web cargo-web
# rust-web-src).
bm_cargo=()
if command -v rustup >/dev/null \
    && { rustup target list --installed 2>/dev/null | grep -qx "$bare_metal" \
         || rustup target add "$bare_metal"; }; then
    bm_cargo=(cargo)
    bm_args=()
    bm_how="rustup, prebuilt core and alloc"
elif [ -x /usr/bin/cargo ] && [ -f /usr/lib/rustlib/src/rust/library/core/src/lib.rs ]; then
    bm_cargo=(env PATH="/usr/bin:$PATH" RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
        RUSTC_BOOTSTRAP=1 /usr/bin/cargo)
    bm_args=(-Zbuild-std=core,alloc -Zbuild-std-features=compiler-builtins-mem)
    bm_how="Debian's /usr/bin/cargo, core and alloc built with -Zbuild-std"
else
    problem "no toolchain builds $bare_metal: run \`rustup target add $bare_metal\`, or \`apt-get install rustc-web cargo-web rust-web-src\` (Debian's cargo with the library source, for -Zbuild-std)"
fi
if [ ${#bm_cargo[@]} -gt 0 ]; then
    for set in none alloc,capi; do
        t=$(date +%s)
        # shellcheck disable=SC2046
        if (cd "$pkg" && RUSTFLAGS="-D warnings" "${bm_cargo[@]}" build --quiet --locked \
            --target-dir "$out/crate" --target "$bare_metal" "${bm_args[@]}" $(features_of "$set")); then
            echo "ok: cargo build --target $bare_metal$(flags "$set") ($bm_how; $(since "$t"))"
        else
            problem "the unpacked package does not build for $bare_metal with features: $set ($bm_how)"
        fi
    done
fi

# The doctests need the features that the repository's dev-dependency on the crate itself
# turns on; `cargo package` drops that path-only dev-dependency, so they are named here.
doc_features=$(grep -E "^$name = \{ *path = \"\.\"" "$pkg/Cargo.toml.orig" \
    | sed -n 's/.*features *= *\[\([^]]*\)\].*/\1/p' | tr -d '" ' || true)
doc_cmd="cargo test --doc${doc_features:+ --features $doc_features}"
t=$(date +%s)
if doc_log=$(in_pkg test --doc ${doc_features:+--features "$doc_features"} 2>&1); then
    passed=$(sed -n 's/^test result: ok\. \([0-9]*\) passed.*/\1/p' <<<"$doc_log" \
        | awk '{ s += $1 } END { print s + 0 }')
    grep -E '^test result' <<<"$doc_log"
    if [ "$passed" -gt 0 ]; then
        echo "ok: $doc_cmd: $passed doctests passed ($(since "$t"))"
    else
        problem "no doctest ran in the unpacked package ($doc_cmd)"
    fi
else
    echo "$doc_log" | tail -60
    problem "the unpacked package's doctests fail (cd $pkg && $doc_cmd)"
fi

# ---------------------------------------------------------------------------------------
step "3. cargo metadata: the package's features are the public ones"
metadata=$(cargo metadata --format-version 1 --no-deps --manifest-path "$pkg/Cargo.toml")
# The package's "features" is the only object-valued "features" key (a dependency's is a
# list), and a feature's value is a list of strings: the keys are the `"name":[` inside it.
features=$(grep -o '"features":{[^}]*}' <<<"$metadata" | grep -o '"[^"]*":\[' \
    | sed 's/^"\(.*\)":\[$/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
echo "features: $features"
if [ "$features" = "$expected_features" ]; then
    echo "ok: the public features and no other"
else
    problem "the package's features are [$features]; the public ones are [$expected_features] (a test-only switch is a --cfg, not a feature)"
fi

# ---------------------------------------------------------------------------------------
step "4. rust-version ${msrv:-(none)}: that toolchain builds the library"
if [ -z "$msrv" ]; then
    problem "Cargo.toml has no rust-version"
elif ! command -v rustup >/dev/null; then
    echo "SKIPPED: rustup is not installed, so toolchain $msrv cannot be fetched (install rustup from https://rustup.rs; then \`rustup toolchain install $msrv --profile minimal\`)"
elif ! msrv_log=$(rustup toolchain install "$msrv" --profile minimal --no-self-update 2>&1); then
    grep -E '^(error|warning)|^    [0-9]+: ' <<<"$msrv_log" | head -8 || true
    echo "SKIPPED: rustup could not install toolchain $msrv (\`rustup toolchain install $msrv --profile minimal\` failed, above): the toolchain $msrv is missing"
else
    rustup run "$msrv" rustc --version
    for set in none rseq,capi sim; do
        t=$(date +%s)
        # shellcheck disable=SC2046
        if (cd "$pkg" && rustup run "$msrv" cargo build --quiet --locked \
            --target-dir "$out/msrv" $(features_of "$set")); then
            echo "ok: $msrv: cargo build$(flags "$set") ($(since "$t"))"
        else
            problem "rust-version = \"$msrv\", but that toolchain does not build the unpacked package with features: $set"
        fi
    done
    if rustup target add --toolchain "$msrv" "$bare_metal" >/dev/null 2>&1; then
        t=$(date +%s)
        if (cd "$pkg" && rustup run "$msrv" cargo build --quiet --locked \
            --target-dir "$out/msrv" --target "$bare_metal" --features alloc,capi); then
            echo "ok: $msrv: cargo build --target $bare_metal --features alloc,capi ($(since "$t"))"
        else
            problem "rust-version = \"$msrv\", but that toolchain does not build the unpacked package for $bare_metal"
        fi
    else
        echo "skipped: $msrv for $bare_metal (\`rustup target add --toolchain $msrv $bare_metal\` failed)"
    fi
fi

# ---------------------------------------------------------------------------------------
step "5. the probe: a program outside the project on the unpacked package"
cp -r .ci/probe "$work/probe"
# The dependency versions the package ships with (cargo adds the probe itself).
[ ! -f "$pkg/Cargo.lock" ] || cp "$pkg/Cargo.lock" "$work/probe/Cargo.lock"
in_probe() {
    (cd "$work/probe" && RUSTFLAGS="-D warnings" cargo "$@" --target-dir "$out/probe")
}
for set in "${feature_sets[@]}"; do
    label="features: $set"
    for profile in debug release; do
        t=$(date +%s)
        args=(run)
        [ "$profile" = debug ] || args+=(--release)
        # shellcheck disable=SC2207
        args+=($(features_of "$set"))
        if probe_log=$(in_probe "${args[@]}" --quiet 2>&1); then
            sed 's/^/    /' <<<"$probe_log"
            echo "ok: probe, $label, $profile ($(since "$t"))"
        else
            sed 's/^/    /' <<<"$probe_log"
            problem "the probe fails, $label, $profile (cd $work/probe && cargo ${args[*]})"
        fi
    done
    # The kernel-style API on this hosted target: a driver's code builds and documents with
    # any features, and runs: without `sim` no zone is made (Error::NoCpuRegister).
    t=$(date +%s)
    # shellcheck disable=SC2046
    if driver_log=$(in_probe run --quiet --example driver $(features_of "$set") 2>&1) \
        && doc_log=$(in_probe doc --quiet --no-deps --example driver $(features_of "$set") 2>&1); then
        echo "ok: $label: a driver on the kernel API builds, documents and runs: $(tail -1 <<<"$driver_log") ($(since "$t"))"
    else
        printf '%s\n%s\n' "${driver_log:-}" "${doc_log:-}" | grep -E '^(error|warning)|^ *-->|panicked' | sed 's/^/    /'
        problem "$label: the probe's driver.rs (the kernel API on a hosted target) does not build, document or run as it must"
    fi
done

# ---------------------------------------------------------------------------------------
step "summary"
if [ ${#problems[@]} -gt 0 ]; then
    echo "package: ${#problems[@]} check(s) FAILED ($(since "$part_start")):"
    printf ' - %s\n' "${problems[@]}"
    exit 1
fi
echo "package: all checks passed ($(since "$part_start"))"

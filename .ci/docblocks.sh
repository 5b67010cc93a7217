#!/usr/bin/env bash
# The Rust blocks of the README and docs/*.md that no doctest can compile (they are for a
# bare-metal target, or use crates the package does not depend on): each such block is fenced
# `rust,ignore` and preceded by a line naming what compiles it,
#   <!-- compiled by .ci/docblocks.sh: target=<triple> [features=<a,b>] [deps=<crate@version,...>] -->
# or, for a block another CI script extracts and builds,
#   <!-- compiled by .ci/<script>.sh -->
# This script fails on an ignored Rust block without such a line, and builds each block marked
# for it as the `src/lib.rs` of a crate of its own (`#![no_std]` added where the block lacks
# it; rustdoc's hidden lines, `# ...`, shown) for its target, with this checkout as
# `pcpu-counter`, warnings as errors, so that a block a user copies compiles cleanly for the
# target it is written for.
# Needs rustup (it adds each target). About 30 s, most of it the dependencies' first build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="$root/target/docblocks"
mkdir -p "$out"
files=(README.md docs/*.md)

# Every ignored Rust block, as `file:line:marker` (the marker: the line before the fence).
mapfile -t blocks < <(awk '
    /^```rust,ignore$/ { printf "%s:%d:%s\n", FILENAME, FNR, prev }
    { prev = $0 }' "${files[@]}")
[ "${#blocks[@]}" -gt 0 ] || { echo "FAIL: no ignored Rust block found (the scan is broken)"; exit 1; }

built=0
for entry in "${blocks[@]}"; do
    file=${entry%%:*} rest=${entry#*:}
    line=${rest%%:*} marker=${rest#*:}
    case "$marker" in
        "<!-- compiled by .ci/docblocks.sh: "*" -->") ;;
        "<!-- compiled by .ci/"*".sh -->")
            script=${marker#<!-- compiled by }
            script=${script% -->}
            grep -qF "$file" "$script" \
                || { echo "FAIL: $file:$line says $script compiles it, and $script never names $file"; exit 1; }
            echo "$file:$line: compiled by $script"
            continue ;;
        *)
            echo "FAIL: $file:$line: a rust,ignore block that nothing compiles; say what does on the line above it (see .ci/docblocks.sh)"
            exit 1 ;;
    esac
    spec=${marker#<!-- compiled by .ci/docblocks.sh: }
    spec=${spec% -->}
    target="" features="" deps=""
    for word in $spec; do
        case "$word" in
            target=*) target=${word#target=} ;;
            features=*) features=${word#features=} ;;
            deps=*) deps=${word#deps=} ;;
            *) echo "FAIL: $file:$line: unknown word '$word' in its marker"; exit 1 ;;
        esac
    done
    [ -n "$target" ] || { echo "FAIL: $file:$line: its marker names no target"; exit 1; }
    crate="$out/$(tr -c 'A-Za-z0-9\n' _ <<<"$file")_$line"
    mkdir -p "$crate/src"
    {
        echo '[package]'
        echo "name = \"docblock\""
        echo 'version = "0.0.0"'
        echo 'edition = "2021"'
        echo 'publish = false'
        echo '[workspace]'
        echo '[dependencies]'
        feature_list=$(sed 's/[^,][^,]*/"&"/g' <<<"$features")
        echo "pcpu-counter = { path = \"$root\", features = [$feature_list] }"
        IFS=, read -ra dep_list <<<"$deps"
        for dep in "${dep_list[@]}"; do
            echo "${dep%@*} = \"${dep#*@}\""
        done
    } >"$crate/Cargo.toml"
    # The block, its hidden lines shown (rustdoc's `# ` prefix, or a lone `#`).
    awk -v from="$line" '
        FNR == from { on = 1; next }
        on && /^```$/ { exit }
        on { if ($0 == "#") print ""; else if (substr($0, 1, 2) == "# ") print substr($0, 3); else print }' \
        "$file" >"$crate/src/body.rs"
    { grep -q '^#!\[no_std\]' "$crate/src/body.rs" || echo '#![no_std]'; cat "$crate/src/body.rs"; } \
        >"$crate/src/lib.rs"
    rm "$crate/src/body.rs"
    rustup target add "$target" >/dev/null 2>&1 || rustup target add "$target"
    echo "== $file:$line for $target${features:+, features $features}${deps:+, with $deps}"
    start=$SECONDS
    (cd "$crate" && RUSTFLAGS="-D warnings" cargo build -q --target "$target" --target-dir "$out/build") \
        || { echo "FAIL: $file:$line does not compile for $target (the crate: $crate)"; exit 1; }
    echo "   compiled in $((SECONDS - start)) s"
    built=$((built + 1))
done
echo "docblocks: ${#blocks[@]} ignored Rust blocks, $built compiled here, the others by the scripts named"

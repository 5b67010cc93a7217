#!/usr/bin/env bash
# CI part "verify": `cargo xtask verify`: the loom models of the protocols (each must also
# fail its broken variants), ThreadSanitizer on the simulation suite (its standard library
# built instrumented from Debian's library source: rust-web-src, installed here if missing,
# as .ci/cross.sh does, or the nightly's rust-src where installed; the TSan runtime is the
# rustup nightly's), Miri on the portable core (components installed below; where `cargo
# miri` or rust-src is missing, the next best, named in its output), the property
# tests and their longer fuzz run. A missing tool is printed and skipped, not a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's rustc/cargo with the library source, as .ci/qemu.sh checks for them.
if ! { [ -x /usr/bin/cargo ] && [ -f /usr/lib/rustlib/src/rust/library/std/src/lib.rs ]; } \
    && command -v apt-get >/dev/null; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        rustc-web cargo-web rust-web-src
fi
# Miri and the library source it builds its sysroot from (and from which the tsan step then
# builds its instrumented std). A failure here is tolerated: the miri step then names what is
# missing and runs its next best.
if command -v rustup >/dev/null; then
    rustup component add --toolchain nightly miri rust-src \
        || echo "rustup could not add miri and rust-src to nightly: the miri step says what is missing"
fi
start=$(date +%s)
cargo xtask verify "$@"
echo "cargo xtask verify took $(( $(date +%s) - start )) s"

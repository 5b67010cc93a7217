#!/usr/bin/env bash
# The C ABI (issue 6): header in sync with the Rust signatures, the C test program on the
# host simulation, and the freestanding kernel check compiling for a kernel; the no_std
# library for C-only kernels per target (x86_64, aarch64, i586, riscv64gc, riscv64imac), every
# member of it linked into a C kernel of its ABI (issue 36: testbeds/capi-kernel/link_check.sh),
# its footprint in a minimal C kernel (issue 20: tests/c/footprint.sh), and every call's
# worst-case stack in those libraries (issue 30: cargo xtask stack).
# Idempotent; needs gcc, the cross gcc/binutils (installed if missing) and crates.io (for
# cbindgen, installed once).
set -euo pipefail
cd "$(dirname "$0")/.."

CBINDGEN_VERSION=0.29.4
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_CAPI:-$PWD/target/capi}"

need=()
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v g++ >/dev/null || need+=(g++)
command -v clang >/dev/null || need+=(clang)
# The header check and tests/c/footprint.sh compile and link for every kernel arch.
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu)
command -v i686-linux-gnu-gcc >/dev/null || need+=(gcc-i686-linux-gnu binutils-i686-linux-gnu)
command -v riscv64-linux-gnu-gcc >/dev/null || need+=(gcc-riscv64-linux-gnu binutils-riscv64-linux-gnu)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi
if ! cbindgen --version 2>/dev/null | grep -q "$CBINDGEN_VERSION"; then
    echo "== installing cbindgen $CBINDGEN_VERSION"
    cargo install cbindgen --locked --version "$CBINDGEN_VERSION"
fi
export PATH="$HOME/.cargo/bin:$PATH"

echo "== header check: include/pcpu_counter.h against src/capi/ (cbindgen)"
generated="$(mktemp)"
trap 'rm -f "$generated"' EXIT
cbindgen --quiet --config cbindgen.toml --crate pcpu-counter --output "$generated"
if ! diff -u include/pcpu_counter.h "$generated"; then
    echo "FAIL: include/pcpu_counter.h differs from the Rust signatures in src/capi/."
    echo "      Regenerate: cbindgen --config cbindgen.toml --crate pcpu-counter --output include/pcpu_counter.h"
    exit 1
fi

echo "== the header's inline fast path: compile matrix and disassembly (tests/c/header_check.sh)"
bash tests/c/header_check.sh

echo "== Rust side of the C ABI: tests/capi.rs and the capi doctests"
if [ "${PCPU_CI_SUITE_RAN:-}" = 1 ]; then
    # .ci/run's `cargo test` ran both (the suite's dev-dependency on the crate enables
    # `capi`); again they would compile the 45 doctests a second time (about 20 s).
    echo "skipped: .ci/run's cargo test ran them"
else
    # In the root target folder, not this script's: after a `cargo test` these build
    # nothing again (in a folder of their own they built the crate and every
    # dev-dependency, about 18 s).
    env -u CARGO_TARGET_DIR cargo test --quiet --features capi --test capi
    env -u CARGO_TARGET_DIR cargo test --quiet --features capi --doc capi::
fi

echo "== static library (testbeds/capi-host/)"
cargo build --quiet --manifest-path testbeds/capi-host/Cargo.toml
lib="$CARGO_TARGET_DIR/debug/libpcpu_counter_capi.a"

echo "== C test program (gcc -Wall -Wextra -Werror) on the host simulation"
out="$CARGO_TARGET_DIR/capi_test"
gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Iinclude tests/c/capi_test.c tests/c/kernel_check.c \
    "$lib" -lpthread -ldl -lm -o "$out"
"$out"

echo "== FreeBSD-style C (tests/c/freebsd_style.c) on the host simulation"
gcc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pedantic -Iinclude -Itests/c \
    tests/c/freebsd_host.c tests/c/freebsd_style.c "$lib" -lpthread -ldl -lm -o "$CARGO_TARGET_DIR/freebsd_host"
"$CARGO_TARGET_DIR/freebsd_host"

echo "== freestanding kernel check (no libc)"
gcc -std=c11 -c -ffreestanding -nostdlib -fno-pic -mno-red-zone -mcmodel=kernel -mno-sse -O2 \
    -Wall -Wextra -Werror -Iinclude tests/c/kernel_check.c -o "$CARGO_TARGET_DIR/kernel_check.o"
if nm -u "$CARGO_TARGET_DIR/kernel_check.o" | grep -v ' counter_'; then
    echo "FAIL: kernel_check.o needs symbols other than the C API's"
    exit 1
fi
echo "== the C ABI without std, for a kernel (x86_64-unknown-none)"
if [ -x /usr/bin/cargo ] && [ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/src/rust/library" ]; then
    # With rustup's prebuilt core where its x86_64-unknown-none target is installed (.ci/run's
    # examples step adds it: about 3 s), else Debian's cargo with core from source (about 40 s).
    if command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-none; then
        CARGO_TARGET_DIR="$CARGO_TARGET_DIR/cross" \
            cargo check --quiet --lib --target x86_64-unknown-none --features capi
    else
        PATH="/usr/bin:$PATH" RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$CARGO_TARGET_DIR/cross" \
            /usr/bin/cargo check --quiet --lib --target x86_64-unknown-none -Zbuild-std=core --features capi
    fi
    echo "== the no_std library for C-only kernels (artifacts: target/capi-lib/<target>/libpcpu_counter.a)"
    # Debian's cargo, core built from source (build.sh's size-optimised core, which the
    # footprint limits below are for; the libraries `cargo xtask qemu c` links, built once).
    # build.sh without CARGO, as the README runs it, is .ci/cquickstart.sh's.
    CARGO=/usr/bin/cargo bash testbeds/capi-kernel/build.sh x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none \
        riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf
    echo "== every member of each library linked into a C kernel of its ABI, with docs/c.md's linker advice (link_check.sh)"
    bash testbeds/capi-kernel/link_check.sh x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none \
        riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf
    echo "== the library's footprint in a minimal C kernel, per target (tests/c/footprint.sh)"
    bash tests/c/footprint.sh x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none \
        riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf
    echo "== the i386 inline counter_u64_add at run time (tests/c/i386_inline.sh)"
    bash tests/c/i386_inline.sh
    echo "== every call's worst-case stack, per library (cargo xtask stack; docs/c.md, Stack use)"
    # The libraries just built, disassembled, and the Rust QEMU kernels .ci/qemu.sh built
    # where they are there (.ci/run keeps target/qemu for this step): no build but the
    # xtask's own, in its own target folder (the one .ci/qemu.sh used), hence without this
    # script's CARGO_TARGET_DIR.
    kernels=()
    ls target/qemu/*/*/release/kernel >/dev/null 2>&1 && kernels=(--kernels)
    # --rust: testbeds/pins built in release for x86_64, aarch64 and riscv64 bare metal, its
    # probes of the Rust registry's streaming read (Registry::snapshot) bounded as the C calls.
    env -u CARGO_TARGET_DIR cargo xtask stack "${kernels[@]}" --rust
else
    echo "skipped: Debian's cargo with the library source is not installed"
fi
echo "capi: all checks passed"

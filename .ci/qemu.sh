#!/usr/bin/env bash
# CI part "qemu": boots the QEMU test kernels (x86_64, aarch64 and riscv64 on 4 vCPUs,
# aarch64 with LL/SC and LSE, i386 with and without CX8, riscv64 with its broken-add run, and
# the C-only kernels c-x86_64, c-aarch64, c-i386 (on a CX8 CPU and on a 486) and c-riscv64
# with their broken-add runs) and the Cortex-M
# firmware images (thumbv6m, thumbv7em, thumbv8m-dual, each with its broken-add run) with
# `cargo xtask qemu all`. Installs what is missing first; idempotent. About 5 minutes on 2
# cores for the kernels (four core builds), a few seconds per boot; c-i386 and c-riscv64 add
# the i586 and riscv64imac C libraries (about 45 s each from scratch; .ci/capi.sh then reuses
# the four C libraries of the c-* kernels, as .ci/run keeps target/capi-kernel for it) and
# about 15 s of compiling and booting; the Cortex-M images add
# about 2.5 minutes (three more core builds, 35-60 s each; the six boots take under 4 s).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v qemu-system-riscv64 >/dev/null || need+=(qemu-system-misc)   # with OpenSBI (-bios default)
command -v riscv64-linux-gnu-ld >/dev/null || need+=(binutils-riscv64-linux-gnu)
command -v aarch64-linux-gnu-ld >/dev/null || need+=(binutils-aarch64-linux-gnu)
command -v i686-linux-gnu-ld >/dev/null || need+=(binutils-i686-linux-gnu)
command -v ld >/dev/null || need+=(binutils)
command -v gcc >/dev/null || need+=(gcc)   # tests/c/kernel_check.c, the c-x86_64 kernel
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)   # c-aarch64
command -v i686-linux-gnu-gcc >/dev/null || need+=(gcc-i686-linux-gnu)         # c-i386
command -v riscv64-linux-gnu-gcc >/dev/null || need+=(gcc-riscv64-linux-gnu)   # c-riscv64
# Cortex-M firmware (thumbv6m on microbit, thumbv7em on mps2-an386, thumbv8m-dual on
# mps2-an521): qemu-system-arm is in qemu-system-arm, the images link with arm-none-eabi-ld.
command -v qemu-system-arm >/dev/null || need+=(qemu-system-arm)
command -v arm-none-eabi-ld >/dev/null || need+=(binutils-arm-none-eabi)
# Debian's rustc/cargo with the library source: the kernels build core with -Zbuild-std.
[ -x /usr/bin/cargo ] && [ -f /usr/lib/rustlib/src/rust/library/core/src/lib.rs ] \
    || need+=(rustc-web cargo-web rust-web-src)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q
    # `qemu-utils-` removes a newer qemu-utils that conflicts with Debian 12's qemu-system.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${need[@]}" qemu-utils-
fi

cargo xtask qemu all

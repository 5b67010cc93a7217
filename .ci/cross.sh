#!/usr/bin/env bash
# CI part "cross": installs Debian's rustc/cargo with the library source (for -Zbuild-std),
# qemu-user and the aarch64/i686/riscv64 cross toolchains, then runs `cargo xtask cross`: the
# host suite on aarch64 (qemu-aarch64), riscv64 (qemu-riscv64) and i686 (natively and under
# qemu-i386, CX8 and no-CX8 paths natively, CX8 under qemu) and the no_std builds for the bare-metal targets
# (thumbv6m-none-eabi and thumbv7em-none-eabihf among them: libraries only, no linker
# needed); then the window tests alone again beside busy loops (`cargo xtask cross --windows`).
# Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
    rustc-web cargo-web rust-web-src
    qemu-user
    gcc-aarch64-linux-gnu gcc-i686-linux-gnu gcc-riscv64-linux-gnu
    libc6-dev-arm64-cross libc6-dev-i386-cross libc6-dev-riscv64-cross
    binutils binutils-aarch64-linux-gnu binutils-i686-linux-gnu binutils-riscv64-linux-gnu
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Prebuilt standard libraries where rustup can fetch them: the bare-metal no_std builds then
# take about 1 s each instead of about 10, and the i686 and riscv64 suites skip building std.
# Where it cannot, xtask builds the library from source (Debian's cargo and library source).
rustup target add i686-unknown-linux-gnu riscv64gc-unknown-linux-gnu aarch64-unknown-linux-gnu \
    aarch64-unknown-none riscv64gc-unknown-none-elf thumbv6m-none-eabi thumbv7em-none-eabihf \
    || echo "rustup cannot add the cross targets: building their standard library from source"

start=$(date +%s)
cargo xtask cross
echo "cargo xtask cross took $(( $(date +%s) - start )) s"

# The window tests again with the machine loaded, as .ci/run loads the host suite: the tests
# whose event is an interrupt inside a window (i686 natively on both paths, aarch64 and
# riscv64 under qemu -singlestep) or a broken add or read caught losing adds, with two busy
# loops per core beside them. They wait for their event by count, so load may slow them but
# not fail them (with a cap of minutes whose message names the load).
busy=()
stop_busy() { [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true; }
trap stop_busy EXIT
for _ in $(seq $(( 2 * $(nproc) ))); do
    (while :; do :; done) &
    busy+=($!)
done
start=$(date +%s)
cargo xtask cross --windows
echo "cargo xtask cross --windows beside ${#busy[@]} busy loops took $(( $(date +%s) - start )) s" \
    "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
stop_busy
busy=()

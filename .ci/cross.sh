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

# ---- Toolchains chosen by what they can do (issue 36, part 3; xtask/src/toolchain.rs) ----
# An old nightly with rust-src beside the default toolchain (a kernel project's pin, as
# ArceOS's rust-toolchain.toml installs it; its cargo predates -Zjson-target-spec): the i586
# build must skip it with one line and build with the next toolchain that can, and
# build.sh's choice (`cargo xtask toolchain --c-library`) must say the same. The install
# takes about 20 s (590 MB), removed again at the end; the builds are the ones above, cached.
old_nightly=nightly-2025-05-20
start=$(date +%s)
# The rules' unit tests (versions against rust-version, `cargo -Z help`'s list).
cargo test --quiet --manifest-path xtask/Cargo.toml toolchain::
if ! command -v rustup >/dev/null; then
    echo "SKIPPED: the toolchain check needs rustup (to install $old_nightly)"
else
    rustup toolchain install "$old_nightly" --profile minimal --component rust-src --no-self-update
    default="$(rustup default | cut -d' ' -f1)"
    # The old nightly is made the default for this check, so that it is the first toolchain
    # with rust-src the search meets, as when it is the only one (here other toolchains may
    # have rust-src: the default, or the nightly that Miri uses, which sort before it); cargo
    # runs the xtask with the usual one. The toolchains that can do the job are the ones the
    # i586 build above already found.
    rustup default "$old_nightly"
    restore="$default"
    log="$(mktemp)"
    ok=1
    cargo "+${restore:-$default}" xtask cross --only "i586-unknown-none (arch/i386 spec) no_std" 2>&1 | tee "$log" || ok=0
    cargo "+${restore:-$default}" xtask toolchain --c-library arch/i386/i586-unknown-none.json 2>&1 | tee -a "$log" || ok=0
    [ -z "$restore" ] || rustup default "$restore"
    # Later parts find the toolchains they found before.
    rustup toolchain uninstall "$old_nightly" >/dev/null
    [ "$ok" = 1 ] || { echo "FAIL: with $old_nightly installed, the i586 build or build.sh's choice failed (above)"; exit 1; }
    skip_line="toolchain skipped: rustup toolchain $old_nightly-"
    [ "$(grep -cF "$skip_line" "$log")" = 2 ] && grep -F "$skip_line" "$log" | grep -q 'lacks -Zjson-target-spec; fix: `' \
        || { echo "FAIL: no line saying $old_nightly was skipped for lacking -Zjson-target-spec (once per run)"; exit 1; }
    rm -f "$log"
    echo "toolchain check: $old_nightly skipped with one line, the i586 build succeeded ($(( $(date +%s) - start )) s)"
fi

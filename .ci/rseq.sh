#!/usr/bin/env bash
# CI part "rseq": `pcpu_counter::rseq` (feature `rseq`) on this machine's kernel, once per
# path: the default (rseq, mm_cid where the kernel offers it), glibc's registration off
# (GLIBC_TUNABLES=glibc.pthread.rseq=0: the crate registers each thread itself),
# PCPU_COUNTER_RSEQ=cpu (cpu_id index) and PCPU_COUNTER_RSEQ=off (sched_getcpu + locked add),
# printing the path in use each time. Then, where the cross tools are installed (see
# .ci/cross.sh), objdump checks that the x86_64 and aarch64 critical
# sections are built as designed; last, testbeds/linux-vm/run.sh runs tests/rseq.rs on a real
# arm64 kernel under qemu-system-aarch64 (the aarch64 rseq path executed), and checks that on
# Debian's arm64 6.19.11, which loses rseq adds, the crate takes the fallback by itself.
# Each run of tests/rseq.rs takes a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

run() {
    echo "== rseq tests: ${*:-default environment}"
    env "$@" cargo test -q --features rseq --test rseq -- --nocapture reports_the_path 2>&1 \
        | grep '^path:' || true
    env "$@" cargo test -q --features rseq --test rseq
}
run
run GLIBC_TUNABLES=glibc.pthread.rseq=0
run PCPU_COUNTER_RSEQ=cpu
run PCPU_COUNTER_RSEQ=off

echo "== x86_64 critical section (objdump)"
if [ "$(uname -m)" = x86_64 ] && command -v objdump >/dev/null; then
    bin=$(ls -t target/debug/deps/rseq-* | grep -v '\.d$' | head -1)
    # The abort handler behind ud1 + 0x53053053, and the commit: shl (block offset, the
    # stride a power of two) then one add to memory with no lock prefix.
    # (Each listing is kept in a variable first: grep -q leaving early would fail the pipe.)
    failure=$(objdump -d --section=__rseq_failure "$bin")
    grep -q '0f b9 3d 53 30 05 53' <<<"$failure" \
        || { echo "no rseq signature before the abort handler"; exit 1; }
    commits=$(objdump -d --no-show-raw-insn "$bin" | grep -A1 -E '\sshl +%cl,%r')
    grep -qE '^ *[0-9a-f]+:\s+add +%r[a-z0-9]+,\(%r' <<<"$commits" \
        || { echo "no shl; add reg,(mem) commit"; exit 1; }
    echo "x86_64: signature and non-locked add commit present"
fi

# `cargo xtask cross` (.ci/cross.sh, run before this) already ran tests/rseq.rs for aarch64
# under qemu-aarch64 (ENOSYS there: the fallback path), in target/cross/base; its binary is
# checked here rather than built a second time.
a64bin=$(ls -t target/cross/base/aarch64-unknown-linux-gnu/debug/deps/rseq-* 2>/dev/null \
    | grep -v '\.d$' | head -1 || true)
if command -v aarch64-linux-gnu-objdump >/dev/null; then
    echo "== aarch64 critical section (objdump)"
    [ -n "$a64bin" ] || { echo "no aarch64 build of tests/rseq.rs: run .ci/cross.sh first"; exit 1; }
    bin=$a64bin
    dis=$(aarch64-linux-gnu-objdump -d --section=__rseq_failure "$bin")
    # The abort handler: the signature (brk #0x45e0 = d428bc00) right before a branch back.
    grep -q 'd428bc00' <<<"$dis" || { echo "no rseq signature before the abort handler"; exit 1; }
    aarch64-linux-gnu-objdump -s --section=__rseq_cs "$bin" | sed -n 4,6p
    # The section itself: madd (slot address), then the ldr; add; str commit, consecutive.
    ops=$(aarch64-linux-gnu-objdump -d "$bin" | awk -F'\t' 'NF >= 3 { split($3, m, " "); printf "%s ", m[1] }')
    grep -q 'madd ldr add str ' <<<"$ops" || { echo "no madd; ldr; add; str commit"; exit 1; }
    echo "aarch64: signature and ldr/add/str commit present"
else
    echo "== aarch64: skipped (no aarch64-linux-gnu-objdump: .ci/cross.sh installs it)"
fi

# The aarch64 rseq path executed, not only compiled: tests/rseq.rs (release, cross-built) on
# Debian's arm64 kernel (6.12, CONFIG_RSEQ, CONFIG_SCHED_MM_CID) under
# `qemu-system-aarch64 -M virt -smp 4`, which fails unless the crate takes the rseq path
# (mm_cid where the kernel offers it), or when a plain C control of the same critical section
# loses adds (a broken kernel). Measured from scratch on 2 loaded cores: 104 to 125 s (the
# release cross-build 60-71 s, 9 MB of arm64 package lists and 29 MB of packages 3-5 s, boot
# and run 30-52 s); installing cpio, where missing, adds about 10 s.
echo "== aarch64 rseq path on a real arm64 kernel (testbeds/linux-vm)"
bash testbeds/linux-vm/run.sh

# A kernel the crate knows to lose rseq adds: Debian's arm64 6.19.11 (trixie-backports). With
# no variable the crate must take the fallback there, naming the kernel (run.sh asserts the
# path line), count exactly, and the C control must still show the kernel unsound. The test
# binary is the one built above; only the path and one exact count are run (the whole file
# passed there: docs/linux.md). A failed package list or download fails the step, naming it.
echo "== aarch64 on a kernel known to lose rseq adds (Debian's 6.19.11, testbeds/linux-vm)"
LINUX_VM_KERNEL=linux-binary-6.19.11+deb13-cloud-arm64 LINUX_VM_DIST=trixie-backports \
    LINUX_VM_ARGS="-- --exact reports_the_path simple_case_global_counter" \
    bash testbeds/linux-vm/run.sh

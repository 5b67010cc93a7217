#!/usr/bin/env bash
# Links every member of each libpcpu_counter.a (from build.sh) into a C-only kernel of its
# ABI, as a kernel that pulls in any of them would: a C object compiled with the flags
# docs/c.md gives for the target (riscv64gc: -mabi=lp64d, riscv64imac: -mabi=lp64), then
# `ld --whole-archive` with the linker script of docs/c.md's advice (its ```ld block, after
# .text and .rodata). It fails when
# - a member's float ABI differs from the kernel's (GNU ld refuses the mix on riscv64);
# - the library needs a symbol the kernel and the script do not define;
# - the kernel gets an allocated section the advice does not name (ld places an orphan in an
#   output section of its own name), such as pcpu_counter_statics, or unwind tables
#   (.eh_frame) that a `panic = "abort"` kernel never reads.
# Usage: link_check.sh [target ...] (default: the five of build.sh). About a second a target.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none
    riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf)
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# The advice's sections, as docs/c.md writes them, after the code and read-only data.
advice="$(awk '/^```ld$/ { n++; if (n == 1) { on = 1; next } } on && /^```$/ { exit } on' docs/c.md)"
[ -n "$advice" ] || { echo "FAIL: docs/c.md has no \`\`\`ld block (its linker advice)"; exit 1; }
cat > "$out/link.ld" <<EOF
ENTRY(_start)
SECTIONS {
    . = 0x200000;
    .text : { *(.text .text.*) }
    .rodata : { *(.rodata .rodata.*) *(.srodata .srodata.*) }
$advice
}
EOF
# The kernel's side: the four hooks and an entry.
cat > "$out/kernel.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
uintptr_t pcpu_platform_protect(void) { return 0; }
void pcpu_platform_unprotect(uintptr_t s) { (void)s; }
size_t pcpu_platform_current_cpu(void) { return 0; }
void pcpu_platform_panic(const char *msg, size_t len) { (void)msg; (void)len; for (;;) { } }
void _start(void) { for (;;) { } }
EOF
failed=0
for spec in "${targets[@]}"; do
    t="$(basename "$spec" .json)"
    lib="target/capi-lib/$t/libpcpu_counter.a"
    [ -f "$lib" ] || { echo "FAIL: no $lib (build it: bash testbeds/capi-kernel/build.sh $t)"; exit 1; }
    case "$t" in
        x86_64-*) cc=(gcc -mno-red-zone -mcmodel=kernel -mno-sse) ld=(ld) ;;
        aarch64-*) cc=(aarch64-linux-gnu-gcc -mgeneral-regs-only -mstrict-align -mno-outline-atomics)
            ld=(aarch64-linux-gnu-ld) ;;
        i[3-6]86-*) cc=(i686-linux-gnu-gcc -m32 -march=i586 -mno-sse -mno-mmx -mno-80387) ld=(i686-linux-gnu-ld) ;;
        riscv64gc-*) cc=(riscv64-linux-gnu-gcc -march=rv64gc -mabi=lp64d -mcmodel=medany) ld=(riscv64-linux-gnu-ld) ;;
        riscv64imac-*) cc=(riscv64-linux-gnu-gcc -march=rv64imac_zicsr_zifencei -mabi=lp64 -mcmodel=medany)
            ld=(riscv64-linux-gnu-ld) ;;
        *) echo "FAIL: no kernel flags known for $t"; exit 1 ;;
    esac
    "${cc[@]}" -std=c11 -ffreestanding -nostdlib -fno-pic -fno-asynchronous-unwind-tables -fno-unwind-tables -O2 -c "$out/kernel.c" -o "$out/$t.o"
    if "${ld[@]}" -nostdlib -static -z noexecstack --no-warn-rwx-segments \
        -T "$out/link.ld" "$out/$t.o" --whole-archive "$lib" --no-whole-archive \
        -o "$out/$t.elf" 2>"$out/$t.log"; then
        # Allocated output sections (flag A) other than the script's: orphans.
        orphans="$(readelf -SW "$out/$t.elf" | sed -n 's/^ *\[ *[0-9]*\] //p' \
            | awk '$1 !~ /^\.(text|rodata|data|bss)$/ && $7 ~ /A/ { print $1, $5 }' \
            | while read -r name size; do printf '%s (%d bytes) ' "$name" "$((16#$size))"; done)"
        if [ -n "$orphans" ]; then
            echo "FAIL: $lib gives a C kernel sections docs/c.md's linker advice does not place: $orphans"
            failed=1
            continue
        fi
        echo "ok   $lib: all $(ar t "$lib" | wc -l) members link into a C kernel (${cc[*]:1}), every section placed"
    else
        rc=$?
        echo "FAIL: $lib does not link whole into a C kernel of its ABI (ld exit $rc): $(grep -c . "$out/$t.log") linker errors, first ones:"
        # One line per distinct complaint, the member's hash and path left out.
        sed 's/^[^ ]*ld: //' "$out/$t.log" | sed 's/([^)]*\.o)//; s/[^ ]*libpcpu_counter\.a//' | sort | uniq -c | sort -rn | head -8
        failed=1
    fi
done
[ "$failed" = 0 ] || exit 1
echo "link check: every library links whole into a C kernel of its ABI"

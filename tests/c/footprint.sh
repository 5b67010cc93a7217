#!/usr/bin/env bash
# The C library's footprint in a kernel (issue 20, item 6): links tests/c/footprint_kernel.c (a
# minimal C kernel object that uses the whole C API) with target/capi-lib/<target>/
# libpcpu_counter.a, with and without --gc-sections, and prints per target the text (as
# `size` counts it: code and read-only data) that the library adds to the kernel. Fails when
# that is over 16 KiB with --gc-sections or over 64 KiB without, or when the linked kernel
# holds a floating-point instruction (the kernels run with the FPU off; riscv64gc's
# compiler_builtins has float code in the archive, which must not be linked).
# Usage: tests/c/footprint.sh [target ...] (default: every library under target/capi-lib/).
set -euo pipefail
cd "$(dirname "$0")/../.."
GC_MAX=$((16 * 1024))
NOGC_MAX=$((64 * 1024))
out="$(mktemp -d)"
[ -n "${KEEP:-}" ] && out="$KEEP" && mkdir -p "$out" || trap 'rm -rf "$out"' EXIT
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    for d in target/capi-lib/*/; do targets+=("$(basename "$d")"); done
fi
cat > "$out/link.ld" <<'LD'
ENTRY(_start)
SECTIONS {
    . = 0x200000;
    .text : { *(.text .text.*) }
    .rodata : { *(.rodata .rodata.*) *(.srodata .srodata.*) }
    .data : { *(.data .data.*) *(.sdata .sdata.*)
        . = ALIGN(8); __start_pcpu_counter_early = .; KEEP(*(pcpu_counter_early)) __stop_pcpu_counter_early = .;
        . = ALIGN(8); __start_pcpu_counter_statics = .; KEEP(*(pcpu_counter_statics)) __stop_pcpu_counter_statics = .; }
    .bss : { *(.bss .bss.*) *(.sbss .sbss.*) *(COMMON) }
    /DISCARD/ : { *(.eh_frame .eh_frame_hdr .comment .note.*) }
}
LD
# Text as `size` counts it (Berkeley: every allocated read-only section).
text() { size -B "$1" | awk 'NR == 2 {print $1}'; }
# Floating-point instructions in a linked kernel, per arch ($2: objdump).
fp_insns() {
    case "$3" in
        riscv64*) "$2" -d --no-show-raw-insn "$1" | grep -cP '^\s+[0-9a-f]+:\s+f(?!ence)[a-z]' || true ;;
        # An FP/SIMD register operand (b/h/s/d/q/v0-31).
        aarch64*) "$2" -d --no-show-raw-insn "$1" | grep -cP '^\s+[0-9a-f]+:\s+\S+\s+.*\b[bhsdqv]([0-9]|[12][0-9]|3[01])(\.\w+)?\b' || true ;;
        # x87 (f-prefixed opcodes, %st) and SSE/AVX (an %xmm/%ymm/%zmm operand).
        *) "$2" -d --no-show-raw-insn "$1" | grep -cP '^\s+[0-9a-f]+:\s+(f(ld|st|ild|ist|add|sub|mul|div|com|ucom|xch|init|ninit|ldcw|nstcw|stcw|sqrt|abs|chs|rstor|n?save|xsave|xrstor|wait|cmov)\w*\b|.*%st\b|.*%[xyz]mm)' || true ;;
    esac
}
# The add path of pcpu_counter_add in the linked kernel: its instructions from the entry to
# the first ret (the path once the zone is known), and the fences among them (must be none).
add_path() {
    "$2" -d --no-show-raw-insn "$1" | awk '/<pcpu_counter_add>:$/ { on = 1; next }
        on && /^$/ { exit }
        on && /^ +[0-9a-f]+:/ { n++; if ($0 ~ /\t(fence|dmb|dsb|mfence|lfence|sfence)|\tlock/) f++; if ($0 ~ /\tret/) exit }
        END { printf "%d %d\n", n, f }'
}
printf '%-30s %10s %10s %6s %10s %14s\n' target gc-sections no-gc fp add-insns "+reading,statics,grow (gc)"
fail=0
for t in "${targets[@]}"; do
    lib="target/capi-lib/$t/libpcpu_counter.a"
    [ -f "$lib" ] || { echo "FAIL: no $lib (build it: testbeds/capi-kernel/build.sh $t)"; exit 1; }
    common=(-ffreestanding -fno-pic -O2 -ffunction-sections -fdata-sections -Wall -Wextra -Werror -Iinclude)
    case "$t" in
        x86_64-*) cc=(gcc -mno-red-zone -mcmodel=kernel -mno-sse -mno-mmx -mno-80387); ld=(ld -m elf_x86_64); od=objdump ;;
        aarch64-*) cc=(aarch64-linux-gnu-gcc -mgeneral-regs-only -mstrict-align -mno-outline-atomics); ld=(aarch64-linux-gnu-ld); od=aarch64-linux-gnu-objdump ;;
        i586-*|i686-*|i386-*) cc=(i686-linux-gnu-gcc -march=i586 -mno-sse -mno-mmx -mno-80387 -fno-omit-frame-pointer); ld=(i686-linux-gnu-ld); od=i686-linux-gnu-objdump ;;
        riscv64gc-*) cc=(riscv64-linux-gnu-gcc -march=rv64gc -mabi=lp64d -mcmodel=medany); ld=(riscv64-linux-gnu-ld --no-relax); od=riscv64-linux-gnu-objdump ;;
        riscv64imac-*) cc=(riscv64-linux-gnu-gcc -march=rv64imac_zicsr -mabi=lp64 -mcmodel=medany); ld=(riscv64-linux-gnu-ld --no-relax); od=riscv64-linux-gnu-objdump ;;
        *) echo "FAIL: no C compiler known for $t"; exit 1 ;;
    esac
    command -v "${cc[0]}" >/dev/null || { echo "skipped $t: ${cc[0]} not installed"; continue; }
    "${cc[@]}" "${common[@]}" -c tests/c/footprint_kernel.c -o "$out/$t.o"
    own="$(text "$out/$t.o")"
    row=()
    for gc in --gc-sections ""; do
        elf="$out/$t${gc:+-gc}.elf"
        "${ld[@]}" -nostdlib -static --no-warn-rwx-segments $gc -T "$out/link.ld" "$out/$t.o" "$lib" -o "$elf"
        row+=($(($(text "$elf") - own)))
    done
    # riscv64: the header's inline add through the other register must not link.
    if [[ "$t" == riscv64* ]]; then
        "${cc[@]}" "${common[@]}" -DPCPU_COUNTER_RISCV_GP -c tests/c/footprint_kernel.c -o "$out/$t-gp.o"
        if "${ld[@]}" -nostdlib -static -T "$out/link.ld" "$out/$t-gp.o" "$lib" -o "$out/$t-gp.elf" 2>"$out/err"; then
            echo "FAIL: $t: C built for gp links with the tp library"; fail=1
        elif ! grep -q "undefined reference to \`pcpu_counter_riscv_gp'" "$out/err"; then
            echo "FAIL: $t: C built for gp fails to link, but not on pcpu_counter_riscv_gp:"; cat "$out/err"; fail=1
        fi
    fi
    # The same kernel with the reading calls too (group reads, export, approximate counters)
    # and the per-CPU statics: printed, not limited.
    "${cc[@]}" "${common[@]}" -DFOOTPRINT_READING -DFOOTPRINT_STATICS -DFOOTPRINT_GROW -c tests/c/footprint_kernel.c -o "$out/$t-read.o"
    "${ld[@]}" -nostdlib -static --no-warn-rwx-segments --gc-sections -T "$out/link.ld" "$out/$t-read.o" "$lib" -o "$out/$t-read.elf"
    reading=$(($(text "$out/$t-read.elf") - $(text "$out/$t-read.o")))
    fp="$(fp_insns "$out/$t.elf" "$od" "$t")"
    fp_read="$(fp_insns "$out/$t-read.elf" "$od" "$t")"
    [ "$fp_read" = 0 ] || fp="$fp+$fp_read"
    read -r insns fences < <(add_path "$out/$t-gc.elf" "$od")
    printf '%-30s %10s %10s %6s %10s %14s\n' "$t" "${row[0]}" "${row[1]}" "$fp" "$insns" "$reading"
    if [ "$fences" != 0 ]; then
        echo "FAIL: $t: $fences fence(s) on pcpu_counter_add's add path"; fail=1
    fi
    if [ "${row[0]}" -gt $GC_MAX ] || [ "${row[1]}" -gt $NOGC_MAX ]; then
        echo "FAIL: $t: the library adds more than $GC_MAX bytes with --gc-sections or $NOGC_MAX without"; fail=1
    fi
    if [ "$fp" != 0 ]; then
        echo "FAIL: $t: floating-point instructions in the linked kernel:"
        fail=1
    fi
done
[ $fail = 0 ] && echo "footprint: all within $GC_MAX bytes (--gc-sections) and $NOGC_MAX bytes (without)"
exit $fail

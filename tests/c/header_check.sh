#!/usr/bin/env bash
# The C header as a fast path (issue 10): it compiles warning-free with gcc and clang, as C99,
# C11 and C++11 with -pedantic, hosted and freestanding; and counter_u64_add compiled with
# gcc -O2 is the arch's instruction itself: on x86_64 exactly one non-locked add to %gs: and
# no call; on aarch64 the ldxr/stxr loop (or one stadd with LSE) and no call. The checker is
# run once on deliberately broken adds and must reject each.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

probe='#include "pcpu_counter.h"
void probe_add(counter_u64_t c, int64_t v) { counter_u64_add(c, v); }
void probe_protected(counter_u64_t c, int64_t v) { counter_u64_add_protected(c, v); }
'
printf '%s' "$probe" > "$out/probe.c"
cp "$out/probe.c" "$out/probe.cc"

echo "== compile matrix"
compilers=(gcc)
command -v clang >/dev/null && compilers+=(clang)
for cc in "${compilers[@]}"; do
    for std in c99 c11; do
        for mode in "" -ffreestanding; do
            $cc -std=$std $mode -Wall -Wextra -Werror -pedantic -Iinclude -c "$out/probe.c" -o "$out/p.o"
            echo "ok   $cc -std=$std $mode"
        done
    done
    cxx=g++; [ "$cc" = clang ] && cxx=clang++
    if command -v $cxx >/dev/null; then
        $cxx -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -c "$out/probe.cc" -o "$out/p.o"
        echo "ok   $cxx -std=c++11"
    fi
done
if command -v aarch64-linux-gnu-gcc >/dev/null; then
    for march in armv8-a armv8.1-a; do
        aarch64-linux-gnu-gcc -std=c11 -march=$march -ffreestanding -Wall -Wextra -Werror -pedantic \
            -Iinclude -c "$out/probe.c" -o "$out/p.o"
        echo "ok   aarch64-linux-gnu-gcc -march=$march"
    done
fi
if command -v i686-linux-gnu-gcc >/dev/null; then
    i686-linux-gnu-gcc -std=c11 -march=i586 -ffreestanding -Wall -Wextra -Werror -pedantic \
        -Iinclude -c "$out/probe.c" -o "$out/p.o"
    echo "ok   i686-linux-gnu-gcc -march=i586 (calls out)"
fi

# The instructions of function $2 in object $1, one per line, without addresses.
body() {
    "$3" -d --no-show-raw-insn "$1" | awk -v f="<$2>:" '
        $2 == f { on = 1; next }
        on && /^$/ { exit }
        on { sub(/^ *[0-9a-f]+:\t/, ""); print }'
}

# x86_64: exactly one add to %gs:, no lock, no call or jump out.
check_x86_64() {
    local insns="$1"
    [ "$(grep -c '^add.*%gs:' <<<"$insns")" = 1 ] || return 1
    ! grep -q 'lock' <<<"$insns" || return 1
    ! grep -Eq '^(call|jmp)' <<<"$insns" || return 1
    [ "$(grep -c '%gs:' <<<"$insns")" = 1 ] || return 1
}

# aarch64: the LL/SC loop (ldxr, stxr, a branch back) or exactly one stadd; no bl.
check_aarch64() {
    local insns="$1" lse="$2"
    ! grep -Eq '^(bl|b)\s' <<<"$insns" || return 1
    grep -q '^mrs.*tpidr_el1' <<<"$insns" || return 1
    if [ "$lse" = 1 ]; then
        [ "$(grep -c '^stadd' <<<"$insns")" = 1 ] && ! grep -q 'ldxr' <<<"$insns"
    else
        grep -q '^ldxr' <<<"$insns" && grep -q '^stxr' <<<"$insns" && grep -q '^cbnz' <<<"$insns"
    fi
}

echo "== disassembly: x86_64 (gcc -O2)"
gcc -std=c11 -O2 -Iinclude -c "$out/probe.c" -o "$out/x.o"
for f in probe_add probe_protected; do
    insns="$(body "$out/x.o" $f objdump)"
    printf '%s:\n%s\n' "$f" "$(sed 's/^/    /' <<<"$insns")"
    check_x86_64 "$insns" || { echo "FAIL: $f is not one non-locked add to %gs:"; exit 1; }
done
echo "== the x86_64 checker rejects broken adds"
cat > "$out/broken.c" <<'C'
#include <stdint.h>
void locked(uintptr_t c, int64_t v) { __asm__ __volatile__("lock; addq %1, %%gs:(%0)" : : "r"(c), "r"(v) : "memory"); }
void split(uintptr_t c, int64_t v) { uint64_t t; __asm__ __volatile__("movq %%gs:(%1), %0\n\taddq %2, %0\n\tmovq %0, %%gs:(%1)" : "=&r"(t) : "r"(c), "r"(v) : "memory"); }
extern void pcpu_counter_add(uintptr_t, int64_t);
void called(uintptr_t c, int64_t v) { pcpu_counter_add(c, v); pcpu_counter_add(c, v); }
void plain(uintptr_t c, int64_t v) { *(volatile int64_t *)c += v; }
C
gcc -std=c11 -O2 -c "$out/broken.c" -o "$out/b.o"
for f in locked split called plain; do
    if check_x86_64 "$(body "$out/b.o" $f objdump)"; then
        echo "FAIL: the checker accepted the broken add '$f'"; exit 1
    fi
    echo "ok   rejected $f"
done

if command -v aarch64-linux-gnu-gcc >/dev/null && command -v aarch64-linux-gnu-objdump >/dev/null; then
    for lse in 0 1; do
        march=armv8-a; [ $lse = 1 ] && march=armv8.1-a
        echo "== disassembly: aarch64 -march=$march (gcc -O2)"
        aarch64-linux-gnu-gcc -std=c11 -O2 -march=$march -Iinclude -c "$out/probe.c" -o "$out/a.o"
        insns="$(body "$out/a.o" probe_add aarch64-linux-gnu-objdump)"
        sed 's/^/    /' <<<"$insns"
        check_aarch64 "$insns" $lse || { echo "FAIL: aarch64 probe_add (lse=$lse)"; exit 1; }
    done
    echo "== the aarch64 checker rejects a plain load/add/store"
    cat > "$out/broken_a.c" <<'C'
#include <stdint.h>
void plain(uintptr_t c, int64_t v) { uintptr_t b; __asm__ __volatile__("mrs %0, tpidr_el1" : "=r"(b)); *(volatile int64_t *)(b + c) += v; }
C
    aarch64-linux-gnu-gcc -std=c11 -O2 -c "$out/broken_a.c" -o "$out/ba.o"
    for lse in 0 1; do
        if check_aarch64 "$(body "$out/ba.o" plain aarch64-linux-gnu-objdump)" $lse; then
            echo "FAIL: the aarch64 checker accepted ldr/add/str (lse=$lse)"; exit 1
        fi
    done
    echo "ok   rejected plain"
else
    echo "skipped aarch64: aarch64-linux-gnu-gcc / binutils-aarch64-linux-gnu not installed"
fi
echo "header check: all passed"

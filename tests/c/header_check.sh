#!/usr/bin/env bash
# The C header as a fast path (issue 10): it compiles warning-free with gcc and clang, as C99,
# C11 and C++11 with -pedantic, hosted and freestanding, with variable and constant increments
# (counter_u64_add(c, 1)) at -O0 to -O3 and -Os, with and without a frame pointer and -fPIC,
# for x86_64, aarch64, i386 and riscv64 (issue 20); and counter_u64_add compiled with
# gcc -O2 is the arch's instruction itself: on x86_64 exactly one non-locked add to %gs: and
# no call; on aarch64 the ldxr/stxr loop (or one ldadd with LSE) and no call; on riscv64
# tp (or gp) plus the offset and exactly one amoadd.d, no call, no fence; a per-CPU static's
# add (PCPU_COUNTER_DEFINE) on x86_64 is one add to %gs:slot(%rip), nothing before it. The checker is
# run once on deliberately broken adds and must reject each.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

probe='#include "pcpu_counter.h"
void probe_add(counter_u64_t c, int64_t v) { counter_u64_add(c, v); }
void probe_protected(counter_u64_t c, int64_t v) { counter_u64_add_protected(c, v); }
/* Constant increments: FreeBSD'"'"'s most common line, a negative one, and one with both halves. */
void probe_inc(counter_u64_t c) { counter_u64_add(c, 1); }
void probe_dec(counter_u64_t c) { counter_u64_add_protected(c, -1); }
void probe_wide(counter_u64_t c) { counter_u64_add(c, 0x100000001LL); }
/* Several live values around the add, as in a real caller. */
void probe_two(counter_u64_t a, counter_u64_t b, int64_t v) { counter_u64_add(a, v); counter_u64_add(b, 1); }
/* A per-CPU static (PCPU_COUNTER_DEFINE): the add off the slot'"'"'s link-time address. */
PCPU_COUNTER_DEFINE(probe_static);
void probe_static_add(int64_t v) { PCPU_COUNTER_ADD(probe_static, v); }
void probe_static_inc(void) { PCPU_COUNTER_INC(probe_static); }
'
printf '%s' "$probe" > "$out/probe.c"
cp "$out/probe.c" "$out/probe.cc"

# Compiles the probe with every optimisation level, with and without a frame pointer and
# position-independent code: "$@" is the compiler and its flags.
matrix() {
    local opt fp pic
    for opt in -O0 -O1 -O2 -O3 -Os; do
        for fp in -fno-omit-frame-pointer -fomit-frame-pointer; do
            for pic in -fno-pic -fPIC; do
                "$@" $opt $fp $pic -Wall -Wextra -Werror -Iinclude -c "$out/probe.c" -o "$out/p.o"
            done
        done
    done
    echo "ok   $* (-O0 to -O3, -Os; frame pointer or not; -fPIC or not)"
}

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
    matrix $cc -std=c11 -pedantic
done
if command -v aarch64-linux-gnu-gcc >/dev/null; then
    for march in armv8-a armv8.1-a; do
        aarch64-linux-gnu-gcc -std=c11 -march=$march -ffreestanding -Wall -Wextra -Werror -pedantic \
            -Iinclude -c "$out/probe.c" -o "$out/p.o"
        echo "ok   aarch64-linux-gnu-gcc -march=$march"
        matrix aarch64-linux-gnu-gcc -std=c11 -march=$march -ffreestanding -pedantic
    done
fi
if command -v i686-linux-gnu-gcc >/dev/null; then
    # i386 has few registers: the cmpxchg8b loop takes eax, ebx, ecx, edx; ebx is the PIC
    # register with -fPIC, and a frame pointer takes ebp: a constant increment must be an
    # immediate, not a third register.
    for std in c99 c11; do
        for mode in "" -ffreestanding; do
            matrix i686-linux-gnu-gcc -std=$std $mode -march=i586 -pedantic
        done
    done
    i686-linux-gnu-gcc -std=c11 -DPCPU_COUNTER_SIM -Wall -Wextra -Werror -pedantic \
        -Iinclude -c "$out/probe.c" -o "$out/p.o"
    echo "ok   i686-linux-gnu-gcc -DPCPU_COUNTER_SIM (calls out)"
    if command -v clang >/dev/null; then
        matrix clang --target=i686-linux-gnu -std=c11 -march=i586 -ffreestanding -pedantic
    fi
    if command -v i686-linux-gnu-g++ >/dev/null; then
        i686-linux-gnu-g++ -std=c++11 -O2 -fno-omit-frame-pointer -fPIC -Wall -Wextra -Werror -pedantic \
            -Iinclude -c "$out/probe.cc" -o "$out/p.o"
        echo "ok   i686-linux-gnu-g++ -std=c++11 -O2 -fno-omit-frame-pointer -fPIC"
    fi
fi

# The instructions of function $2 in object $1, one per line, without addresses.
body() {
    "$3" -d --no-show-raw-insn "$1" | awk -v f="<$2>:" '
        $2 == f { on = 1; next }
        on && /^$/ { on = 0 }
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

# aarch64: the LL/SC loop (ldxr, stxr, a branch back) or exactly one ldadd (never stadd, which
# may execute far); no bl.
check_aarch64() {
    local insns="$1" lse="$2"
    ! grep -Eq '^(bl|b)\s' <<<"$insns" || return 1
    grep -q '^mrs.*tpidr_el1' <<<"$insns" || return 1
    if [ "$lse" = 1 ]; then
        [ "$(grep -c '^ldadd\s' <<<"$insns")" = 1 ] && ! grep -Eq '^(ldxr|stadd)' <<<"$insns"
    else
        grep -q '^ldxr' <<<"$insns" && grep -q '^stxr' <<<"$insns" && grep -q '^cbnz' <<<"$insns"
    fi
}

echo "== disassembly: x86_64 (gcc -O2)"
gcc -std=c11 -O2 -Iinclude -c "$out/probe.c" -o "$out/x.o"
for f in probe_add probe_protected probe_inc probe_dec probe_wide; do
    insns="$(body "$out/x.o" $f objdump)"
    printf '%s:\n%s\n' "$f" "$(sed 's/^/    /' <<<"$insns")"
    check_x86_64 "$insns" || { echo "FAIL: $f is not one non-locked add to %gs:"; exit 1; }
done
# x86_64, a per-CPU static: the one add to %gs: at the slot rip-relative (no handle loaded:
# nothing before it), then ret; $2 the source operand it must have.
check_x86_64_static() {
    local insns
    insns="$(sed '/^ret/q' <<<"$1")"
    [ "$(wc -l <<<"$insns")" = 2 ] || return 1
    grep -Eq "^add[q ] +$2,%gs:0x0\(%rip\)" <<<"$(head -1 <<<"$insns")" || return 1
    grep -q '^ret' <<<"$(tail -1 <<<"$insns")"
}
for f in probe_static_add:%rdi probe_static_inc:'\$0x1'; do
    insns="$(body "$out/x.o" "${f%%:*}" objdump)"
    printf '%s:\n%s\n' "${f%%:*}" "$(sed 's/^/    /' <<<"$insns")"
    check_x86_64_static "$insns" "${f#*:}" \
        || { echo "FAIL: ${f%%:*} is not one add to %gs:slot(%rip)"; exit 1; }
done
echo "== the x86_64 checker rejects broken adds"
cat > "$out/broken.c" <<'C'
#include <stdint.h>
void locked(uintptr_t c, int64_t v) { __asm__ __volatile__("lock; addq %1, %%gs:(%0)" : : "r"(c), "r"(v) : "memory"); }
void split(uintptr_t c, int64_t v) { uint64_t t; __asm__ __volatile__("movq %%gs:(%1), %0\n\taddq %2, %0\n\tmovq %0, %%gs:(%1)" : "=&r"(t) : "r"(c), "r"(v) : "memory"); }
extern void pcpu_counter_add(uintptr_t, int64_t);
void called(uintptr_t c, int64_t v) { pcpu_counter_add(c, v); pcpu_counter_add(c, v); }
void plain(uintptr_t c, int64_t v) { *(volatile int64_t *)c += v; }
extern uint64_t slot;
void static_handle(void) { __asm__ __volatile__("addq $1, %%gs:(%0)" : : "r"(&slot) : "memory"); }
void static_shared(void) { __asm__ __volatile__("addq $1, slot(%%rip)" : : : "memory"); }
C
gcc -std=c11 -O2 -c "$out/broken.c" -o "$out/b.o"
for f in static_handle static_shared locked; do
    if check_x86_64_static "$(body "$out/b.o" $f objdump)" '\$0x1'; then
        echo "FAIL: the static checker accepted the broken add '$f'"; exit 1
    fi
    echo "ok   rejected $f (as a static's add)"
done
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
    echo "== the aarch64 checker rejects a plain load/add/store, and a far stadd"
    cat > "$out/broken_a.c" <<'C'
#include <stdint.h>
void plain(uintptr_t c, int64_t v) { uintptr_t b; __asm__ __volatile__("mrs %0, tpidr_el1" : "=r"(b)); *(volatile int64_t *)(b + c) += v; }
void far(uintptr_t c, int64_t v) { uintptr_t b; __asm__ __volatile__("mrs %0, tpidr_el1" : "=r"(b)); __asm__ __volatile__("stadd %1, %0" : "+Q"(*(uint64_t *)(b + c)) : "r"(v) : "memory"); }
C
    aarch64-linux-gnu-gcc -std=c11 -O2 -march=armv8.1-a -c "$out/broken_a.c" -o "$out/ba.o"
    for f in plain far; do
        for lse in 0 1; do
            if check_aarch64 "$(body "$out/ba.o" $f aarch64-linux-gnu-objdump)" $lse; then
                echo "FAIL: the aarch64 checker accepted '$f' (lse=$lse)"; exit 1
            fi
        done
        echo "ok   rejected $f"
    done
else
    echo "skipped aarch64: aarch64-linux-gnu-gcc / binutils-aarch64-linux-gnu not installed"
fi
# i386: the instructions of function $2 in object $1 as "address<TAB>instruction", with the
# symbol of a relocation in it appended as " @symbol".
body_i386() {
    i686-linux-gnu-objdump -dr --no-show-raw-insn "$1" | awk -v f="<$2>:" '
        $2 == f { on = 1; next }
        on && /^$/ { on = 0 }
        on && $2 ~ /^R_386_/ { sym = $3; sub(/[+-]0x[0-9a-f]+$/, "", sym); line = line " @" sym; next }
        on {
            if (line != "") print line
            a = $1; sub(/:$/, "", a); sub(/^ *[0-9a-f]+:\t/, ""); line = a "\t" $0
        }
        END { if (line != "") print line }'
}

# i386: the guard, then the loop. pcpu_cx8 compared with 2 and a jne to the out-of-line part
# (so 0, not asked yet, calls out too); two loads of edx:eax from %fs:, then a loop of add,
# adc and one non-locked cmpxchg8b on %fs: closed by a jne back; a ret before the out-of-line
# part, which is the one call (or tail jmp) of $2. No %gs:, no other %fs: access, no lock, no
# other call but the PIC thunk. Prints why it rejects.
check_i386() {
    awk -F'\t' -v ool="$2" '
        function hex(s,    i, n, c) {
            n = 0; s = tolower(s)
            for (i = 1; i <= length(s); i++) {
                c = index("0123456789abcdef", substr(s, i, 1)); if (!c) return -1; n = n * 16 + c - 1
            }
            return n
        }
        function no(why) { if (!bad) print "    rejected: " why; bad = 1 }
        {
            n++; addr[n] = hex($1); ins[n] = $2; split($2, w, / +/); op[n] = w[1]; tgt[n] = hex(w[2])
            t = $2; sub(/ <[^>]*>/, "", t); sub(/ @.*/, "", t)   # without labels and relocations
            if (t ~ /lock/) no("lock prefix: " $2)
            if (t ~ /%gs:/) no("%gs: " $2)
            if (op[n] == "cmpxchg8b") { ncx++; cx = n; if (w[2] !~ /^%fs:/) no("cmpxchg8b not on %fs: " $2) }
            else if (t ~ /%fs:/) {
                if (t ~ /^mov +%fs:[^,]*,%e[ad]x$/) { nload++; lastload = n; if (!firstload) firstload = n }
                else no("another %fs: access: " $2)
            }
            if ($2 ~ /@pcpu_cx8$/ && !ref) ref = n
            if (op[n] ~ /^(call|jmp)/ && $2 ~ /@/) {
                if ($2 ~ ("@" ool "$")) { ncall++; call = n }
                else if ($2 !~ /@__x86\.get_pc_thunk\./) no("calls " $2)
            } else if (op[n] ~ /^call/) no("a call without relocation: " $2)
        }
        END {
            if (ncx != 1) no(ncx + 0 " cmpxchg8b")
            if (nload != 2) no(nload + 0 " loads from %fs:, not 2")
            if (bad) exit 1
            back = cx + 1
            if (op[back] != "jne" || tgt[back] >= addr[cx] || tgt[back] <= addr[lastload]) no("no jne back to the loop after cmpxchg8b")
            for (i = lastload + 1; i < cx; i++) { if (op[i] == "add") sawadd = 1; if (op[i] == "adc") sawadc = 1 }
            if (!sawadd || !sawadc) no("no add and adc in the loop")
            if (!ref) no("pcpu_cx8 is not read")
            for (g = ref; g <= n && !(op[g] ~ /^j/ && op[g] != "jmp"); g++) if (op[g] ~ /^cmp/ && ins[g] ~ /\$0x2,/) cmp2 = 1
            if (!cmp2 || op[g] != "jne" || g >= firstload) no("no guard: cmp $0x2 with pcpu_cx8 and a jne, before the loop")
            if (ncall != 1) no(ncall + 0 " calls of " ool)
            if (bad) exit 1
            if (tgt[g] <= addr[back] || addr[call] < tgt[g]) no("the out-of-line call is not behind the guard jne")
            for (i = back + 1; i <= n && addr[i] < tgt[g]; i++) if (op[i] == "ret") ret = 1
            if (!ret) no("the loop does not return before the out-of-line part")
            exit bad
        }' <<<"$1"
}

if command -v i686-linux-gnu-gcc >/dev/null && command -v i686-linux-gnu-objdump >/dev/null; then
    for flags in "-fno-pic" "-fPIC" "-fPIC -fno-omit-frame-pointer"; do
        echo "== disassembly: i386 $flags (i686-linux-gnu-gcc -O2)"
        i686-linux-gnu-gcc -std=c11 -O2 $flags -Iinclude -c "$out/probe.c" -o "$out/i.o"
        for f in probe_add:pcpu_counter_add probe_protected:pcpu_counter_add_protected \
            probe_inc:pcpu_counter_add probe_dec:pcpu_counter_add_protected probe_wide:pcpu_counter_add; do
            insns="$(body_i386 "$out/i.o" "${f%%:*}")"
            printf '%s:\n%s\n' "${f%%:*}" "$(sed 's/^/    /' <<<"$insns")"
            check_i386 "$insns" "${f#*:}" || { echo "FAIL: i386 ${f%%:*} ($flags)"; exit 1; }
        done
    done
    echo "== i386 under the simulation: only the out-of-line call"
    i686-linux-gnu-gcc -std=c11 -O2 -DPCPU_COUNTER_SIM -Iinclude -c "$out/probe.c" -o "$out/i.o"
    insns="$(body_i386 "$out/i.o" probe_add)"
    if grep -q 'cmpxchg8b\|%fs:\|pcpu_cx8' <<<"$insns" || ! grep -q '@pcpu_counter_add$' <<<"$insns"; then
        echo "FAIL: i386 probe_add with PCPU_COUNTER_SIM does not just call pcpu_counter_add"; exit 1
    fi
    echo "ok   calls pcpu_counter_add"
    echo "== the i386 checker accepts the right loop and rejects broken ones"
    cat > "$out/broken_i.c" <<'C'
#include <stdint.h>
extern const volatile uint8_t pcpu_cx8;
extern void pcpu_counter_add(uintptr_t, int64_t);
#define LOOP(lock, seg, jnz) "movl %%" seg ":(%2), %%eax\n\tmovl %%" seg ":4(%2), %%edx\n1:\n\t" \
    "movl %%eax, %%ebx\n\tmovl %%edx, %%ecx\n\taddl %3, %%ebx\n\tadcl %4, %%ecx\n\t" \
    lock "cmpxchg8b %%" seg ":(%2)\n\t" jnz
#define ASM(text) do { uint32_t lo, hi; __asm__ __volatile__(text : "=&a"(lo), "=&d"(hi) \
    : "r"(c), "rm"((uint32_t)v), "rm"((uint32_t)((uint64_t)v >> 32)) : "ebx", "ecx", "memory", "cc"); \
    (void)lo; (void)hi; } while (0)
#define GUARDED(cond, add) if (__builtin_expect(cond, 1)) { add; } else pcpu_counter_add(c, v)
void good(uintptr_t c, int64_t v) { GUARDED(pcpu_cx8 == 2, ASM(LOOP("", "fs", "jnz 1b"))); }
void locked(uintptr_t c, int64_t v) { GUARDED(pcpu_cx8 == 2, ASM(LOOP("lock; ", "fs", "jnz 1b"))); }
void gs(uintptr_t c, int64_t v) { GUARDED(pcpu_cx8 == 2, ASM(LOOP("", "gs", "jnz 1b"))); }
void once(uintptr_t c, int64_t v) { GUARDED(pcpu_cx8 == 2, ASM(LOOP("", "fs", ""))); }
void plain(uintptr_t c, int64_t v) {
    GUARDED(pcpu_cx8 == 2, __asm__ __volatile__("addl %1, %%fs:(%0)\n\tadcl %2, %%fs:4(%0)"
        : : "r"(c), "r"((uint32_t)v), "r"((uint32_t)((uint64_t)v >> 32)) : "memory", "cc"));
}
void unguarded(uintptr_t c, int64_t v) { ASM(LOOP("", "fs", "jnz 1b")); }
void unknown_as_cx8(uintptr_t c, int64_t v) { GUARDED(pcpu_cx8 != 1, ASM(LOOP("", "fs", "jnz 1b"))); }
void called(uintptr_t c, int64_t v) { pcpu_counter_add(c, v); pcpu_counter_add(c, v); }
C
    for pic in -fno-pic -fPIC; do
        i686-linux-gnu-gcc -std=c11 -O2 $pic -c "$out/broken_i.c" -o "$out/bi.o"
        check_i386 "$(body_i386 "$out/bi.o" good)" pcpu_counter_add \
            || { echo "FAIL: the i386 checker rejected the right loop ($pic)"; exit 1; }
        for f in locked gs once plain unguarded unknown_as_cx8 called; do
            if check_i386 "$(body_i386 "$out/bi.o" $f)" pcpu_counter_add; then
                echo "FAIL: the i386 checker accepted the broken add '$f' ($pic)"; exit 1
            fi
            echo "ok   rejected $f ($pic)"
        done
    done
else
    echo "skipped i386: i686-linux-gnu-gcc / binutils-i686-linux-gnu not installed"
fi
# riscv64: the add reads tp (gp with PCPU_COUNTER_RISCV_GP), adds the offset, then exactly
# one amoadd.d with rd zero and no .aq/.rl; no call (jal/jalr other than ret), no fence, no
# plain load or store of the slot, and the R_RISCV_NONE relocation against the library's
# register symbol ($2: tp or gp). Prints why it rejects.
check_riscv64() {
    local insns="$1" reg="$2" why=""
    [ "$(grep -c '^amoadd\.d\s' <<<"$insns")" = 1 ] || why="not exactly one amoadd.d (no .aq/.rl)"
    grep -q '^amoadd\.d\s\+zero,' <<<"$insns" || why="${why:-amoadd.d does not discard its result}"
    grep -Eq '^(jal|jalr|call|tail|j)\s' <<<"$insns" && why="${why:-a call or jump out}"
    grep -q '^fence' <<<"$insns" && why="${why:-a fence}"
    grep -Eq '^(ld|sd|lr\.d|sc\.d)\s' <<<"$insns" && why="${why:-a plain load/store or LR/SC}"
    grep -Eq "^add\s+[a-z0-9]+,$reg,[a-z0-9]+|^add\s+[a-z0-9]+,[a-z0-9]+,$reg\b" <<<"$insns" \
        || why="${why:-no add of $reg}"
    grep -q "R_RISCV_NONE\s\+pcpu_counter_riscv_$reg\$" <<<"$insns" || why="${why:-no R_RISCV_NONE to pcpu_counter_riscv_$reg}"
    [ -z "$why" ] || { echo "    rejected: $why"; return 1; }
}
# The instructions of function $2 in object $1 and their relocations (as objdump -dr prints).
body_riscv64() {
    riscv64-linux-gnu-objdump -dr --no-show-raw-insn "$1" | awk -v f="<$2>:" '
        $2 == f { on = 1; next }
        on && /^$/ { on = 0 }
        on { sub(/^ *[0-9a-f]+:\t/, ""); sub(/^\t+/, ""); print }'
}

if command -v riscv64-linux-gnu-gcc >/dev/null && command -v riscv64-linux-gnu-objdump >/dev/null; then
    echo "== compile matrix: riscv64"
    # Every standard and mode once; the full matrix (levels, frame pointer, -fPIC) per
    # compiler, ABI and register.
    for cc in "riscv64-linux-gnu-gcc" "clang --target=riscv64 -march=rv64gc"; do
        command -v ${cc%% *} >/dev/null || continue
        for std in c99 c11; do
            for mode in "" -ffreestanding; do
                $cc -std=$std $mode -O2 -Wall -Wextra -Werror -pedantic -Iinclude -c "$out/probe.c" -o "$out/p.o"
                echo "ok   $cc -std=$std $mode"
            done
        done
    done
    matrix riscv64-linux-gnu-gcc -std=c99 -march=rv64gc -mabi=lp64d -pedantic
    matrix riscv64-linux-gnu-gcc -std=c11 -ffreestanding -march=rv64imac -mabi=lp64 -mcmodel=medany -pedantic
    matrix riscv64-linux-gnu-gcc -std=c11 -ffreestanding -DPCPU_COUNTER_RISCV_GP -pedantic
    if command -v clang >/dev/null; then
        matrix clang --target=riscv64 -march=rv64gc -std=c11 -ffreestanding -pedantic
        matrix clang --target=riscv64 -march=rv64imac -mabi=lp64 -std=c99 -ffreestanding -DPCPU_COUNTER_RISCV_GP -pedantic
        clang++ --target=riscv64 -march=rv64gc -std=c++11 -ffreestanding -Wall -Wextra -Werror -pedantic \
            -Iinclude -c "$out/probe.cc" -o "$out/p.o"
        echo "ok   clang++ --target=riscv64 -std=c++11"
    fi
    if command -v riscv64-linux-gnu-g++ >/dev/null; then
        riscv64-linux-gnu-g++ -std=c++11 -Wall -Wextra -Werror -pedantic -Iinclude -c "$out/probe.cc" -o "$out/p.o"
        echo "ok   riscv64-linux-gnu-g++ -std=c++11"
    fi
    for cc in "riscv64-linux-gnu-gcc" "clang --target=riscv64 -march=rv64gc"; do
        command -v ${cc%% *} >/dev/null || continue
        for reg in tp gp; do
            def=""; [ $reg = gp ] && def=-DPCPU_COUNTER_RISCV_GP
            echo "== disassembly: riscv64 $def ($cc -O2)"
            $cc -std=c11 -O2 $def -Iinclude -c "$out/probe.c" -o "$out/r.o"
            for f in probe_add probe_protected probe_inc probe_dec probe_wide probe_two; do
                insns="$(body_riscv64 "$out/r.o" $f)"
                [ $f = probe_two ] && insns="$(awk '/^amoadd/ && !n++ {next} {print}' <<<"$insns")"
                printf '%s:\n%s\n' "$f" "$(sed 's/^/    /' <<<"$insns")"
                check_riscv64 "$insns" $reg || { echo "FAIL: riscv64 $f ($cc $def)"; exit 1; }
            done
        done
    done
    echo "== riscv64 under the simulation: only the out-of-line call"
    riscv64-linux-gnu-gcc -std=c11 -O2 -DPCPU_COUNTER_SIM -Iinclude -c "$out/probe.c" -o "$out/r.o"
    insns="$(body_riscv64 "$out/r.o" probe_add)"
    if grep -q 'amoadd' <<<"$insns" || ! grep -q 'pcpu_counter_add' <<<"$insns"; then
        echo "FAIL: riscv64 probe_add with PCPU_COUNTER_SIM does not just call pcpu_counter_add"; exit 1
    fi
    echo "ok   calls pcpu_counter_add"
    echo "== the riscv64 checker rejects broken adds"
    cat > "$out/broken_r.c" <<'C'
#include <stdint.h>
extern const uint8_t pcpu_counter_riscv_tp;
extern void pcpu_counter_add(uintptr_t, int64_t);
#define MARK ".reloc ., R_RISCV_NONE, %3\n\t"
#define ASM(text) do { uintptr_t s; __asm__ __volatile__(text : "=&r"(s) : "r"(c), "r"(v), "i"(&pcpu_counter_riscv_tp) : "memory"); } while (0)
void good(uintptr_t c, int64_t v) { ASM(MARK "add %0, tp, %1\n\tamoadd.d zero, %2, (%0)"); }
void split(uintptr_t c, int64_t v) { uint64_t t; __asm__ __volatile__(MARK "add %0, tp, %2\n\tld %1, 0(%0)\n\tadd %1, %1, %3\n\tsd %1, 0(%0)" : "=&r"(c), "=&r"(t) : "r"(c), "r"(v), "i"(&pcpu_counter_riscv_tp) : "memory"); }
void fenced(uintptr_t c, int64_t v) { ASM(MARK "add %0, tp, %1\n\tfence rw, rw\n\tamoadd.d zero, %2, (%0)"); }
void ordered(uintptr_t c, int64_t v) { ASM(MARK "add %0, tp, %1\n\tamoadd.d.aqrl zero, %2, (%0)"); }
void twice(uintptr_t c, int64_t v) { ASM(MARK "add %0, tp, %1\n\tamoadd.d zero, %2, (%0)\n\tamoadd.d zero, %2, (%0)"); }
void gp(uintptr_t c, int64_t v) { ASM(MARK "add %0, gp, %1\n\tamoadd.d zero, %2, (%0)"); }
void unmarked(uintptr_t c, int64_t v) { ASM("add %0, tp, %1\n\tamoadd.d zero, %2, (%0)"); }
void absolute(uintptr_t c, int64_t v) { ASM(MARK "amoadd.d zero, %2, (%1)"); }
void called(uintptr_t c, int64_t v) { pcpu_counter_add(c, v); pcpu_counter_add(c, v); }
C
    riscv64-linux-gnu-gcc -std=c11 -O2 -c "$out/broken_r.c" -o "$out/br.o"
    check_riscv64 "$(body_riscv64 "$out/br.o" good)" tp || { echo "FAIL: the riscv64 checker rejected the right add"; exit 1; }
    for f in split fenced ordered twice gp unmarked absolute called; do
        if check_riscv64 "$(body_riscv64 "$out/br.o" $f)" tp; then
            echo "FAIL: the riscv64 checker accepted the broken add '$f'"; exit 1
        fi
        echo "ok   rejected $f"
    done
else
    echo "skipped riscv64: riscv64-linux-gnu-gcc / binutils-riscv64-linux-gnu not installed"
fi
echo "header check: all passed"

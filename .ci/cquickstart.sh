#!/usr/bin/env bash
# The README's C quick start, followed as a user with only rustup would (issue 29, item 1):
# 1. runs the README's build command, as written, in an environment holding only HOME and a
#    PATH with rustup first, and checks that it skipped rustup's prebuilt core with one line
#    (compiler-rt objects of another float ABI) and built core from source;
# 2. compiles the README's C snippet (with a _start and the four pcpu_platform_* hooks) as a
#    freestanding x86_64 kernel object and links it against the library with GNU ld, and
#    checks that counter_u64_add is the inline `%gs:` add, with no call;
# 3. builds the library as docs/c.md "Without a checkout" says (its Cargo.toml and src/lib.rs,
#    the published crate replaced by this checkout) and links the same kernel against it.
# Needs rustup (it adds x86_64-unknown-none if missing), gcc and binutils. Prints the time of
# each build.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
rustup_bin="$(command -v rustup || echo "$HOME/.cargo/bin/rustup")"
[ -x "$rustup_bin" ] || { echo "FAIL: this probe needs rustup"; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
clean_env=(env -i HOME="$HOME" PATH="$(dirname "$rustup_bin"):/usr/local/bin:/usr/bin:/bin")

# The fenced block of kind $2 (sh, c, toml, rust; `rust,ignore` counts as rust) number $3
# (from 1) after the heading $1 of file $4, without its fences.
block() {
    awk -v heading="$1" -v kind="$2" -v nth="$3" '
        $0 == heading { on = 1; next }
        on && /^#/ && !inside { exit }
        on && !inside && ($0 == "```" kind || index($0, "```" kind ",") == 1) { n++; inside = 1; next }
        inside && /^```$/ { inside = 0; if (n == nth) exit; next }
        inside && n == nth { print }' "$4"
}

echo "== the README's C quick start command, with rustup alone"
cmd="$(block '## Quick start: a C kernel' sh 1 README.md | grep '^bash testbeds/capi-kernel/build.sh' | sed 's/ *#.*//')"
[ -n "$cmd" ] || { echo "FAIL: no build.sh command in the README's C quick start"; exit 1; }
echo "\$ $cmd"
start=$SECONDS
"${clean_env[@]}" bash -c "$cmd" 2>&1 | tee "$out/build.log"
echo "   took $((SECONDS - start)) s"
# The choice of xtask/src/toolchain.rs: rustup's prebuilt core (x86_64-unknown-none is
# installed) is skipped with one line, its compiler_builtins holding compiler-rt C objects of
# another float ABI, and core is built from the library source.
grep -q '^toolchain skipped: .* for x86_64-unknown-none (its prebuilt core): its compiler_builtins holds [0-9]* compiler-rt C objects' \
    "$out/build.log" || { echo "FAIL: no line saying why the prebuilt core was not taken"; exit 1; }
grep -q "^   cargo: " "$out/build.log" || { echo "FAIL: no cargo line"; exit 1; }
grep -q "core: built from source" "$out/build.log" || { echo "FAIL: core not built from source"; exit 1; }
lib="$(sed -n 's/^ *ok: \([^ ]*libpcpu_counter\.a\) .*/\1/p' "$out/build.log")"
[ -f "$lib" ] || { echo "FAIL: the command made no library"; exit 1; }

echo "== the README's C snippet as a freestanding x86_64 kernel, linked with GNU ld"
block '## Quick start: a C kernel' c 1 README.md > "$out/quickstart.c"
# What the snippet takes from its kernel: the per-CPU blocks, NCPUS and panic().
cat > "$out/kernel.h" <<'EOF'
#include <stddef.h>
#define NCPUS 4
extern char percpu[NCPUS][4096];
void panic(const char *msg) __attribute__((noreturn));
void counters_init(void);
void cpu_start(size_t cpu);
void on_packet(void);
EOF
cat > "$out/kernel.c" <<'EOF'
#include <stdint.h>
#include "kernel.h"
char percpu[NCPUS][4096] __attribute__((aligned(4096)));
void panic(const char *msg) { (void)msg; for (;;) __asm__ volatile("hlt"); }
uintptr_t pcpu_platform_protect(void) {
    uintptr_t flags;
    __asm__ volatile("pushfq; popq %0; cli" : "=r"(flags) : : "memory");
    return flags;
}
void pcpu_platform_unprotect(uintptr_t s) { if (s & 0x200) __asm__ volatile("sti" : : : "memory"); }
size_t pcpu_platform_current_cpu(void) { return 0; }
void pcpu_platform_panic(const char *msg, size_t len) { (void)len; panic(msg); }
void _start(void) { counters_init(); cpu_start(0); on_packet(); panic("done"); }
EOF
cat > "$out/link.ld" <<'EOF'
ENTRY(_start)
SECTIONS {
    . = 0x100000;
    .text : { *(.text .text.*) }
    .rodata : { *(.rodata .rodata.*) }
    .data : { *(.data .data.*)
        . = ALIGN(8); __start_pcpu_counter_early = .; KEEP(*(pcpu_counter_early)) __stop_pcpu_counter_early = .; }
    .bss : { *(.bss .bss.*) *(COMMON) }
}
EOF
cflags=(-std=c11 -ffreestanding -nostdlib -fno-pic -mno-red-zone -mcmodel=kernel -mno-sse -O2
    -Wall -Wextra -Werror -Iinclude -I"$out")
gcc "${cflags[@]}" -include "$out/kernel.h" -c "$out/quickstart.c" -o "$out/quickstart.o"
gcc "${cflags[@]}" -c "$out/kernel.c" -o "$out/kernel.o"
# Links $1 into $out/kernel-$2.elf and checks the kernel's add.
link() {
    ld -nostdlib -static --gc-sections -z noexecstack --no-warn-rwx-segments -T "$out/link.ld" \
        "$out/quickstart.o" "$out/kernel.o" "$1" -o "$out/kernel-$2.elf"
    local add
    objdump -d --no-show-raw-insn "$out/kernel-$2.elf" > "$out/kernel-$2.dis"
    add="$(awk '/<on_packet>:$/ {on = 1; next} on && /^$/ {exit} on' "$out/kernel-$2.dis")"
    grep -q '%gs:' <<<"$add" && ! grep -q 'call' <<<"$add" \
        || { echo "FAIL: on_packet is not the inline %gs: add:"; echo "$add"; exit 1; }
    echo "ok   $1 links; on_packet: $(grep -o 'add.*%gs:.*' <<<"$add" | tr -s ' ')"
}
link "$lib" readme

echo "== docs/c.md \"Without a checkout\": the library from the crate, no checkout needed"
mkdir -p "$out/crate/src"
block '### Without a checkout' toml 1 docs/c.md > "$out/crate/Cargo.toml"
block '### Without a checkout' rust 1 docs/c.md > "$out/crate/src/lib.rs"
build="$(block '### Without a checkout' sh 1 docs/c.md | grep '^cargo build')"
[ -s "$out/crate/Cargo.toml" ] && [ -s "$out/crate/src/lib.rs" ] && [ -n "$build" ] \
    || { echo "FAIL: docs/c.md lacks the Cargo.toml, src/lib.rs or cargo build of \"Without a checkout\""; exit 1; }
# This checkout stands in for the published crate (its version is the one on crates.io).
printf '\n[patch.crates-io]\npcpu-counter = { path = "%s" }\n' "$root" >> "$out/crate/Cargo.toml"
echo "\$ $build"
start=$SECONDS
(cd "$out/crate" && "${clean_env[@]}" CARGO_TARGET_DIR="$root/target/cquickstart" bash -c "$build --quiet")
echo "   took $((SECONDS - start)) s"
link "$root/target/cquickstart/x86_64-unknown-none/release/libpcpu_counter_c.a" crate

echo "== every C block of the manuals compiles against the header (the README's is linked above)"
for doc in docs/*.md; do
    n=$(grep -c '^```c$' "$doc" || true)
    for i in $(seq 1 "$n"); do
        awk -v nth="$i" '/^```c$/ { n++; inside = (n == nth); next } inside && /^```$/ { exit } inside' \
            "$doc" > "$out/block.c"
        gcc -std=c11 -fsyntax-only -Wall -Wextra -Werror -Iinclude \
            -include stdint.h -include stddef.h -include pcpu_counter.h "$out/block.c" \
            || { echo "FAIL: C block $i of $doc does not compile"; exit 1; }
        echo "ok   $doc, C block $i"
    done
done
echo "cquickstart: all checks passed"

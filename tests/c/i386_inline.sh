#!/usr/bin/env bash
# The header's i386 inline counter_u64_add at run time: builds the host library (testbeds/capi-host/) for
# i686-unknown-linux-gnu (with rustup's cargo and prebuilt i686 standard library where that
# target is installed, as .ci/cross.sh installs it: seconds; else with Debian's cargo,
# -Zbuild-std: std from source, about a minute on 2 cores), links tests/c/i386_inline_test.c
# with tests/c/i386_inline_add.c (the fast path, compiled without PCPU_COUNTER_SIM, -fno-pic
# and -fPIC), and runs it natively and under qemu-i386, with CX8 (the inline cmpxchg8b loop)
# and with PCPU_COUNTER_FORCE_NO_CX8=1 (pcpu_cx8 is 1: the out-of-line add).
# Needs rustup with the i686-unknown-linux-gnu target or Debian's rustc-web cargo-web
# rust-web-src, and gcc-i686-linux-gnu, libc6-dev-i386-cross; qemu-user is optional.
set -euo pipefail
cd "$(dirname "$0")/../.."
loader=/usr/i686-linux-gnu/lib/ld-linux.so.2
prebuilt=0
command -v rustup >/dev/null && rustup target list --installed 2>/dev/null | grep -qx i686-unknown-linux-gnu \
    && prebuilt=1
if { [ $prebuilt = 0 ] && ! [ -x /usr/bin/cargo ]; } || ! command -v i686-linux-gnu-gcc >/dev/null || ! [ -e "$loader" ]; then
    echo "skipped: needs rustup's i686-unknown-linux-gnu target or Debian's cargo (rustc-web cargo-web rust-web-src), gcc-i686-linux-gnu, libc6-dev-i386-cross"
    exit 0
fi
dir="$PWD/target/capi-i686"
if [ $prebuilt = 1 ]; then
    echo "library: rustup's cargo, prebuilt i686 standard library"
    CARGO_TARGET_DIR="$dir" cargo build --quiet --manifest-path testbeds/capi-host/Cargo.toml \
        --target i686-unknown-linux-gnu
else
    echo "library: Debian's cargo, standard library built from source (-Zbuild-std)"
    PATH="/usr/bin:$PATH" RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$dir" \
        /usr/bin/cargo build --quiet --manifest-path testbeds/capi-host/Cargo.toml --target i686-unknown-linux-gnu \
        -Zbuild-std=std,panic_abort
fi
lib="$dir/i686-unknown-linux-gnu/debug/libpcpu_counter_capi.a"
flags=(-std=c11 -O2 -Wall -Wextra -Werror -pedantic -Iinclude)
for pic in -fno-pic -fPIC; do
    link=-no-pie; [ "$pic" = -fPIC ] && link=-pie
    exe="$dir/i386_inline_test$pic"
    # With a frame pointer, as xv6 and most kernels build: the loop then has only esi and edi.
    i686-linux-gnu-gcc "${flags[@]}" $pic -fno-omit-frame-pointer -c tests/c/i386_inline_add.c -o "$dir/i386_inline_add.o"
    i686-linux-gnu-gcc "${flags[@]}" $pic $link -D_GNU_SOURCE tests/c/i386_inline_test.c \
        "$dir/i386_inline_add.o" "$lib" -lpthread -ldl -lm \
        -Wl,--dynamic-linker=$loader -Wl,-rpath,/usr/i686-linux-gnu/lib -o "$exe"
    runners=(env)   # native: the x86_64 kernel runs i386 binaries
    command -v qemu-i386 >/dev/null && runners+=("qemu-i386 -L /usr/i686-linux-gnu")
    for runner in "${runners[@]}"; do
        for force in "" 1; do
            printf '%-8s %-9s %-28s ' "$pic" "$([ "$runner" = env ] && echo native || echo qemu-i386)" "${force:+PCPU_COUNTER_FORCE_NO_CX8=1}"
            if [ -n "$force" ]; then
                PCPU_COUNTER_FORCE_NO_CX8=1 $runner "$exe"
            else
                $runner "$exe"
            fi
        done
    done
done
echo "i386 inline: all passed"

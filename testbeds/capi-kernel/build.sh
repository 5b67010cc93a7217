#!/usr/bin/env bash
# Builds libpcpu_counter.a, the C ABI for kernels written only in C, for each bare-metal
# target given (default: x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none),
# into target/capi-lib/<target>/libpcpu_counter.a, and checks with nm that the library defines
# the C ABI and needs nothing but the kernel's four pcpu_platform_* hooks (and the bounds of
# the early-counter linker set, which the linker defines).
# i586-unknown-none is the JSON spec arch/i386/i586-unknown-none.json (a Pentium without
# MMX/SSE, soft float; as the i386 QEMU kernel); a path to another *.json spec works too, and
# its output folder is the file stem, as cargo names it. riscv64: riscv64gc-unknown-none-elf
# is the lp64d ABI (what riscv64-linux-gnu-gcc emits), riscv64imac-unknown-none-elf lp64
# (soft float, -march=rv64imac -mabi=lp64): link the one whose ABI the kernel's objects have.
# Needs Debian's cargo with the library source (rustc-web cargo-web rust-web-src), or a
# rustup toolchain with rust-src (set CARGO to it), and binutils. BUILD_STD=0 uses the
# target's prebuilt core instead (rustup target add <target>; CARGO=~/.cargo/bin/cargo), for
# targets rustup ships (x86_64-unknown-none, aarch64-unknown-none-softfloat and both riscv64
# ones; not the i586 JSON spec).
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none
    riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf)
cargo_bin="${CARGO:-/usr/bin/cargo}"
if ! [ -x "$cargo_bin" ]; then
    echo "missing: a cargo with the library source (apt-get install rustc-web cargo-web rust-web-src)"
    exit 1
fi
for spec in "${targets[@]}"; do
    # A JSON spec: --target takes its path, -Zjson-target-spec allows it, and cargo names the
    # target (and its folder under target/) after the file stem.
    [ "$spec" = i586-unknown-none ] && spec=arch/i386/i586-unknown-none.json
    json=()
    t="$spec"
    if [[ "$spec" == *.json ]]; then
        [ -f "$spec" ] || { echo "FAIL: no target spec $spec"; exit 1; }
        spec="$(realpath "$spec")"
        json=(-Zjson-target-spec)
        t="$(basename "$spec" .json)"
    fi
    std_flags=(-Zbuild-std=core,compiler_builtins -Zbuild-std-features=compiler-builtins-mem)
    [ "${BUILD_STD:-1}" = 0 ] && std_flags=()
    # RISCV_GP=1: riscv64 libraries that add through gp (feature riscv-gp), into
    # target/capi-lib/<target>-gp/; C for them is compiled with -DPCPU_COUNTER_RISCV_GP.
    feature_flags=() reg=tp
    if [ "${RISCV_GP:-0}" = 1 ] && [[ "$t" == riscv64* ]]; then
        feature_flags=(--features pcpu-counter/riscv-gp) reg=gp
    fi
    # The library's panic locations name its source files relative to the checkout
    # (`src/zone.rs`), not by the checkout's path: the library, and its footprint, are the
    # same in any checkout.
    RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$PWD/=" \
    PATH="$(dirname "$cargo_bin"):$PATH" RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$PWD/target/capi-kernel" \
        "$cargo_bin" build --quiet --release --manifest-path testbeds/capi-kernel/Cargo.toml --target "$spec" \
        "${std_flags[@]}" "${feature_flags[@]}" "${json[@]}"
    out_dir="target/capi-lib/$t"
    [ $reg = gp ] && out_dir="$out_dir-gp"
    mkdir -p "$out_dir"
    lib="$out_dir/libpcpu_counter.a"
    cp "target/capi-kernel/$t/release/libpcpu_counter_kernel.a" "$lib"
    # compiler_builtins' objects carry LLVM bitcode next to their code (the profile's LTO),
    # which binutils' nm and ar cannot read: drop it, the code stays.
    case "$t" in
        aarch64-*) objcopy_bin=aarch64-linux-gnu-objcopy ;;
        riscv64*) objcopy_bin=riscv64-linux-gnu-objcopy ;;
        *) objcopy_bin=objcopy ;;
    esac
    command -v "$objcopy_bin" >/dev/null || objcopy_bin=llvm-objcopy
    # (rustup's prebuilt compiler_builtins, BUILD_STD=0, can hold relocations an older GNU
    # objcopy does not know: then llvm-objcopy.)
    if ! "$objcopy_bin" -R .llvmbc -R .llvmcmd "$lib" 2>/dev/null; then
        cp "target/capi-kernel/$t/release/libpcpu_counter_kernel.a" "$lib"
        llvm-objcopy -R .llvmbc -R .llvmcmd "$lib"
    fi
    # Undefined in some member and defined in none (an archive's members refer to each other).
    defined="$(nm --defined-only "$lib" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u)"
    undefined="$(nm -u "$lib" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u | comm -23 - <(printf '%s\n' "$defined"))"
    # The linker defines the early-counter set's bounds (__start_/__stop_pcpu_counter_early).
    extra="$(grep -v '^pcpu_platform_\(protect\|unprotect\|current_cpu\|panic\)$' <<<"$undefined" \
        | grep -v '^__\(start\|stop\)_pcpu_counter_early$' || true)"
    if [ -n "$extra" ]; then
        echo "FAIL: $lib needs symbols beyond the pcpu_platform_* hooks:"; echo "$extra"; exit 1
    fi
    syms=(counter_u64_alloc counter_u64_free counter_u64_fetch counter_u64_zero pcpu_counter_add
        pcpu_counter_add_protected pcpu_zone_init pcpu_set_cpu_base pcpu_sysctl_add_counter
        pcpu_sysctl_walk)
    # i386: the CX8 cache that the header's inline counter_u64_add reads.
    case "$t" in i[3-6]86-*) syms+=(pcpu_cx8) ;; esac
    # riscv64: the register symbol the header's inline add references (tp; gp with riscv-gp).
    case "$t" in riscv64*) syms+=(pcpu_counter_riscv_$reg) ;; esac
    for sym in "${syms[@]}"; do
        grep -qx "$sym" <<<"$defined" || { echo "FAIL: $lib lacks $sym"; exit 1; }
    done
    echo "ok   $lib ($(du -k "$lib" | cut -f1) KiB; undefined: $(tr '\n' ' ' <<<"$undefined"))"
done

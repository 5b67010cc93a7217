#!/usr/bin/env bash
# Builds libpcpu_counter.a, the C ABI for kernels written only in C, for each bare-metal
# target given (default: x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none
# riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf), into
# target/capi-lib/<target>/libpcpu_counter.a, and checks with nm that the library defines the
# C ABI and needs nothing but the kernel's four pcpu_platform_* hooks (and the bounds of the
# early-counter linker set, which the linker defines). The library has no .eh_frame.
# testbeds/capi-kernel/link_check.sh then links every member into a C kernel of its ABI.
#
# i586-unknown-none is the JSON spec arch/i386/i586-unknown-none.json (a Pentium without
# MMX/SSE, soft float; as the i386 QEMU kernel); a path to another *.json spec works too, and
# its output folder is the file stem, as cargo names it. riscv64: riscv64gc-unknown-none-elf
# is the lp64d ABI (what riscv64-linux-gnu-gcc emits), riscv64imac-unknown-none-elf lp64
# (soft float, -march=rv64imac -mabi=lp64): link the one whose ABI the kernel's objects have.
#
# Needs a Rust toolchain and binutils (objcopy, nm). The toolchain is chosen per target by
# `cargo xtask toolchain --c-library <target>` (xtask/src/toolchain.rs, the choice every
# `cargo xtask` build makes): the first that can do the job, $CARGO alone if set. A prebuilt
# core is taken only where rustup's compiler_builtins holds nothing but what rustc compiled
# (today's hold compiler-rt C objects built for another float ABI than the target's), so
# core and compiler_builtins are built from the library source (-Zbuild-std, with
# RUSTC_BOOTSTRAP=1 on a stable toolchain) by a toolchain that has it, is at least the
# crate's rust-version and whose cargo knows the -Z flags the build passes; one that lacks
# something is skipped with one line that says what and how to fix it. Where none fits,
# rustup adds rust-src to the default toolchain. BUILD_STD=1 asks for core from source
# (the default in effect), BUILD_STD=0 for a prebuilt one (refused where it would not link).
# PCPU_XTASK: the xtask binary to ask (`cargo xtask qemu` passes its own); else `cargo run` builds
# it (about 20 s once, into xtask/target). About a minute per target the first time (core
# and compiler_builtins from source), then seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-none aarch64-unknown-none-softfloat i586-unknown-none
    riscv64gc-unknown-none-elf riscv64imac-unknown-none-elf)

# The toolchain for target $1, chosen by xtask/src/toolchain.rs: into $cargo_bin, $build_std
# and $cargo_from; its skip lines and rustup's output go to stderr.
choose_args=(--c-library)
[ -n "${CARGO:-}" ] && choose_args+=(--cargo "$CARGO")
case "${BUILD_STD:-}" in 1) choose_args+=(--build-std) ;; 0) choose_args+=(--prebuilt) ;; esac
if [ -n "${PCPU_XTASK:-}" ]; then
    xtask=("$PCPU_XTASK")
else
    xtask_cargo="$(command -v cargo || true)"
    [ -z "$xtask_cargo" ] && [ -x "$HOME/.cargo/bin/cargo" ] && xtask_cargo="$HOME/.cargo/bin/cargo"
    [ -z "$xtask_cargo" ] && xtask_cargo="${CARGO:-}"
    [ -n "$xtask_cargo" ] || {
        echo "FAIL: no Rust toolchain: install rustup (https://rustup.rs), or" \
            "apt-get install rustc-web cargo-web rust-web-src"
        exit 1
    }
    xtask=(env -u CARGO_TARGET_DIR "$xtask_cargo" run --quiet --manifest-path xtask/Cargo.toml --)
fi
pick_cargo() {
    local choice
    choice="$("${xtask[@]}" toolchain "${choose_args[@]}" "$1")" || exit 1
    cargo_bin="$(sed -n 's/^cargo=//p' <<<"$choice")"
    build_std="$(sed -n 's/^build_std=//p' <<<"$choice")"
    cargo_from="$(sed -n 's/^description=//p' <<<"$choice")"
    cargo_from="${cargo_from% (*}"   # the toolchain, without how it gets core
}

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
    start=$SECONDS
    echo "== $t"
    pick_cargo "$spec"
    echo "   cargo: $cargo_bin ($cargo_from; $("$cargo_bin" --version))"
    std_flags=()
    if [ "$build_std" = 1 ]; then
        std_flags=(-Zbuild-std=core,compiler_builtins -Zbuild-std-features=compiler-builtins-mem)
        echo "   core: built from source (-Zbuild-std; a minute the first time)"
    else
        echo "   core: prebuilt ($("$(dirname "$cargo_bin")/rustc" --print sysroot)/lib/rustlib/$t)"
    fi
    # RISCV_GP=1: riscv64 libraries that add through gp (feature riscv-gp), into
    # target/capi-lib/<target>-gp/; C for them is compiled with -DPCPU_COUNTER_RISCV_GP.
    feature_flags=() reg=tp
    if [ "${RISCV_GP:-0}" = 1 ] && [[ "$t" == riscv64* ]]; then
        feature_flags=(--features pcpu-counter/riscv-gp) reg=gp
    fi
    # The library's panic locations name its source files relative to the checkout
    # (`src/zone.rs`), not by the checkout's path: the library, and its footprint, are the
    # same in any checkout. RUSTC: the rustc of the chosen cargo (a rustup proxy or an outer
    # cargo could name another); RUSTC_BOOTSTRAP=1 lets -Zbuild-std and JSON specs run on a
    # stable toolchain.
    # Dependencies' locations likewise name `spin-0.10.1/src/once.rs`, not the cargo home.
    remap="--remap-path-prefix=$PWD/="
    for registry in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
        [ -d "$registry" ] && remap+=" --remap-path-prefix=$registry="
    done
    bootstrap=()
    [ ${#std_flags[@]} -gt 0 ] || [ ${#json[@]} -gt 0 ] && bootstrap=(RUSTC_BOOTSTRAP=1)
    env "${bootstrap[@]}" RUSTFLAGS="${RUSTFLAGS:-} $remap" \
        PATH="$(dirname "$cargo_bin"):$PATH" RUSTC="$(dirname "$cargo_bin")/rustc" \
        CARGO_TARGET_DIR="$PWD/target/capi-kernel" \
        "$cargo_bin" build --quiet --release --manifest-path testbeds/capi-kernel/Cargo.toml --target "$spec" \
        "${std_flags[@]}" "${feature_flags[@]}" "${json[@]}"
    out_dir="target/capi-lib/$t"
    [ $reg = gp ] && out_dir="$out_dir-gp"
    mkdir -p "$out_dir"
    lib="$out_dir/libpcpu_counter.a"
    cp "target/capi-kernel/$t/release/libpcpu_counter_kernel.a" "$lib"
    # compiler_builtins' objects carry LLVM bitcode next to their code (the profile's LTO),
    # which binutils' nm and ar cannot read: drop it, the code stays. Drop the unwind tables
    # too (.eh_frame: 4,668 bytes in a riscv64 kernel with rustup's prebuilt core): nothing in
    # a `panic = "abort"` kernel reads them (link_check.sh fails on any left).
    case "$t" in
        aarch64-*) objcopy_bin=aarch64-linux-gnu-objcopy ;;
        riscv64*) objcopy_bin=riscv64-linux-gnu-objcopy ;;
        *) objcopy_bin=objcopy ;;
    esac
    command -v "$objcopy_bin" >/dev/null || objcopy_bin=llvm-objcopy
    # (rustup's prebuilt compiler_builtins can hold relocations an older GNU objcopy does not
    # know: then llvm-objcopy.)
    if ! "$objcopy_bin" -R .llvmbc -R .llvmcmd -R .eh_frame "$lib" 2>/dev/null; then
        cp "target/capi-kernel/$t/release/libpcpu_counter_kernel.a" "$lib"
        llvm-objcopy -R .llvmbc -R .llvmcmd -R .eh_frame "$lib"
    fi
    # Undefined in some member and defined in none (an archive's members refer to each other).
    defined="$(nm --defined-only "$lib" 2>/dev/null | awk 'NF == 3 {print $3}' | sort -u)"
    undefined="$(nm -u "$lib" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u | comm -23 - <(printf '%s\n' "$defined"))"
    # The linker defines the early-counter set's bounds (__start_/__stop_pcpu_counter_early) and
    # the per-CPU statics' section's (__start_/__stop_pcpu_counter_statics).
    extra="$(grep -v '^pcpu_platform_\(protect\|unprotect\|current_cpu\|panic\)$' <<<"$undefined" \
        | grep -v '^__\(start\|stop\)_pcpu_counter_\(early\|statics\)$' || true)"
    if [ -n "$extra" ]; then
        echo "FAIL: $lib needs symbols beyond the pcpu_platform_* hooks:"; echo "$extra"; exit 1
    fi
    syms=(counter_u64_alloc counter_u64_free counter_u64_fetch counter_u64_zero pcpu_counter_add
        pcpu_counter_add_protected pcpu_zone_init pcpu_set_cpu_base pcpu_sysctl_add_counter
        pcpu_sysctl_walk pcpu_statics_install pcpu_static_fetch)
    # i386: the CX8 cache that the header's inline counter_u64_add reads.
    case "$t" in i[3-6]86-*) syms+=(pcpu_cx8) ;; esac
    # riscv64: the register symbol the header's inline add references (tp; gp with riscv-gp).
    case "$t" in riscv64*) syms+=(pcpu_counter_riscv_$reg) ;; esac
    for sym in "${syms[@]}"; do
        grep -qx "$sym" <<<"$defined" || { echo "FAIL: $lib lacks $sym"; exit 1; }
    done
    echo "   ok: $lib ($(du -k "$lib" | cut -f1) KiB, $((SECONDS - start)) s; undefined: $(tr '\n' ' ' <<<"$undefined"))"
done

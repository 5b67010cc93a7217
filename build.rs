//! Names each build condition of the crate once, as a `cfg` of its own (as `heapless` and
//! `portable-atomic` do), so that the source says what a condition means instead of spelling
//! out its parts:
//!
//! | cfg | set when | means |
//! |---|---|---|
//! | `pcpu_kernel_api` | feature `sim`, or a target that is not hosted (not unix, not windows) | the kernel API (`Zone`, `Counter`, `freebsd`, ...) is offered: the CPUs have a per-CPU register the add can use |
//! | `pcpu_core` | `pcpu_kernel_api`, or feature `rseq` on x86_64/aarch64 Linux | the core's internals (zones, slots, the arch primitives) are compiled |
//! | `pcpu_rseq` | feature `rseq` on x86_64/aarch64 Linux | the `rseq` module (Linux programs) |
//! | `pcpu_hosted_cpus` | feature `sim` | the platform's CPUs are host threads: `src/platform.rs` takes its answers from `src/sim/` |
//! | `pcpu_base_from_platform` | feature `platform-base` or `sim`, on aarch64 and riscv64 | the add takes the per-CPU base from the platform instead of `TPIDR_EL1`/`tp`/`gp` (which a host thread cannot own, and some kernels keep for themselves) |

use std::env;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for name in [
        "pcpu_kernel_api",
        "pcpu_core",
        "pcpu_rseq",
        "pcpu_hosted_cpus",
        "pcpu_base_from_platform",
    ] {
        println!("cargo::rustc-check-cfg=cfg({name})");
    }
    let feature = |f: &str| env::var_os(format!("CARGO_FEATURE_{}", f.to_uppercase())).is_some();
    let target = |key: &str| env::var(format!("CARGO_CFG_TARGET_{key}")).unwrap_or_default();
    let (family, os, arch) = (target("FAMILY"), target("OS"), target("ARCH"));

    let sim = feature("sim");
    let hosted = family.split(',').any(|f| f == "unix" || f == "windows");
    let kernel_api = sim || !hosted;
    let rseq = feature("rseq") && os == "linux" && matches!(arch.as_str(), "x86_64" | "aarch64");
    let emit = |name: &str, on: bool| {
        if on {
            println!("cargo::rustc-cfg={name}");
        }
    };
    emit("pcpu_kernel_api", kernel_api);
    emit("pcpu_core", kernel_api || rseq);
    emit("pcpu_rseq", rseq);
    emit("pcpu_hosted_cpus", sim);
    emit(
        "pcpu_base_from_platform",
        (sim || feature("platform-base")) && matches!(arch.as_str(), "aarch64" | "riscv64"),
    );
}

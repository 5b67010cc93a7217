//! Names each build condition of the crate once, as a `cfg` of its own (as `heapless` and
//! `portable-atomic` do), so that the source says what a condition means instead of spelling
//! out its parts:
//!
//! | cfg | set when | means |
//! |---|---|---|
//! | `pcpu_no_cpu_register` | a hosted target (unix, windows) without feature `sim` | an ordinary thread has no per-CPU register: the kernel API compiles, but no zone can be made (`Error::NoCpuRegister`), so no add can run |
//! | `pcpu_hosted_cpus` | feature `sim` | the platform's CPUs are host threads: `src/platform.rs` takes its answers from `src/sim/host.rs` |
//! | `pcpu_base_from_platform` | feature `platform-base` or `sim`, on aarch64 and riscv64 | the add takes the per-CPU base from the platform instead of `TPIDR_EL1`/`tp`/`gp` (which a host thread cannot own, and some kernels keep for themselves) |
//! | `pcpu_unprotected_add` | x86_64, aarch64, riscv64 | the arch's add needs no local protection: `counter_enter`'s guard is zero-sized and links no protection hook |
//! | `pcpu_c_abi` | feature `capi`, where a zone can be made (not `pcpu_no_cpu_register`) | the C ABI (`capi`), whose early counters need the linker's section bounds of an ELF kernel or the simulation's host |
//! | `pcpu_rseq` | feature `rseq` on x86_64/aarch64 Linux | the `rseq` module (Linux programs) |

use std::env;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for name in [
        "pcpu_no_cpu_register",
        "pcpu_hosted_cpus",
        "pcpu_base_from_platform",
        "pcpu_unprotected_add",
        "pcpu_c_abi",
        "pcpu_rseq",
    ] {
        println!("cargo::rustc-check-cfg=cfg({name})");
    }
    let feature = |f: &str| env::var_os(format!("CARGO_FEATURE_{}", f.to_uppercase())).is_some();
    let target = |key: &str| env::var(format!("CARGO_CFG_TARGET_{key}")).unwrap_or_default();
    let (family, os, arch) = (target("FAMILY"), target("OS"), target("ARCH"));
    let arch = arch.as_str();

    let sim = feature("sim");
    let hosted = family.split(',').any(|f| f == "unix" || f == "windows");
    let emit = |name: &str, on: bool| {
        if on {
            println!("cargo::rustc-cfg={name}");
        }
    };
    emit("pcpu_no_cpu_register", hosted && !sim);
    emit("pcpu_hosted_cpus", sim);
    emit(
        "pcpu_base_from_platform",
        (sim || feature("platform-base")) && matches!(arch, "aarch64" | "riscv64"),
    );
    emit(
        "pcpu_unprotected_add",
        matches!(arch, "x86_64" | "aarch64" | "riscv64"),
    );
    emit("pcpu_c_abi", feature("capi") && (sim || !hosted));
    emit(
        "pcpu_rseq",
        feature("rseq") && os == "linux" && matches!(arch, "x86_64" | "aarch64"),
    );
}

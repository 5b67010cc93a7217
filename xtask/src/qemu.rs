//! `cargo xtask qemu [x86_64|aarch64|i386|riscv64|riscv64-broken|riscv64-platform-base|percpu|<arch>-percpu|c-x86_64|c-aarch64|c-i386|c-riscv64|c|all]`: builds the QEMU test
//! kernels (`testbeds/kernel/` in Rust, boot code under its `boot/<arch>/`;
//! `testbeds/ckernel/` in C only, its glue under its `boot/<arch>/`, booting through the Rust
//! kernels' entry and linker script), boots each under `qemu-system-*`, prints its serial
//! output and fails on any `FAIL` line, a missing verdict, a wrong exit status or a hang
//! ([`BOOT_CPU_LIMIT`] of QEMU CPU time, or [`BOOT_SILENCE_LIMIT`] without a serial line:
//! limits that a loaded host does not use up). Each failed run prints one line, `FAIL [qemu
//! <run>] <what>`, where it fails and again at the end.
//!
//! The runs:
//!
//! | run | QEMU | kernel |
//! |---|---|---|
//! | `x86_64` | `qemu-system-x86_64 -smp 4`, MTTCG | `x86_64-unknown-none` |
//! | `x86_64-statics-broken` | as `x86_64` | the same with `--cfg pcpu_counter_broken="static_shared_add"` (the per-CPU statics' add without `gs:`, to the shared template): must print `FAIL statics` |
//! | `x86_64-grow-broken`, `riscv64-grow-broken` | as `x86_64`, `riscv64` | the same with `--cfg pcpu_counter_broken="chunk_slot_not_cleared"` (a reused chunk slot keeps its old count): the growth check (`testbeds/kernel/src/grow.rs`: the zone grown past 100,000 live counters into chunks of a kernel-owned arena, which the `x86_64` and `riscv64` kernels run too) must print `FAIL grow bad counters` |
//! | `aarch64-llsc` | `qemu-system-aarch64 -M virt -cpu cortex-a57 -smp 4` | `aarch64-unknown-none-softfloat` (ldxr/stxr) |
//! | `aarch64-lse` | `qemu-system-aarch64 -M virt -cpu max -smp 4` | the same target with `+lse` (ldadd) |
//! | `i386-cx8` | `qemu-system-i386 -smp 4` (default CPU: CX8, local APIC) | `arch/i386/i586-unknown-none.json` |
//! | `i386-486` | `qemu-system-i386 -cpu 486` (no CX8, no APIC: one CPU) | the same kernel: CX8 is detected at run time |
//! | `riscv64` | `qemu-system-riscv64 -M virt -smp 4 -bios default` (OpenSBI, S-mode) | `riscv64imac-unknown-none-elf` (amoadd.d on tp), linked with `--no-relax` |
//! | `riscv64-gp` | as `riscv64` | the same with feature `riscv-gp` (amoadd.d on gp) |
//! | `riscv64-platform-base` | as `riscv64` | the same with feature `platform-base`: the add's base from the kernel's `Platform::cpu_base`, which counts its calls (`testbeds/kernel/src/platform_base.rs`: one per add, exactly), `tp` never written; its add must call the hook and read no register |
//! | `riscv64-broken` | as `riscv64` | the same with `--cfg pcpu_counter_broken="riscv_plain_add"` in its rustflags (ld, add, sd): must print `FAIL timer` |
//! | `x86_64-percpu` | as `x86_64` | the same with feature `percpu-crate`: the `percpu` crate (ArceOS) owns GS base, the zone lives in its areas (`testbeds/kernel/src/percpu_crate.rs`) |
//! | `aarch64-percpu` | as `aarch64-llsc` | the same with `percpu-crate` (percpu owns `TPIDR_EL1`) |
//! | `riscv64-percpu` | as `riscv64` | the same with `percpu-crate` and `riscv-gp` (percpu owns `gp`; `--no-relax`, no `__global_pointer$`) |
//! | `x86_64-percpu-broken-stride` | as `x86_64` | `percpu-broken-stride`: the zone's stride is `percpu_area_size()`, unrounded: CPU 1's bring-up check must stop it |
//! | `aarch64-percpu-broken-reinit` | as `aarch64-llsc` | `percpu-broken-reinit`: a second `percpu::init_in_place()` after counting started: must print `FAIL percpu counter added to on every CPU` |
//! | `x86_64-percpu-early-check` | as `x86_64` | `percpu-early-check`: the boot CPU's bring-up check runs before the console (its result dropped) and before percpu sets GS base; the kernel reports the failure the crate kept once it prints: must print `FAIL bring-up check of CPU 0 (kept from before the console): CPU 0's per-CPU register (GS base) holds 0: it was never set on this CPU` |
//!
//! `percpu` runs the six `*-percpu*` runs.
//!
//! Before they boot, the riscv64 kernels' add is disassembled and pinned
//! ([`check_riscv64_add`]): `ld; mv tp (gp); add; amoadd.d zero; ret`, which the broken build
//! must fail.
//! | `c-x86_64` | as `x86_64` | `testbeds/ckernel/` + its `boot/x86_64/ckernel.c`, gcc, linked with `libpcpu_counter.a` for `x86_64-unknown-none` |
//! | `c-aarch64` | as `aarch64-llsc` | `testbeds/ckernel/` + its `boot/aarch64/ckernel.c`, `aarch64-linux-gnu-gcc`, the library for `aarch64-unknown-none-softfloat` |
//! | `c-i386`, `c-i386-486` | as `i386-cx8`, `i386-486` | `testbeds/ckernel/` + its `boot/i386/ckernel.c`, `i686-linux-gnu-gcc -march=i486`, the library for `i586-unknown-none`; one binary: the header's inline `cmpxchg8b %fs:` loop with CX8, the library's protected add on the 486 |
//! | `c-riscv64` | as `riscv64` | `testbeds/ckernel/` + its `boot/riscv64/ckernel.c` (`tp` = the hart's per-CPU block from reset, hart id in word 0), `riscv64-linux-gnu-gcc -march=rv64imac -mabi=lp64`, the library for `riscv64imac-unknown-none-elf` |
//! | `c-x86_64-broken`, `c-aarch64-broken`, `c-i386-broken`, `c-i386-486-broken`, `c-riscv64-broken` | as above | the same with `-include tests/c/broken_add.h` (load, add, store): must print `FAIL timer` |
//!
//! | `x86_64-bringup-ncpus`, `x86_64-bringup-swap`, `aarch64-bringup-swap`, `i386-bringup-swap`, `riscv64-bringup-swap`, `riscv64-bringup-register` | as above | the kernel crate rebuilt with `PCPU_TESTBED_BROKEN_BRINGUP` = `ncpus` (the zone made for one CPU), `swap` (CPUs 0 and 1 take each other's blocks) or `register` (the `riscv-gp` build with its block pointer in `tp`): each must stop at the bring-up check with its message ([`BRINGUPS`]) |
//! | `c-x86_64-bringup-swap`, `c-aarch64-bringup-swap`, `c-i386-bringup-swap`, `c-riscv64-bringup-ncpus` | as above | the C kernel with `-DPCPU_TESTBED_BROKEN_BRINGUP_SWAP` or `_NCPUS`: `pcpu_cpu_check` must stop it |
//! | `c-x86_64-grow-broken`, `c-riscv64-grow-broken` | as above | the C kernel with `-DPCPU_TESTBED_BROKEN_GROW` (its chunk allocator, `pcpu_zone_grow`'s hooks, ignores `align`): the library refuses the misaligned chunks and the growth check must print `FAIL grow chunks the library gave back misaligned` |
//!
//! Every run uses one instruction per translation block (`-singlestep` on QEMU 7.x,
//! `one-insn-per-tb=on` from 8.1): TCG only takes interrupts between blocks, so without it a
//! timer interrupt could never land between the load and the store of a broken (non-atomic)
//! add, and the timer check could not catch one. The cost is about 1 s per boot.
//!
//! Cortex-M firmware runs (`thumbv6m`, `thumbv7em`, `thumbv8m-dual`, each with its `-broken`
//! run; `cortex-m` for the three): see [`cortexm`] (`xtask/src/qemu/cortexm.rs`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::ckernel::{self, CBuild};
use crate::toolchain::{self, Std};

// --- Cortex-M firmware (testbeds/firmware/, boot code in its boot/): its builds and boots live there. ---
mod cortexm;

/// A kernel is killed as hung, and its run fails, once QEMU has used this much host CPU time:
/// a measure of the guest's progress whatever the host's load (a kernel spinning in a hang
/// burns it; a loaded host only makes it take longer). A boot uses a few seconds.
const BOOT_CPU_LIMIT: Duration = Duration::from_secs(120);

/// ... or once the kernel printed no line for this long of wall time (a hang that halts burns
/// no CPU). Each check prints a line; on a loaded host one check can take minutes.
const BOOT_SILENCE_LIMIT: Duration = Duration::from_secs(600);

/// Bare-metal link flags shared by every kernel (GNU ld, no libc, 4 KiB segment alignment).
const LINK_FLAGS: &str =
    "-C linker-flavor=ld -C link-arg=-nostdlib -C link-arg=-zmax-page-size=0x1000";

/// The rustflags of a build broken on purpose: the crate's test-only cfg
/// `pcpu_counter_broken` with `value` (`riscv_plain_add`, `portable_unprotected_add`; the
/// crate declares them in its `check-cfg`), appended to the build's other rustflags. Such a
/// build gets its own target folder: target rustflags reach `core` too (`-Zbuild-std`), and
/// sharing a folder with the normal build would rebuild both every time.
fn broken_cfg(value: &str) -> String {
    format!("--cfg pcpu_counter_broken=\"{value}\"")
}

/// One kernel build.
struct Build {
    /// The run's name, and its folder under `target/qemu/` unless `dir` names one.
    name: &'static str,
    /// A triple, or the i386 JSON spec.
    target: String,
    /// Target rustflags beyond [`LINK_FLAGS`].
    rustflags: &'static str,
    /// The linker and its apt package, where `toolchain` does not set one for the target.
    linker: Option<(&'static str, &'static str)>,
    /// Cargo features of the kernel crate (`riscv-gp`), comma-separated.
    features: &'static str,
    /// For a kernel broken on purpose: the value of the crate's `pcpu_counter_broken` cfg,
    /// added to its rustflags ([`broken_cfg`]).
    broken: Option<&'static str>,
    /// Folder under `target/qemu/` (builds that differ only in features share one, and so
    /// the `core` they build).
    dir: &'static str,
    /// For a kernel whose bring-up is broken on purpose: `PCPU_TESTBED_BROKEN_BRINGUP`
    /// (`ncpus`, `swap`, `register`; see `testbeds/kernel/src/main.rs`), read by the kernel
    /// crate alone, so the build shares its folder and its `core` with the normal one.
    bringup: Option<&'static str>,
}

/// One boot of a built kernel.
struct Boot {
    name: &'static str,
    /// The QEMU binary and the apt package that has it.
    qemu: &'static str,
    package: &'static str,
    args: &'static [&'static str],
    /// The exit status that means every check passed.
    pass_status: i32,
    /// CPUs the kernel must report started (`PASS cpus on N CPUs`).
    cpus: usize,
    /// Text a serial line must contain: proof that the intended path ran (the primitive the
    /// kernel was built with, or the CPU feature it detected).
    expect: &'static str,
    /// For a kernel built broken on purpose: the start of the `FAIL` line its run must print
    /// (and it must not exit with the pass status); a `*` in it stands for any text.
    must_fail: Option<&'static str>,
}

fn x86_64_build(broken: bool) -> Build {
    Build {
        name: if broken {
            "x86_64-statics-broken"
        } else {
            "x86_64"
        },
        target: "x86_64-unknown-none".into(),
        rustflags: "-C relocation-model=static",
        linker: None,
        features: "",
        broken: broken.then_some("static_shared_add"),
        dir: "",
        bringup: None,
    }
}

fn aarch64_build(lse: bool) -> Build {
    Build {
        name: if lse { "aarch64-lse" } else { "aarch64-llsc" },
        // No FP/SIMD, as in most kernels: the IRQ entry saves only general registers. The
        // target has `+strict-align`, which the MMU-off (Device memory) kernel needs.
        target: "aarch64-unknown-none-softfloat".into(),
        rustflags: if lse { "-C target-feature=+lse" } else { "" },
        linker: Some(("aarch64-linux-gnu-ld", "binutils-aarch64-linux-gnu")),
        features: "",
        broken: None,
        dir: "",
        bringup: None,
    }
}

fn i386_build() -> Build {
    Build {
        name: "i386",
        target: toolchain::i386_bare_metal_spec().display().to_string(),
        rustflags: "",
        linker: None,
        features: "",
        broken: None,
        dir: "",
        bringup: None,
    }
}

/// The kernels where the `percpu` crate owns the per-CPU register (feature `percpu-crate`):
/// each shares its folder, so its `core`, with the arch's plain build.
#[derive(Clone, Copy, PartialEq)]
enum Percpu {
    X86_64,
    Aarch64,
    Riscv64,
    /// x86_64 with `percpu-broken-stride`.
    BrokenStride,
    /// aarch64 with `percpu-broken-reinit`.
    BrokenReinit,
    /// x86_64 with `percpu-early-check`.
    EarlyCheck,
}

/// The `percpu` runs, in the order `percpu` runs them.
const PERCPU_RUNS: [Percpu; 6] = [
    Percpu::X86_64,
    Percpu::Riscv64,
    Percpu::Aarch64,
    Percpu::BrokenStride,
    Percpu::BrokenReinit,
    Percpu::EarlyCheck,
];

/// The `percpu` run named `name`, if any.
fn percpu_run(name: &str) -> Option<Percpu> {
    PERCPU_RUNS
        .into_iter()
        .find(|&kind| percpu_boot(kind).name == name)
}

fn percpu_build(kind: Percpu) -> Build {
    let (base, features) = match kind {
        Percpu::X86_64 => (x86_64_build(false), "percpu-crate"),
        Percpu::BrokenStride => (x86_64_build(false), "percpu-broken-stride"),
        Percpu::Aarch64 => (aarch64_build(false), "percpu-crate"),
        Percpu::BrokenReinit => (aarch64_build(false), "percpu-broken-reinit"),
        Percpu::EarlyCheck => (x86_64_build(false), "percpu-early-check"),
        Percpu::Riscv64 => (riscv64_build(Rv::Gp), "riscv-gp,percpu-crate"),
    };
    Build {
        name: percpu_boot(kind).name,
        features,
        dir: if base.dir.is_empty() {
            base.name
        } else {
            base.dir
        },
        ..base
    }
}

/// The `percpu` kernels boot on the arch's plain machine and must print percpu's line; the
/// broken stride must fail the setup's layout check, the second init the `percpu` check's
/// counter (CPU 0's count copied over the others').
fn percpu_boot(kind: Percpu) -> Boot {
    let (name, base, must_fail) = match kind {
        Percpu::X86_64 => ("x86_64-percpu", x86_64_boot(false), None),
        Percpu::Aarch64 => ("aarch64-percpu", aarch64_boot(false), None),
        Percpu::Riscv64 => ("riscv64-percpu", riscv64_boot(Rv::Gp), None),
        Percpu::BrokenStride => (
            "x86_64-percpu-broken-stride",
            x86_64_boot(false),
            Some("FAIL bring-up: CPU *'s per-CPU register (GS base) holds *, no CPU's block of the zone"),
        ),
        Percpu::BrokenReinit => (
            "aarch64-percpu-broken-reinit",
            aarch64_boot(false),
            Some("FAIL percpu counter added to on every CPU"),
        ),
        // The failure comes from the crate's keeping: the check's result was dropped.
        Percpu::EarlyCheck => (
            "x86_64-percpu-early-check",
            x86_64_boot(false),
            Some(
                "FAIL bring-up check of CPU 0 (kept from before the console): CPU 0's per-CPU \
                 register (GS base) holds 0: it was never set on this CPU",
            ),
        ),
    };
    Boot {
        name,
        expect: "percpu owns the register",
        must_fail,
        ..base
    }
}

/// The riscv64 kernel: the real add on `tp`, on `gp` (`riscv-gp`), or broken on purpose.
#[derive(Clone, Copy, PartialEq)]
enum Rv {
    Tp,
    Gp,
    Broken,
    /// Feature `platform-base`: the base from `Platform::cpu_base`, `tp` never written.
    PlatformBase,
}

fn riscv64_build(kind: Rv) -> Build {
    Build {
        name: match kind {
            Rv::Tp => "riscv64",
            Rv::Gp => "riscv64-gp",
            Rv::Broken => "riscv64-broken",
            Rv::PlatformBase => "riscv64-platform-base",
        },
        // No floating point, as in most kernels: the trap entry saves only integer registers.
        // The A extension has amoadd.d. `--no-relax` for every build (gp must stay the
        // kernel's with `riscv-gp`; the same flags let the tp and gp builds share one `core`).
        target: "riscv64imac-unknown-none-elf".into(),
        rustflags: "-C link-arg=--no-relax",
        linker: Some(("riscv64-linux-gnu-ld", "binutils-riscv64-linux-gnu")),
        features: match kind {
            Rv::Gp => "riscv-gp",
            Rv::PlatformBase => "platform-base",
            Rv::Tp | Rv::Broken => "",
        },
        broken: (kind == Rv::Broken).then_some("riscv_plain_add"),
        // Its own folder for the broken build: its rustflags differ, and they reach `core`.
        dir: if kind == Rv::Broken {
            "riscv64-broken"
        } else {
            "riscv64"
        },
        bringup: None,
    }
}

/// The runs whose bring-up is broken on purpose: each must stop at the bring-up check with
/// its message (`FAIL bring-up: ...`). Every arch swaps CPU 0's and CPU 1's blocks (which
/// proves that the arch reads the register it adds through: the GS base MSR, `TPIDR_EL1`,
/// the `%fs` descriptor in the GDT, `tp`/`gp`); x86_64 also makes its zone for one CPU; the
/// riscv64 `gp` build also keeps its block pointer in `tp`.
const BRINGUPS: &[(&str, &str, &str)] = &[
    // (run, PCPU_TESTBED_BROKEN_BRINGUP, the start of its FAIL line)
    (
        "x86_64-bringup-ncpus",
        "ncpus",
        "FAIL bring-up: CPU * is brought up, but the zone was made for 1 CPUs: ncpus must count every possible CPU",
    ),
    (
        "x86_64-bringup-swap",
        "swap",
        "FAIL bring-up: CPU 0's per-CPU register (GS base) holds CPU 1's block",
    ),
    (
        "aarch64-bringup-swap",
        "swap",
        "FAIL bring-up: CPU 0's per-CPU register (TPIDR_EL1) holds CPU 1's block",
    ),
    (
        "i386-bringup-swap",
        "swap",
        "FAIL bring-up: CPU 0's per-CPU register (%fs segment base) holds CPU 1's block",
    ),
    (
        "riscv64-bringup-swap",
        "swap",
        "FAIL bring-up: CPU 0's per-CPU register (tp) holds CPU 1's block",
    ),
    (
        "riscv64-bringup-register",
        "register",
        "FAIL bring-up: CPU 0's block is in tp, but this build adds through gp: build without feature riscv-gp",
    ),
];

/// The build and boot of a broken bring-up run of [`BRINGUPS`] on `build`'s and `boot`'s
/// kernel and machine.
fn bringup_run(run: &'static str, build: Build, boot: Boot) -> (Kernel, Vec<Boot>) {
    let &(_, value, fail_line) = BRINGUPS
        .iter()
        .find(|(name, ..)| *name == run)
        .expect("a run of BRINGUPS");
    let dir = if build.dir.is_empty() {
        build.name
    } else {
        build.dir
    };
    let build = Build {
        name: run,
        dir,
        bringup: Some(value),
        ..build
    };
    let boot = Boot {
        name: run,
        must_fail: Some(fail_line),
        ..boot
    };
    (Kernel::Rust(build), vec![boot])
}

/// A kernel (`build`, `boot`) with `pcpu_counter_broken="chunk_slot_not_cleared"`, in its
/// own folder (its rustflags reach `core`): the growth check must catch the reused chunk
/// slots that keep their old counts.
fn grow_broken_run(name: &'static str, build: Build, boot: Boot) -> (Kernel, Vec<Boot>) {
    let build = Build {
        name,
        dir: name,
        broken: Some("chunk_slot_not_cleared"),
        ..build
    };
    let boot = Boot {
        name,
        must_fail: Some("FAIL grow bad counters"),
        ..boot
    };
    (Kernel::Rust(build), vec![boot])
}

/// `isa-debug-exit` turns the kernel's 0x10 (pass) into `(0x10 << 1) | 1`.
const X86_PASS: i32 = 33;
const X86_ARGS: &[&str] = &[
    "-display",
    "none",
    "-no-reboot",
    "-device",
    "isa-debug-exit,iobase=0xf4,iosize=0x04",
    "-serial",
    "stdio",
];

fn x86_64_boot(broken: bool) -> Boot {
    Boot {
        name: if broken {
            "x86_64-statics-broken"
        } else {
            "x86_64"
        },
        qemu: "qemu-system-x86_64",
        package: "qemu-system-x86",
        args: &["-smp", "4"],
        pass_status: X86_PASS,
        cpus: 4,
        expect: "x86_64 (gs-relative add)",
        must_fail: broken.then_some("FAIL statics"),
    }
}

fn aarch64_boot(lse: bool) -> Boot {
    Boot {
        name: if lse { "aarch64-lse" } else { "aarch64-llsc" },
        qemu: "qemu-system-aarch64",
        package: "qemu-system-arm",
        args: if lse {
            &["-M", "virt", "-cpu", "max", "-smp", "4"]
        } else {
            &["-M", "virt", "-cpu", "cortex-a57", "-smp", "4"]
        },
        pass_status: 0,
        cpus: 4,
        expect: if lse {
            "aarch64 (LSE ldadd)"
        } else {
            "aarch64 (ldxr/stxr loop)"
        },
        must_fail: None,
    }
}

fn i386_boot(cx8: bool) -> Boot {
    Boot {
        name: if cx8 { "i386-cx8" } else { "i386-486" },
        qemu: "qemu-system-i386",
        package: "qemu-system-x86",
        // With CX8 the kernel brings up every CPU through the local APIC; a 486 has no APIC
        // (and, as FreeBSD assumes of i386 without CX8, the kernel is a uniprocessor there).
        args: if cx8 {
            &["-smp", "4"]
        } else {
            &["-cpu", "486", "-smp", "1"]
        },
        pass_status: X86_PASS,
        cpus: if cx8 { 4 } else { 1 },
        expect: if cx8 {
            "i386: CPU has CX8"
        } else {
            "i386: CPU has no CX8"
        },
        must_fail: None,
    }
}

/// The riscv64 kernel on 4 harts; its broken build (`pcpu_counter_broken="riscv_plain_add"`:
/// the add as `ld; add; sd`) must fail the timer check.
fn riscv64_boot(kind: Rv) -> Boot {
    Boot {
        name: riscv64_build(kind).name,
        qemu: "qemu-system-riscv64",
        package: "qemu-system-misc",
        args: &["-M", "virt", "-smp", "4"],
        pass_status: 0,
        cpus: 4,
        expect: match kind {
            Rv::Tp => "riscv64 (amoadd.d on tp + offset)",
            Rv::Gp => "riscv64 (amoadd.d on gp + offset)",
            Rv::Broken => "riscv64 (BROKEN plain ld/add/sd, test only)",
            Rv::PlatformBase => "riscv64 (amoadd.d on the platform's per-CPU base)",
        },
        must_fail: (kind == Rv::Broken).then_some("FAIL timer"),
    }
}

/// The C-only kernels' runs: the same machines as the Rust kernels'; the broken builds
/// (`tests/c/broken_add.h`) must fail the timer check.
fn c_x86_64_boot(broken: bool) -> Boot {
    Boot {
        name: if broken {
            "c-x86_64-broken"
        } else {
            "c-x86_64"
        },
        must_fail: broken.then_some("FAIL timer"),
        expect: if broken {
            "with tests/c/broken_add.h"
        } else {
            "x86_64 (inline addq to %gs: from pcpu_counter.h)"
        },
        ..x86_64_boot(false)
    }
}

fn c_aarch64_boot(broken: bool) -> Boot {
    Boot {
        name: if broken {
            "c-aarch64-broken"
        } else {
            "c-aarch64"
        },
        must_fail: broken.then_some("FAIL timer"),
        expect: if broken {
            "with tests/c/broken_add.h"
        } else {
            "aarch64 (inline ldxr/stxr on TPIDR_EL1 + c from pcpu_counter.h)"
        },
        ..aarch64_boot(false)
    }
}

/// The C-only i386 kernel: one binary (CX8 is asked at run time), booted on a CX8 CPU with 4
/// CPUs (the header's inline cmpxchg8b loop) and on a 486 uniprocessor (the library's
/// protected add), as the Rust i386 kernel is; its broken build must fail on both.
fn c_i386_boot(cx8: bool, broken: bool) -> Boot {
    Boot {
        name: match (cx8, broken) {
            (true, false) => "c-i386",
            (false, false) => "c-i386-486",
            (true, true) => "c-i386-broken",
            (false, true) => "c-i386-486-broken",
        },
        must_fail: broken.then_some("FAIL timer"),
        expect: match (cx8, broken) {
            (_, true) => "with tests/c/broken_add.h",
            (true, false) => "i386: pcpu_cx8 = 2, CPUID says CX8",
            (false, false) => "i386: pcpu_cx8 = 1, CPUID says no CX8",
        },
        ..i386_boot(cx8)
    }
}

/// The C-only riscv64 kernel (tp set from reset, the hart id in its per-CPU block) on the
/// Rust riscv64 kernel's machine.
fn c_riscv64_boot(broken: bool) -> Boot {
    Boot {
        name: if broken {
            "c-riscv64-broken"
        } else {
            "c-riscv64"
        },
        must_fail: broken.then_some("FAIL timer"),
        expect: if broken {
            "with tests/c/broken_add.h"
        } else {
            "riscv64 (inline amoadd.d on tp + c from pcpu_counter.h; tp = this hart's per-CPU block from reset, hart id in word 0)"
        },
        ..riscv64_boot(Rv::Tp)
    }
}

/// A kernel to build: the Rust one (`testbeds/kernel/`) for a target, or a C-only one.
enum Kernel {
    Rust(Build),
    C(CBuild),
    // Cortex-M firmware image.
    Firmware(cortexm::FirmwareBuild),
}

impl Kernel {
    fn name(&self) -> &'static str {
        match self {
            Kernel::Rust(b) => b.name,
            Kernel::C(b) => b.name,
            Kernel::Firmware(b) => b.name,
        }
    }

    fn build(&self) -> Result<PathBuf, String> {
        match self {
            Kernel::Rust(b) => build_kernel(b),
            Kernel::C(b) => b.build(),
            Kernel::Firmware(b) => b.build(),
        }
    }
}

/// The extra QEMU arguments of each machine kind.
fn machine_args(boot: &Boot) -> &'static [&'static str] {
    match boot.qemu {
        "qemu-system-aarch64" => &["-nographic", "-semihosting"],
        // Cortex-M firmware: semihosting console on stdout.
        "qemu-system-arm" => cortexm::MACHINE_ARGS,
        // OpenSBI from qemu-system-data; the kernel exits through the sifive_test device.
        "qemu-system-riscv64" => &["-nographic", "-bios", "default"],
        _ => X86_ARGS,
    }
}

/// The kernels `all` runs, each a name `cargo xtask qemu` takes (with its broken builds).
const KERNELS: [&str; 9] = [
    "x86_64",
    "aarch64",
    "i386",
    "riscv64",
    "percpu",
    "c-x86_64",
    "c-aarch64",
    "c-i386",
    "c-riscv64",
];

/// The runs of one name alone, beyond `KERNELS`, the `percpu` runs and the Cortex-M kinds.
const SINGLE_RUNS: [&str; 2] = ["riscv64-broken", "riscv64-platform-base"];

/// What `cargo xtask qemu` takes: every name, `|`-separated (the usage of `main.rs` too).
pub fn usage() -> String {
    let mut names: Vec<&str> = KERNELS.to_vec();
    names.extend(SINGLE_RUNS);
    names.extend(PERCPU_RUNS.map(|kind| percpu_boot(kind).name));
    names.push("c");
    names.extend(cortexm::KINDS);
    names.extend(["cortex-m", "all"]);
    format!("qemu [{}]", names.join("|"))
}

/// The builds and boots a name of `usage()` runs; `None` for a name it does not list.
fn plan(which: &str) -> Option<Vec<(Kernel, Vec<Boot>)>> {
    // Cortex-M firmware kinds: the images and their broken builds.
    let firmware = |kind: &str| -> Vec<(Kernel, Vec<Boot>)> {
        cortexm::plan(kind)
            .into_iter()
            .map(|(build, boots)| (Kernel::Firmware(build), boots))
            .collect()
    };
    Some(match which {
        "all" => KERNELS
            .into_iter()
            .flat_map(plan_for)
            .chain(cortexm::KINDS.into_iter().flat_map(firmware))
            .collect(),
        "cortex-m" => cortexm::KINDS.into_iter().flat_map(firmware).collect(),
        one if cortexm::KINDS.contains(&one) => firmware(one),
        "c" => KERNELS
            .into_iter()
            .filter(|k| k.starts_with("c-"))
            .flat_map(plan_for)
            .collect(),
        one if KERNELS.contains(&one)
            || SINGLE_RUNS.contains(&one)
            || percpu_run(one).is_some() =>
        {
            plan_for(one)
        }
        _ => return None,
    })
}

pub fn run(args: &[String]) -> Result<(), String> {
    let which = match args {
        [] => "all",
        [one] => one.as_str(),
        _ => return Err(format!("usage: cargo xtask {}", usage())),
    };
    let plan = plan(which).ok_or_else(|| {
        format!(
            "unknown kernel `{which}`: use cargo xtask {} (c: every C kernel, cortex-m: the \
             firmware images)",
            usage()
        )
    })?;
    // Every tool first, so that a missing one is reported before minutes of building.
    for (kernel, boots) in &plan {
        match kernel {
            Kernel::Rust(build) => {
                toolchain::cargo_for(&build.target)?;
                if build.target.starts_with("x86_64") {
                    // testbeds/kernel/build.rs compiles tests/c/kernel_check.c into the x86_64 kernel.
                    toolchain::require_tool("gcc", "gcc")?;
                }
            }
            Kernel::C(build) => build.require_tools()?,
            Kernel::Firmware(build) => build.require_tools()?,
        }
        for boot in boots {
            toolchain::require_tool(boot.qemu, boot.package)?;
        }
    }
    let mut failed = Vec::new();
    let mut passed = Vec::new();
    // One line per failed run, `FAIL [qemu <run>] <what>`, printed where it happens and again
    // at the end, so that one line of a log says what broke.
    let mut fail = |run: &str, why: &str| {
        let first = why.lines().next().unwrap_or("failed");
        let line = format!("FAIL [qemu {run}] {first}");
        if why.contains('\n') {
            eprintln!("[{run}] {why}");
        }
        println!("{line}");
        failed.push(line);
    };
    for (build, boots) in &plan {
        // A kernel that does not build fails its runs; the other kernels still run.
        let kernel = match build.build() {
            Ok(kernel) => kernel,
            Err(why) => {
                for boot in boots {
                    fail(boot.name, &format!("build of {}: {why}", build.name()));
                }
                continue;
            }
        };
        if let Kernel::Rust(rust) = build {
            if rust.target.starts_with("riscv64") {
                if let Err(why) = check_riscv64_add(rust, &kernel) {
                    for boot in boots {
                        fail(boot.name, &format!("kernel add: {why}"));
                    }
                    continue;
                }
            }
        }
        for boot in boots {
            match boot_kernel(boot, &kernel) {
                Ok(seconds) => passed.push(format!("{} ({seconds:.1} s)", boot.name)),
                Err(why) => fail(boot.name, &why),
            }
        }
    }
    println!(
        "qemu: passed {}",
        if passed.is_empty() {
            "nothing".to_string()
        } else {
            passed.join(", ")
        }
    );
    for line in &failed {
        println!("{line}");
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("{} run(s) failed", failed.len()))
    }
}

fn plan_for(kernel: &str) -> Vec<(Kernel, Vec<Boot>)> {
    use Kernel::{Rust, C};
    match kernel {
        "x86_64" => vec![
            (Rust(x86_64_build(false)), vec![x86_64_boot(false)]),
            (Rust(x86_64_build(true)), vec![x86_64_boot(true)]),
            grow_broken_run(
                "x86_64-grow-broken",
                x86_64_build(false),
                x86_64_boot(false),
            ),
            bringup_run(
                "x86_64-bringup-ncpus",
                x86_64_build(false),
                x86_64_boot(false),
            ),
            bringup_run(
                "x86_64-bringup-swap",
                x86_64_build(false),
                x86_64_boot(false),
            ),
        ],
        "aarch64" => vec![
            (Rust(aarch64_build(false)), vec![aarch64_boot(false)]),
            (Rust(aarch64_build(true)), vec![aarch64_boot(true)]),
            bringup_run(
                "aarch64-bringup-swap",
                aarch64_build(false),
                aarch64_boot(false),
            ),
        ],
        "i386" => vec![
            (Rust(i386_build()), vec![i386_boot(true), i386_boot(false)]),
            bringup_run("i386-bringup-swap", i386_build(), i386_boot(true)),
        ],
        "riscv64" => [Rv::Tp, Rv::Gp, Rv::Broken, Rv::PlatformBase]
            .map(|kind| (Rust(riscv64_build(kind)), vec![riscv64_boot(kind)]))
            .into_iter()
            .chain([
                bringup_run(
                    "riscv64-bringup-swap",
                    riscv64_build(Rv::Tp),
                    riscv64_boot(Rv::Tp),
                ),
                bringup_run(
                    "riscv64-bringup-register",
                    riscv64_build(Rv::Gp),
                    riscv64_boot(Rv::Gp),
                ),
                grow_broken_run(
                    "riscv64-grow-broken",
                    riscv64_build(Rv::Tp),
                    riscv64_boot(Rv::Tp),
                ),
            ])
            .collect(),
        "percpu" => PERCPU_RUNS
            .map(|kind| (Rust(percpu_build(kind)), vec![percpu_boot(kind)]))
            .into(),
        one if percpu_run(one).is_some() => percpu_run(one)
            .map(|kind| (Rust(percpu_build(kind)), vec![percpu_boot(kind)]))
            .into_iter()
            .collect(),
        "riscv64-broken" => vec![(
            Rust(riscv64_build(Rv::Broken)),
            vec![riscv64_boot(Rv::Broken)],
        )],
        "riscv64-platform-base" => vec![(
            Rust(riscv64_build(Rv::PlatformBase)),
            vec![riscv64_boot(Rv::PlatformBase)],
        )],
        "c-x86_64" => [false, true]
            .map(|broken| (C(ckernel::x86_64(broken)), vec![c_x86_64_boot(broken)]))
            .into_iter()
            .chain([c_bringup_run(
                "c-x86_64-bringup-swap",
                ckernel::x86_64(false),
                c_x86_64_boot(false),
            )])
            .chain([c_grow_broken_run(
                "c-x86_64-grow-broken",
                ckernel::x86_64(false),
                c_x86_64_boot(false),
            )])
            .collect(),
        "c-i386" => [false, true]
            .map(|broken| {
                let boots = vec![c_i386_boot(true, broken), c_i386_boot(false, broken)];
                (C(ckernel::i386(broken)), boots)
            })
            .into_iter()
            .chain([c_bringup_run(
                "c-i386-bringup-swap",
                ckernel::i386(false),
                c_i386_boot(true, false),
            )])
            .collect(),
        "c-riscv64" => [false, true]
            .map(|broken| (C(ckernel::riscv64(broken)), vec![c_riscv64_boot(broken)]))
            .into_iter()
            .chain([c_bringup_run(
                "c-riscv64-bringup-ncpus",
                ckernel::riscv64(false),
                c_riscv64_boot(false),
            )])
            .chain([c_grow_broken_run(
                "c-riscv64-grow-broken",
                ckernel::riscv64(false),
                c_riscv64_boot(false),
            )])
            .collect(),
        _ => [false, true]
            .map(|broken| (C(ckernel::aarch64(broken)), vec![c_aarch64_boot(broken)]))
            .into_iter()
            .chain([c_bringup_run(
                "c-aarch64-bringup-swap",
                ckernel::aarch64(false),
                c_aarch64_boot(false),
            )])
            .collect(),
    }
}

/// A C kernel whose bring-up is broken on purpose (`-DPCPU_TESTBED_BROKEN_BRINGUP_<X>` for
/// the run `c-<arch>-bringup-<x>`): `pcpu_cpu_check` must stop it with the code's text.
/// riscv64's register points at the hart's block from reset (no `pcpu_set_cpu_base`, which
/// would refuse a CPU the zone lacks before the check): it shows a zone made for one CPU.
fn c_bringup_run(run: &'static str, build: CBuild, boot: Boot) -> (Kernel, Vec<Boot>) {
    let (value, fail_line) = if run.ends_with("-swap") {
        (
            "swap",
            "FAIL bring-up: CPU 0: the per-CPU register holds another CPU's block (bases swapped?)",
        )
    } else {
        (
            "ncpus",
            "FAIL bring-up: CPU *: CPU index not below the zone's ncpus: count every possible CPU",
        )
    };
    let boot = Boot {
        name: run,
        must_fail: Some(fail_line),
        // The banner: i386 prints its CX8 line only after the bring-up.
        expect: "pcpu-counter C-only test kernel: ",
        ..boot
    };
    (Kernel::C(build.with_bringup(run, value)), vec![boot])
}

/// A C kernel whose chunk allocator ignores `align` (`-DPCPU_TESTBED_BROKEN_GROW`, the run
/// `c-<arch>-grow-broken`): the library refuses its misaligned chunks, giving each back at
/// once, and the growth check must fail, naming them.
fn c_grow_broken_run(run: &'static str, build: CBuild, boot: Boot) -> (Kernel, Vec<Boot>) {
    let boot = Boot {
        name: run,
        must_fail: Some("FAIL grow chunks the library gave back misaligned expected 0 got "),
        ..boot
    };
    (Kernel::C(build.with_broken_grow(run)), vec![boot])
}

/// The riscv64 kernels' add, disassembled from `pcpu_probe_riscv64_kernel_add` (in
/// `testbeds/kernel/boot/riscv64/mod.rs`, kept by its `link.ld`): exactly `ld` the handle's offset, `mv`
/// the per-CPU register (`tp`, or `gp` with `riscv-gp`), `add`, `amoadd.d zero, v, (slot)`,
/// `ret`. The broken build must fail this same check (its add is `ld; add; sd`).
fn check_riscv64_add(build: &Build, kernel: &Path) -> Result<(), String> {
    let objdump =
        toolchain::require_tool("riscv64-linux-gnu-objdump", "binutils-riscv64-linux-gnu")?;
    let symbol = "pcpu_probe_riscv64_kernel_add";
    let out = Command::new(&objdump)
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--disassemble={symbol}"))
        .arg(kernel)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", objdump.display()))?;
    let insns: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(' ') && l.contains(":\t"))
        .filter_map(|l| {
            l.split_once(":\t")
                .map(|(_, i)| i.trim().replace('\t', " "))
        })
        .collect();
    if insns.is_empty() {
        return Err(format!("{symbol} not found in {}", kernel.display()));
    }
    let register = if build.features.contains("riscv-gp") {
        "gp"
    } else {
        "tp"
    };
    let verdict = if build.features.contains("platform-base") {
        riscv64_platform_add_shape(&insns)
    } else {
        riscv64_add_shape(&insns, register)
    };
    let listing = insns.join("; ");
    if build.broken == Some("riscv_plain_add") {
        return match verdict {
            Err(why) => {
                println!(
                    "[{}] kernel add rejected, as it must be ({why}): {listing}",
                    build.name
                );
                Ok(())
            }
            Ok(()) => Err(format!(
                "the broken add passed the disassembly check: {listing}"
            )),
        };
    }
    verdict.map_err(|why| format!("kernel add: {why}: {listing}"))?;
    println!(
        "[{}] kernel add ({} instructions, pinned): {listing}",
        build.name,
        insns.len()
    );
    Ok(())
}

/// With `platform-base`: a call to the kernel's `Platform::cpu_base` (the hook
/// `_pcpu_counter_0_1_cpu_base`, or, inlined by the link-time optimised kernel, the test bed's
/// never-inlined `platform_base::cpu_base` behind it), then `v` added to the slot it gives with
/// one `amoadd.d zero`, and no read of `tp` or `gp`.
fn riscv64_platform_add_shape(insns: &[String]) -> Result<(), String> {
    if let Some(read) = insns
        .iter()
        .find(|i| i.ends_with(",tp") || i.ends_with(",gp"))
    {
        return Err(format!("reads the register: {read}"));
    }
    let calls_hook = |i: &String| {
        let call = ["jal ", "jalr ", "call "].iter().any(|m| i.starts_with(m));
        call && (i.contains("<_pcpu_counter_0_1_cpu_base>") || i.contains("platform_base8cpu_base"))
    };
    let call = insns
        .iter()
        .position(calls_hook)
        .ok_or("no call to Platform::cpu_base")?;
    match insns[call..]
        .iter()
        .filter(|i| i.starts_with("amoadd.d zero,"))
        .count()
    {
        1 => Ok(()),
        n => Err(format!(
            "{n} amoadd.d zero after the call (the add of v), not 1"
        )),
    }
}

/// `ld`, `mv <reg>, <register>`, `add` (in any order), `amoadd.d zero, ...`, `ret`.
fn riscv64_add_shape(insns: &[String], register: &str) -> Result<(), String> {
    let mnemonic = |i: &String| i.split_whitespace().next().unwrap_or("").to_string();
    if insns.len() != 5 {
        return Err(format!("{} instructions, pinned at 5", insns.len()));
    }
    let mut head: Vec<String> = insns[..3].iter().map(mnemonic).collect();
    head.sort();
    if head != ["add", "ld", "mv"] {
        return Err(format!("not ld/mv/add before the AMO: {head:?}"));
    }
    let mv = insns[..3]
        .iter()
        .find(|i| mnemonic(i) == "mv")
        .expect("one mv");
    if !mv.ends_with(&format!(",{register}")) {
        return Err(format!("the base is not read from {register}: {mv}"));
    }
    if mnemonic(&insns[3]) != "amoadd.d" || !insns[3].contains(" zero,") {
        return Err(format!("no amoadd.d zero: {}", insns[3]));
    }
    if mnemonic(&insns[4]) != "ret" {
        return Err(format!("no ret: {}", insns[4]));
    }
    Ok(())
}

/// Builds one kernel and returns the path of its ELF.
fn build_kernel(build: &Build) -> Result<PathBuf, String> {
    let root = toolchain::repo_root();
    let mut toolchain = toolchain::cargo_for(&build.target)?;
    if let Some((linker, package)) = build.linker {
        let path = toolchain::require_tool(linker, package)?;
        let key = toolchain.target_env("LINKER");
        toolchain.set_env(&key, &path.to_string_lossy());
    }
    let target_dir = root.join("target/qemu").join(if build.dir.is_empty() {
        build.name
    } else {
        build.dir
    });
    let mut cmd = toolchain.cargo("build", Std::Core);
    if !build.features.is_empty() {
        cmd.args(["--features", build.features]);
    }
    cmd.arg("--release")
        .arg("--manifest-path")
        .arg(root.join("testbeds/kernel/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .env_remove("PCPU_TESTBED_BROKEN_BRINGUP")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env(
            toolchain.target_env("RUSTFLAGS"),
            format!(
                "{LINK_FLAGS} {} {}",
                build.rustflags,
                build.broken.map(broken_cfg).unwrap_or_default()
            ),
        );
    if let Some(value) = build.bringup {
        cmd.env("PCPU_TESTBED_BROKEN_BRINGUP", value);
    }
    println!(
        "[{}] building kernel for {}{} with {}",
        build.name,
        toolchain.target_name(),
        build
            .broken
            .map(|value| format!(" ({})", broken_cfg(value)))
            .unwrap_or_default(),
        toolchain.description
    );
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo for the {} kernel: {e}", build.name))?;
    if !status.success() {
        return Err(format!(
            "building the {} kernel failed ({status})",
            build.name
        ));
    }
    Ok(target_dir
        .join(toolchain.target_name())
        .join("release/kernel"))
}

/// QEMU 8.1 renamed `-singlestep` to `-accel tcg,one-insn-per-tb=on`.
fn one_insn_per_tb(qemu: &str) -> Vec<String> {
    let version = Command::new(qemu)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let number = version
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or("0.0");
    let mut parts = number.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) >= (8, 1) {
        vec![
            "-accel".into(),
            "tcg,thread=multi,one-insn-per-tb=on".into(),
        ]
    } else {
        vec![
            "-accel".into(),
            "tcg,thread=multi".into(),
            "-singlestep".into(),
        ]
    }
}

/// Boots `kernel` once: prints its serial lines, then judges the run. Returns the seconds it
/// took.
fn boot_kernel(boot: &Boot, kernel: &Path) -> Result<f64, String> {
    let mut cmd = Command::new(boot.qemu);
    cmd.args(one_insn_per_tb(boot.qemu))
        .args(boot.args)
        .args(machine_args(boot))
        .arg("-kernel")
        .arg(kernel)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    println!("[{}] {:?}", boot.name, cmd);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", boot.qemu))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let (lines_tx, lines_rx) = mpsc::channel();
    let name = boot.name;
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let line = line.trim_end_matches('\r').to_string();
            println!("[{name}] {line}");
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let mut last_line = Instant::now();
    let status = loop {
        let before = lines.len();
        lines.extend(lines_rx.try_iter());
        if lines.len() > before {
            last_line = Instant::now();
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Ok(status);
        }
        let cpu = cpu_time(child.id());
        let hung = if cpu > BOOT_CPU_LIMIT {
            Some(format!(
                "hung: killed after {} s of QEMU CPU time",
                BOOT_CPU_LIMIT.as_secs()
            ))
        } else if last_line.elapsed() > BOOT_SILENCE_LIMIT {
            Some(format!(
                "hung: killed after {} s without a serial line",
                BOOT_SILENCE_LIMIT.as_secs()
            ))
        } else {
            None
        };
        if let Some(why) = hung {
            let _ = child.kill();
            let _ = child.wait();
            break Err(why);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds = started.elapsed().as_secs_f64();
    let _ = reader.join();
    lines.extend(lines_rx.try_iter());
    let status = status.map_err(|why| match lines.last() {
        Some(last) => format!("{why} (last line: {last})"),
        None => format!("{why} (no serial line)"),
    })?;
    judge(boot, status.code(), &lines)?;
    Ok(seconds)
}

/// The host CPU time process `pid` has used (all its threads): `utime + stime` of
/// `/proc/<pid>/stat`, in clock ticks of 1/100 s (Linux's `USER_HZ`). Zero where unreadable.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces, and ends with `)`): state is
    // the first, utime and stime the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((tick(11) + tick(12)) * 10)
}

/// A run passes only with the pass status, a `DONE ... 0 failed` line, no `FAIL` line, the
/// expected number of CPUs started and the line that shows the intended path ran.
fn judge(boot: &Boot, code: Option<i32>, lines: &[String]) -> Result<(), String> {
    if let Some(wanted) = boot.must_fail {
        return judge_broken(boot, wanted, code, lines);
    }
    let fails: Vec<&String> = lines.iter().filter(|l| l.contains("FAIL")).collect();
    if let Some(fail) = fails.first() {
        // `FAIL timer adds + ... expected X got Y`: the check's name and what it saw.
        let more = match fails.len() {
            1 => String::new(),
            n => format!(" (and {} more FAIL lines)", n - 1),
        };
        return Err(format!("{}{more}", fail.trim_start_matches("FAIL ")));
    }
    if !lines.iter().any(|l| l.contains(boot.expect)) {
        return Err(format!(
            "no line with `{}`: not the intended path",
            boot.expect
        ));
    }
    let cpus = format!("PASS cpus on {} CPUs", boot.cpus);
    if !lines.iter().any(|l| l.starts_with(&cpus)) {
        return Err(format!("no `{cpus}` line: not every CPU started"));
    }
    if !lines
        .iter()
        .any(|l| l.starts_with("DONE ") && l.ends_with(" 0 failed"))
    {
        return Err("no `DONE ... 0 failed` line".into());
    }
    if code != Some(boot.pass_status) {
        return Err(format!(
            "exit status {code:?}, expected {} (pass)",
            boot.pass_status
        ));
    }
    Ok(())
}

/// A broken kernel's run passes when it ran the broken path, printed the `FAIL` line it must
/// and did not exit with the pass status: the check caught the broken add.
fn judge_broken(
    boot: &Boot,
    wanted: &str,
    code: Option<i32>,
    lines: &[String],
) -> Result<(), String> {
    if !lines.iter().any(|l| l.contains(boot.expect)) {
        return Err(format!(
            "no line with `{}`: not the broken build",
            boot.expect
        ));
    }
    let Some(caught) = lines.iter().find(|l| starts_with_pattern(l, wanted)) else {
        return Err(format!(
            "no `{wanted}` line: the checks did not catch the broken add"
        ));
    };
    if code == Some(boot.pass_status) {
        return Err("exited with the pass status despite a FAIL line".into());
    }
    println!("[{}] caught, as it must be: {caught}", boot.name);
    Ok(())
}

/// Whether `line` starts with `pattern`, where each `*` in the pattern stands for any text.
fn starts_with_pattern(line: &str, pattern: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each name the usage lists runs something, and a name it does not list is refused: the
    /// usage and the runs come from the same lists.
    #[test]
    fn the_usage_lists_exactly_the_names_that_run() {
        let usage = usage();
        let names = usage
            .strip_prefix("qemu [")
            .and_then(|u| u.strip_suffix(']'))
            .unwrap();
        let names: Vec<&str> = names.split('|').collect();
        for name in [
            "percpu",
            "c-riscv64",
            "c",
            "x86_64-percpu",
            "cortex-m",
            "thumbv6m",
        ] {
            assert!(names.contains(&name), "the usage omits `{name}`: {usage}");
        }
        for name in &names {
            assert!(
                plan(name).is_some_and(|p| !p.is_empty()),
                "`{name}` runs nothing"
            );
        }
        assert!(plan("x86_64-percpu-nothing").is_none());
    }
}

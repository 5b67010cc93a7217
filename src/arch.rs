//! The per-arch primitives, one folder per arch under the top-level `arch/`.
//!
//! Every arch provides the same crate-internal set: `add` and `add_protected` (add to the
//! current CPU's slot at a register-relative offset), `needs_protection` (whether
//! `counter_enter` must enter local protection), `load_slot` (read any CPU's slot without
//! tearing), `store_slot` (clear a slot no CPU uses) and, for the host simulation,
//! `host_bind`/`host_unbind` (point this thread's per-CPU register at a block). The public
//! part is [`set_cpu_base`], which a kernel calls once on each CPU, and [`NAME`].
//!
//! | arch | add | per-CPU register |
//! |---|---|---|
//! | x86_64 | one `add qword ptr gs:[off], v` | GS base |
//! | x86 (i386) | `cmpxchg8b fs:[off]` loop with CX8; plain add under protection without | FS segment base (`set_cpu_base(gdt_entry, selector, base)`) |
//! | aarch64 | `ldxr/add/stxr/cbnz` loop, or one `ldadd` with `lse` | `TPIDR_EL1` |
//! | riscv64 | one `amoadd.d zero, v, (base + off)` | `tp` (`gp` with feature `riscv-gp`) |
//! | others | plain add under local protection | none (`Platform::current_cpu`) |

// Plain `#[cfg]`s rather than `cfg_if!`, so that tools that walk the module tree without
// expanding macros (cargo-mutants, docs/mutation.md) find each arch's files.
#[cfg(target_arch = "x86_64")]
#[path = "../arch/x86_64/mod.rs"]
pub(crate) mod imp;
#[cfg(target_arch = "x86")]
#[path = "../arch/i386/mod.rs"]
pub(crate) mod imp;
#[cfg(target_arch = "x86")]
kernel_api! {
    pub use imp::{gdt_data_descriptor, has_cx8, load_fs};
}
#[cfg(target_arch = "aarch64")]
#[path = "../arch/aarch64/mod.rs"]
pub(crate) mod imp;
#[cfg(target_arch = "riscv64")]
#[path = "../arch/riscv64/mod.rs"]
pub(crate) mod imp;
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
#[path = "../arch/portable/mod.rs"]
pub(crate) mod imp;

#[cfg(target_arch = "x86_64")]
pub(crate) use imp::add_crossings16;
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "riscv64"
))]
pub(crate) use imp::fetch_add;

/// Adds `v` to the current CPU's slot at `off` and returns how many multiples of 16 the slot
/// crossed, signed and wrapping: `((old + v) >> 4) - (old >> 4)` modulo 2^60, written as
/// `(v >> 4) + carry out of the low 4 bits` (the [`ApproxCounter`](crate::ApproxCounter)'s
/// add). x86_64 reads it from the plain add's auxiliary carry flag; elsewhere it is computed
/// from [`fetch_add`]'s old value.
///
/// # Safety
/// As [`fetch_add`].
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub(crate) unsafe fn add_crossings16(zone: &crate::zone::Zone<'_>, off: usize, v: i64) -> u64 {
    // SAFETY: per the caller.
    let old = unsafe { fetch_add(zone, off, v) };
    ((v >> 4) as u64).wrapping_add(((old & 15) + (v as u64 & 15)) >> 4)
}
pub(crate) use imp::{add, add_protected, load_slot, needs_protection, store_slot};

/// Adds `v` to the current CPU's slot at `off` and returns the slot's value before the add, as
/// one step on this CPU (the [`ApproxCounter`](crate::ApproxCounter)'s add). x86_64
/// (`xadd gs:[off]`), i386 (the `cmpxchg8b fs:` loop; without CX8, protected), aarch64
/// (`ldadd` or the `ldxr/stxr` loop keeping the old value) and riscv64 (`amoadd.d` with a
/// destination) have their own; elsewhere (the portable fallback) the arch's add runs inside
/// local protection and the slot is read back from the current CPU's block: with neither an
/// interrupt nor a migration between them, the value read less `v` is the value before.
///
/// # Safety
/// As the arch's `add`; the platform's current CPU is the CPU whose per-CPU register is set.
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
#[inline]
pub(crate) unsafe fn fetch_add(zone: &crate::zone::Zone<'_>, off: usize, v: i64) -> u64 {
    let _protection = crate::platform::Protection::acquire();
    let cpu = crate::platform::current_cpu();
    assert!(
        cpu < zone.ncpus(),
        "current CPU {cpu} is out of range (zone has {} CPUs)",
        zone.ncpus()
    );
    // SAFETY: per the caller; protection is held, as `add_protected` asks.
    unsafe { imp::add_protected(zone, off, v) };
    // SAFETY: `cpu` is in range and `off` a live slot, so the address is inside the zone.
    let new = unsafe { load_slot(zone.slot_addr(cpu, off)) };
    new.wrapping_sub(v as u64)
}
#[cfg(feature = "sim")]
pub(crate) use imp::{host_bind, host_unbind};
kernel_api! {
    pub use imp::{set_cpu_base, NAME};
}

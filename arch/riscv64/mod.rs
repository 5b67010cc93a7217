// SPDX-License-Identifier: BSD-2-Clause
//! riscv64: the slot address from the per-CPU base plus the offset, then one
//! `amoadd.d zero, v, (slot)`.
//!
//! In a kernel each hart's per-CPU base is in `tp` ([`set_cpu_base`]), or in `gp` with the
//! `riscv-gp` feature. `tp` is the default because that is where FreeBSD's riscv kernel keeps
//! its `struct pcpu` pointer (and Linux its `current` task), and because the psABI leaves `tp`
//! alone in code that does not use TLS, which a kernel does not. Other kernels differ: xv6
//! keeps the hart id in `tp` (such a kernel moves the id into a per-CPU block, points `tp` at
//! the block and hosts the zone inside it, or enables `riscv-gp`); arceos'
//! `percpu` crate keeps the per-CPU base in `gp`, which is only free when nothing is linked
//! with gp relaxation: link with `--no-relax` (`-C link-arg=--no-relax`), and do not define
//! `__global_pointer$` in the linker script, or the linker rewrites accesses near it into
//! `gp`-relative ones that would then read the per-CPU block.
//!
//! Reading the base and the AMO are two instructions (`mv`/`add`, then `amoadd.d`), so an
//! interrupt or a migration may fall in between. An interrupt handler's own adds are atomic
//! too, and the `amoadd.d` itself cannot be split by one. After a migration the add lands,
//! atomically, in the old hart's slot, which every fetch counts: never lost, never twice. So
//! the add needs no protection (`counter_enter` is free), as on FreeBSD's arm64 and amd64. The
//! AMO has no `.aq`/`.rl` bits: statistics need no ordering.
//!
//! In a hosted program (the host simulation on riscv64 Linux) `tp` is glibc's thread pointer
//! and `gp` the global pointer, neither ours: there the platform supplies the base
//! (`cfg(pcpu_base_from_platform)`), and the same `amoadd.d` runs on it (as on aarch64, where
//! EL0 cannot read `TPIDR_EL1`).
//!
//! The `pcpu_counter_broken = "riscv_plain_add"` cfg (set by xtask only, ignored where the
//! platform supplies the base)
//! replaces the AMO with `ld; add; sd`, so that `cargo xtask qemu riscv64-broken` can show
//! the timer check catching an add that an interrupt splits.

use core::arch::asm;

pub use super::defaults::*;
use crate::Error;

cfg_if::cfg_if! {
    if #[cfg(pcpu_base_from_platform)] {
        /// The arch this build's primitives are for.
        pub const NAME: &str = "riscv64 (amoadd.d on the platform's per-CPU base)";
    } else if #[cfg(pcpu_counter_broken = "riscv_plain_add")] {
        /// The arch this build's primitives are for.
        pub const NAME: &str = "riscv64 (BROKEN plain ld/add/sd, test only)";
    } else if #[cfg(feature = "riscv-gp")] {
        /// The arch this build's primitives are for.
        pub const NAME: &str = "riscv64 (amoadd.d on gp + offset)";
    } else {
        /// The arch this build's primitives are for.
        pub const NAME: &str = "riscv64 (amoadd.d on tp + offset)";
    }
}

/// With feature `capi`: the C symbol that names the register this build adds through,
/// `pcpu_counter_riscv_tp` (or `pcpu_counter_riscv_gp` with `riscv-gp`). The header's inline
/// `counter_u64_add` adds through `tp` (`gp` where `PCPU_COUNTER_RISCV_GP` is defined) and
/// references the matching symbol with a relocation that changes no instruction
/// (`R_RISCV_NONE`), so that C code built for the other register fails to link
/// (`undefined reference to pcpu_counter_riscv_tp`) instead of adding through the wrong one.
#[cfg(all(pcpu_c_abi, not(pcpu_base_from_platform), not(feature = "riscv-gp")))]
#[used]
#[no_mangle]
static pcpu_counter_riscv_tp: u8 = 0;

/// As above, for a library built with `riscv-gp`.
#[cfg(all(pcpu_c_abi, not(pcpu_base_from_platform), feature = "riscv-gp"))]
#[used]
#[no_mangle]
static pcpu_counter_riscv_gp: u8 = 0;

/// The current hart's per-CPU base: `tp`.
#[cfg(all(not(pcpu_base_from_platform), not(feature = "riscv-gp")))]
#[inline(always)]
fn cpu_base() -> usize {
    let base: usize;
    // SAFETY: copies a register; no memory access. The kernel owns `tp`.
    unsafe { asm!("mv {}, tp", out(reg) base, options(nomem, nostack, preserves_flags)) };
    base
}

/// The current hart's per-CPU base: `gp` (feature `riscv-gp`).
#[cfg(all(not(pcpu_base_from_platform), feature = "riscv-gp"))]
#[inline(always)]
fn cpu_base() -> usize {
    let base: usize;
    // SAFETY: copies a register; no memory access. With `riscv-gp` the kernel owns `gp`.
    unsafe { asm!("mv {}, gp", out(reg) base, options(nomem, nostack, preserves_flags)) };
    base
}

/// The current hart's per-CPU base where the platform supplies it (a hosted program, whose
/// `tp` and `gp` belong to the C library and the linker: the host simulation).
#[cfg(pcpu_base_from_platform)]
#[inline(always)]
fn cpu_base() -> usize {
    crate::platform::cpu_base()
}

/// Adds `v` to the current hart's slot at offset `off` from its per-CPU base.
///
/// # Safety
/// This hart's per-CPU base must be its block of the zone that owns `off`, and `off` a live
/// slot.
#[inline(always)]
pub(crate) unsafe fn add(off: usize, v: i64) {
    let slot = cpu_base().wrapping_add(off) as *mut u64;
    // SAFETY: `slot` is a live, aligned slot of the zone (caller's contract).
    unsafe { atomic_add(slot, v as u64) }
}

/// One `amoadd.d` with the result discarded (`rd = zero`), no ordering bits.
///
/// # Safety
/// `slot` is a live, 8-byte aligned slot.
#[cfg(any(pcpu_base_from_platform, not(pcpu_counter_broken = "riscv_plain_add")))]
#[inline(always)]
unsafe fn atomic_add(slot: *mut u64, v: u64) {
    // SAFETY: per the caller; `amoadd.d` is one atomic read-modify-write of the aligned slot.
    unsafe {
        asm!(
            "amoadd.d zero, {v}, ({slot})",
            v = in(reg) v,
            slot = in(reg) slot,
            options(nostack, preserves_flags)
        )
    }
}

/// TEST ONLY (`--cfg pcpu_counter_broken="riscv_plain_add"`, set by xtask): a plain
/// `ld; add; sd` that an interrupt can split, losing the handler's add. Exists so that the QEMU kernel's timer check can be shown
/// to catch it; never enable it in a real build.
///
/// # Safety
/// `slot` is a live, 8-byte aligned slot.
#[cfg(all(not(pcpu_base_from_platform), pcpu_counter_broken = "riscv_plain_add"))]
#[inline(always)]
unsafe fn atomic_add(slot: *mut u64, v: u64) {
    // SAFETY: the slot is live and aligned per the caller; the race with this hart's own
    // interrupt handler is the deliberate bug (a lost count, never an out-of-bounds access).
    unsafe {
        asm!(
            "ld {t}, 0({slot})",
            "add {t}, {t}, {v}",
            "sd {t}, 0({slot})",
            v = in(reg) v,
            slot = in(reg) slot,
            t = out(reg) _,
            options(nostack, preserves_flags)
        )
    }
}

/// Adds `v` to this hart's slot at offset `off` and returns the slot's value before the add:
/// one `amoadd.d` with a destination register (the approximate counter's add). A migration
/// between reading the base and the AMO adds, atomically, to the old hart's slot and returns
/// that slot's old value: each slot's chain of values stays whole.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn fetch_add(off: usize, v: i64) -> u64 {
    let slot = cpu_base().wrapping_add(off) as *mut u64;
    let old: u64;
    // SAFETY: `slot` is a live, aligned slot of the zone (caller's contract); `amoadd.d` is
    // one atomic read-modify-write of it.
    unsafe {
        asm!(
            "amoadd.d {old}, {v}, ({slot})",
            old = out(reg) old,
            v = in(reg) v,
            slot = in(reg) slot,
            options(nostack, preserves_flags)
        )
    }
    old
}

/// Points this hart's `tp` (with feature `riscv-gp`: `gp`) at `base` (its
/// [`Zone::cpu_base`](crate::Zone::cpu_base)). Call it once on each hart, in the kernel
/// (S-mode or M-mode), before that hart adds to a counter. A kernel that already keeps its own
/// per-CPU block in that register hosts the zone inside the block instead (see
/// [`ZoneLayout`](crate::ZoneLayout)) and need not call this. Every base fits the register:
/// never an error. Where the platform supplies the base (`cfg(pcpu_base_from_platform)`: a
/// hosted program, whose `tp` is the C library's thread pointer) it writes nothing.
///
/// # Safety
/// Must run in the kernel on the hart whose block `base` is; nothing else on that hart may
/// rely on the previous `tp` (`gp`): no thread-local storage, and with `riscv-gp` no code
/// linked with gp relaxation (link with `--no-relax`).
pub unsafe fn set_cpu_base(base: usize) -> Result<(), Error> {
    // SAFETY: per the caller's contract (this hart, its block, a register nobody else uses).
    unsafe { write_base(base) };
    Ok(())
}

/// Writes `tp`. rustc does not accept `tp` as an asm operand, but the template may name it.
///
/// # Safety
/// As [`set_cpu_base`].
#[cfg(all(not(pcpu_base_from_platform), not(feature = "riscv-gp")))]
#[inline(always)]
unsafe fn write_base(base: usize) {
    // SAFETY: per the caller: the kernel owns `tp` on this hart (no TLS).
    unsafe { asm!("mv tp, {0}", in(reg) base, options(nomem, nostack, preserves_flags)) }
}

/// Writes `gp` (feature `riscv-gp`).
///
/// # Safety
/// As [`set_cpu_base`]; nothing on this hart uses `gp` (linked with `--no-relax`).
#[cfg(all(not(pcpu_base_from_platform), feature = "riscv-gp"))]
#[inline(always)]
unsafe fn write_base(base: usize) {
    // SAFETY: per the caller: the kernel owns `gp` on this hart.
    unsafe { asm!("mv gp, {0}", in(reg) base, options(nomem, nostack, preserves_flags)) }
}

/// Where the platform supplies the base there is no register to write.
///
/// # Safety
/// None needed.
#[cfg(pcpu_base_from_platform)]
#[inline(always)]
unsafe fn write_base(_base: usize) {}

/// The per-CPU register the add goes through, as the bring-up check names it (where the
/// platform supplies the base, the default names the platform).
#[cfg(not(pcpu_base_from_platform))]
pub const REGISTER: &str = if cfg!(feature = "riscv-gp") {
    "gp"
} else {
    "tp"
};

/// What the add takes as this hart's base now (`tp`, or `gp` with `riscv-gp`), for the
/// bring-up check (where the platform supplies the base, the default asks the platform).
///
/// # Safety
/// None needed; `unsafe` to match the other archs.
#[cfg(not(pcpu_base_from_platform))]
pub(crate) unsafe fn current_base() -> Result<usize, Error> {
    Ok(cpu_base())
}

/// The other register a riscv64 kernel may keep its per-CPU pointer in (`gp` where the add
/// reads `tp`, and the reverse), with its value: so that the bring-up check can say "the
/// block is in `tp`, but this build adds through `gp`". (Where the platform supplies the
/// base, the default: `None`.)
#[cfg(not(pcpu_base_from_platform))]
pub(crate) fn other_register() -> Option<(&'static str, usize)> {
    let value: usize;
    if cfg!(feature = "riscv-gp") {
        // SAFETY: copies a register; no memory access.
        unsafe { asm!("mv {}, tp", out(reg) value, options(nomem, nostack, preserves_flags)) };
        Some(("tp", value))
    } else {
        // SAFETY: copies a register; no memory access.
        unsafe { asm!("mv {}, gp", out(reg) value, options(nomem, nostack, preserves_flags)) };
        Some(("gp", value))
    }
}

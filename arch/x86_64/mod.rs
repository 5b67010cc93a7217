//! x86_64: one `add qword ptr gs:[off], v` per add.
//!
//! Each CPU's GS base holds that CPU's block of the zone, so the same offset names a different
//! slot on every CPU. The instruction reads the GS base, loads, adds and stores as one
//! instruction: neither an interrupt nor a migration can fall inside it, so it needs no lock
//! prefix and no preemption protection (FreeBSD's amd64 `counter_u64_add`, Linux's
//! `this_cpu_add`).

use core::arch::asm;

use crate::zone::Zone;

/// The arch this build's primitives are for.
pub const NAME: &str = "x86_64 (gs-relative add)";

/// Adds `v` to the current CPU's slot at GS-relative offset `off`.
///
/// # Safety
/// This CPU's GS base must be its block of the zone that owns `off`, and `off` a live slot.
#[inline(always)]
pub(crate) unsafe fn add(_zone: &Zone<'_>, off: usize, v: i64) {
    // SAFETY: the caller's contract puts `gs:[off]` on this CPU's own slot, which only this
    // CPU writes; one instruction, so nothing can interleave with it on this CPU.
    unsafe {
        asm!(
            "add qword ptr gs:[{off}], {v}",
            off = in(reg) off,
            v = in(reg) v,
            options(nostack),
        )
    }
}

/// Adds `v` to the current CPU's slot at GS-relative offset `off` and returns the slot's
/// value before the add: one non-locked `xadd qword ptr gs:[off], v`, which (like the plain
/// add) no interrupt or migration can split.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn fetch_add(_zone: &Zone<'_>, off: usize, v: i64) -> u64 {
    let mut old = v as u64;
    // SAFETY: as in `add`: `gs:[off]` is this CPU's own slot and one instruction updates it.
    unsafe {
        asm!(
            "xadd qword ptr gs:[{off}], {v}",
            off = in(reg) off,
            v = inout(reg) old,
            options(nostack),
        )
    }
    old
}

/// The add needs no protection, so the protected add is the same instruction.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn add_protected(zone: &Zone<'_>, off: usize, v: i64) {
    // SAFETY: same contract as `add`.
    unsafe { add(zone, off, v) }
}

/// `counter_enter` is free on x86_64, as on FreeBSD's amd64.
#[inline(always)]
pub(crate) const fn needs_protection() -> bool {
    false
}

#[path = "../atomic_slots.rs"]
mod atomic_slots;
pub(crate) use atomic_slots::{load_slot, store_slot};

/// Points this CPU's GS base at `base` (its [`Zone::cpu_base`]) by writing the
/// `IA32_GS_BASE` MSR through the `x86_64` crate. Call it once on each CPU, at CPL 0, before
/// that CPU adds to a counter. A kernel that already points GS at its own per-CPU block hosts
/// the zone inside that block instead (see [`ZoneLayout`](crate::ZoneLayout)) and need not
/// call this.
///
/// Returns `false`, writing nothing, if `base` is not a canonical address.
///
/// # Safety
/// Must run at CPL 0 on the CPU whose block `base` is; nothing else on that CPU may rely on
/// the previous GS base. (`swapgs` kernels: this writes the active GS base, not the kernel's
/// swapped one.)
pub unsafe fn set_cpu_base(base: usize) -> bool {
    match x86_64::VirtAddr::try_new(base as u64) {
        Ok(addr) => {
            x86_64::registers::model_specific::GsBase::write(addr);
            true
        }
        Err(_) => false,
    }
}

/// Points this thread's GS base at `base` (`arch_prctl(ARCH_SET_GS)`): glibc keeps TLS in FS,
/// so user space may use GS freely and the real `add gs:[off]` runs in host tests.
///
/// # Safety
/// `base` is a block of a live zone, and nothing else on this thread uses GS.
#[cfg(feature = "sim")]
pub(crate) unsafe fn host_bind(base: usize) {
    const ARCH_SET_GS: libc::c_int = 0x1001;
    // SAFETY: ARCH_SET_GS only changes this thread's GS base.
    let rc = unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_GS, base) };
    assert_eq!(
        rc,
        0,
        "arch_prctl(ARCH_SET_GS) failed: {}",
        std::io::Error::last_os_error()
    );
}

/// Clears this thread's GS base, so that a stray add faults instead of counting.
///
/// # Safety
/// As [`host_bind`].
#[cfg(feature = "sim")]
pub(crate) unsafe fn host_unbind() {
    // SAFETY: same call with base 0.
    unsafe { host_bind(0) }
}

// SPDX-License-Identifier: BSD-2-Clause
//! x86_64: one `add qword ptr gs:[off], v` per add.
//!
//! Each CPU's GS base holds that CPU's block of the zone, so the same offset names a different
//! slot on every CPU. The instruction reads the GS base, loads, adds and stores as one
//! instruction: neither an interrupt nor a migration can fall inside it, so it needs no lock
//! prefix and no preemption protection (FreeBSD's amd64 `counter_u64_add`, Linux's
//! `this_cpu_add`).

use core::arch::asm;

pub use super::defaults::*;
use crate::Error;

/// The arch this build's primitives are for.
pub const NAME: &str = "x86_64 (gs-relative add)";

/// Adds `v` to the current CPU's slot at GS-relative offset `off`.
///
/// # Safety
/// This CPU's GS base must be its block of the area whose live slot `off` is.
#[inline(always)]
pub(crate) unsafe fn add(off: usize, v: i64) {
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

/// Adds 1 to the current CPU's slot at GS-relative offset `off`: one
/// `add qword ptr gs:[off], 1`, the immediate in the instruction.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn inc(off: usize) {
    // SAFETY: as in `add`.
    unsafe {
        asm!(
            "add qword ptr gs:[{off}], 1",
            off = in(reg) off,
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
pub(crate) unsafe fn fetch_add(off: usize, v: i64) -> u64 {
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

/// Adds `v` to the current CPU's slot at GS-relative offset `off` with the plain
/// `add qword ptr gs:[off], v`, and returns how many multiples of 16 the slot crossed (signed,
/// wrapping): `(v >> 4) + AF`, where the add's auxiliary carry flag AF is the carry out of the
/// low 4 bits (`(old & 15) + (v & 15) >= 16`), so the result is exactly
/// `((old + v) >> 4) - (old >> 4)` modulo 2^60 without reading the slot.
///
/// The flags are read by the next instruction: `lahf` (AF is bit 4 of AH) where the CPU has
/// it in 64-bit mode (CPUID 0x8000_0001 ECX bit 0: every x86_64 CPU since 2006, and part of
/// x86-64-v2), else `pushfq; pop`. An interrupt
/// between the add and the flag read returns with the flags restored (`iretq`, `sigreturn`),
/// and a migration carries them along: the count is this add's own.
///
/// # Safety
/// As [`add`].
#[inline(always)]
pub(crate) unsafe fn add_crossings16(off: usize, v: i64) -> u64 {
    if !has_lahf() {
        // SAFETY: as here.
        return unsafe { add_crossings16_pushf(off, v) };
    }
    if (v as u64) < 16 {
        // An add from 0 to 15 (every `inc`, where `v` is a constant): the crossing is AF
        // alone, and the asm branches on it itself (`lahf; test ah, 0x10; jnz`).
        // SAFETY: as in `add`; `lahf` only writes AH, which is declared clobbered.
        unsafe {
            asm!(
                "add qword ptr gs:[{off}], {v}",
                "lahf",
                "test ah, 0x10",
                "jnz {crossed}",
                off = in(reg) off,
                v = in(reg) v,
                out("rax") _,
                crossed = label { return 1 },
                options(nostack),
            )
        }
        return 0;
    }
    let ax: u64;
    // SAFETY: as in `add`; `lahf` only writes AH.
    unsafe {
        asm!(
            "add qword ptr gs:[{off}], {v}",
            "lahf",
            off = in(reg) off,
            v = in(reg) v,
            out("rax") ax,
            options(nostack),
        )
    }
    ((v >> 4) as u64).wrapping_add((ax >> 12) & 1)
}

/// [`add_crossings16`] with the flags read by `pushfq; pop`, for CPUs without `lahf` in
/// 64-bit mode (out of line: the common path is `lahf`).
///
/// # Safety
/// As [`add`].
#[cold]
#[inline(never)]
unsafe fn add_crossings16_pushf(off: usize, v: i64) -> u64 {
    let flags: u64;
    // SAFETY: as in `add`; the push and pop leave the stack as they found it.
    unsafe {
        asm!(
            "add qword ptr gs:[{off}], {v}",
            "pushfq",
            "pop {flags}",
            off = in(reg) off,
            v = in(reg) v,
            flags = out(reg) flags,
        )
    }
    ((v >> 4) as u64).wrapping_add((flags >> 4) & 1)
}

/// Whether `lahf` works in 64-bit mode. Rust exposes no stable target feature for it, but
/// it is part of x86-64-v2: a build for v2 or later (POPCNT and CMPXCHG16B enabled, as by
/// `-C target-cpu=x86-64-v2` or `native` on any CPU since 2009) runs only where it is, and
/// needs no check. SSE4.2 is not asked: a kernel target (`x86_64-unknown-none`) builds
/// without SIMD even for v2. Elsewhere CPUID is asked once and the answer cached.
#[inline(always)]
fn has_lahf() -> bool {
    if cfg!(all(
        target_feature = "popcnt",
        target_feature = "cmpxchg16b"
    )) {
        return true;
    }
    use crate::atomic::{AtomicU8, Ordering};
    /// 0: not yet known; 1: no; 2: yes.
    static LAHF: AtomicU8 = AtomicU8::new(0);
    match LAHF.load(Ordering::Relaxed) {
        0 => {
            let yes = detect_lahf();
            LAHF.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
        known => known == 2,
    }
}

/// CPUID 0x8000_0001 ECX bit 0 (LAHF/SAHF in 64-bit mode), where the extended leaf exists.
#[cold]
#[inline(never)]
// `__cpuid` is a safe function on newer toolchains, an unsafe one on 1.87.
#[allow(unused_unsafe)]
fn detect_lahf() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86_64 CPU and has no side effects.
    let max = unsafe { __cpuid(0x8000_0000) }.eax;
    // SAFETY: as above; the leaf is in range.
    let leaf = (max >= 0x8000_0001).then(|| unsafe { __cpuid(0x8000_0001) });
    leaf.is_some_and(|l| l.ecx & 1 != 0)
}

/// Points this CPU's GS base at `base` (its [`Zone::cpu_base`](crate::Zone::cpu_base)) by
/// writing the `IA32_GS_BASE` MSR through the `x86_64` crate. Call it once on each CPU, at
/// CPL 0, before that CPU adds to a counter. A kernel that already points GS at its own
/// per-CPU block hosts the zone inside that block instead (see
/// [`ZoneLayout`](crate::ZoneLayout)) and need not call this.
///
/// Fails with [`Error::BadCpuBase`], writing nothing, if `base` is not a canonical address
/// (the `x86_64` crate's `VirtAddrNotValid`).
///
/// # Safety
/// Must run at CPL 0 on the CPU whose block `base` is; nothing else on that CPU may rely on
/// the previous GS base. (`swapgs` kernels: this writes the active GS base, not the kernel's
/// swapped one.)
pub unsafe fn set_cpu_base(base: usize) -> Result<(), Error> {
    let addr = ::x86_64::VirtAddr::try_new(base as u64).map_err(|_| Error::BadCpuBase { base })?;
    ::x86_64::registers::model_specific::GsBase::write(addr);
    Ok(())
}

/// The per-CPU register the add goes through, as the bring-up check names it.
pub const REGISTER: &str = "GS base";

/// What this CPU's GS base holds now (the `IA32_GS_BASE` MSR), for the bring-up check.
///
/// # Safety
/// Runs at CPL 0 (`rdmsr`).
pub(crate) unsafe fn current_base() -> Result<usize, Error> {
    Ok(::x86_64::registers::model_specific::GsBase::read().as_u64() as usize)
}

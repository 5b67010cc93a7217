// SPDX-License-Identifier: BSD-2-Clause
//! The primitives an arch file need not state: each arch file glob-imports this module
//! (`pub use super::defaults::*`) and defines an item of the same name only where it differs,
//! which shadows the default (as FreeBSD's `amd64/include/counter.h` states only what differs
//! from the machine-independent code). A default an arch replaces is unused there.
//!
//! | default | stated instead by |
//! |---|---|
//! | `add_protected` is `add` (the add needs no protection) | i386, portable |
//! | `needs_protection()` is `false` | i386 (true without CX8), portable |
//! | `inc(off)` is `add(off, 1)` | x86_64 (an immediate operand) |
//! | `add_crossings16` from `fetch_add`'s old value | x86_64 (the add's auxiliary carry flag) |
//! | `load_slot`, `store_slot`: a relaxed 64-bit atomic access, which never tears | i386, portable without 64-bit atomics |
//! | `BASE_FROM_PLATFORM` where the build says so (`cfg(pcpu_base_from_platform)`) | portable (always) |
//! | `REGISTER`, `current_base()`: the platform supplies the base | x86_64, i386; aarch64 and riscv64 unless the platform supplies the base |
//! | `other_register()` is `None` | riscv64 (`tp` and `gp`) |
//! | `segment_limit()` is `None` | i386 (the `%fs` segment) |
#![allow(dead_code)]

use super::imp;
use crate::Error;

/// Adds `v` to the current CPU's slot at `off` inside a protected section: the arch's add,
/// which needs no protection.
///
/// # Safety
/// As the arch's `add`.
#[inline(always)]
pub(crate) unsafe fn add_protected(off: usize, v: i64) {
    // SAFETY: same contract as `add`.
    unsafe { imp::add(off, v) }
}

/// Whether `counter_enter` must enter local protection: not where the add needs none.
#[inline(always)]
pub(crate) const fn needs_protection() -> bool {
    false
}

/// Adds 1 to the current CPU's slot at `off`: the arch's `add(off, 1)`.
///
/// # Safety
/// As the arch's `add`.
#[inline(always)]
pub(crate) unsafe fn inc(off: usize) {
    // SAFETY: per the caller.
    unsafe { imp::add(off, 1) }
}

/// Adds `v` to the current CPU's slot at `off` and returns how many multiples of 16 the slot
/// crossed, signed and wrapping: `((old + v) >> 4) - (old >> 4)` modulo 2^60, written as
/// `(v >> 4) + carry out of the low 4 bits` (the [`ApproxCounter`](crate::ApproxCounter)'s
/// add), computed from the arch's `fetch_add`'s old value.
///
/// # Safety
/// As the arch's `add`.
#[inline(always)]
pub(crate) unsafe fn add_crossings16(off: usize, v: i64) -> u64 {
    // SAFETY: per the caller.
    let old = unsafe { imp::fetch_add(off, v) };
    ((v >> 4) as u64).wrapping_add(((old & 15) + (v as u64 & 15)) >> 4)
}

/// Reads a slot of any CPU: a relaxed 64-bit atomic load (the plain `mov`/`ldr`/`ld`), which
/// never tears where the arch's add is one atomic access to the slot.
///
/// # Safety
/// `slot` is an aligned slot inside a live zone.
#[cfg(target_has_atomic = "64")]
#[inline]
pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
    // SAFETY: aligned and live per the caller; every owner's add is one atomic access to it.
    unsafe { core::sync::atomic::AtomicU64::from_ptr(slot) }
        .load(core::sync::atomic::Ordering::Relaxed)
}

/// Writes a slot that no CPU adds to (a slot being allocated): a relaxed 64-bit atomic store.
///
/// # Safety
/// As [`load_slot`], and no CPU may add to the slot now.
#[cfg(target_has_atomic = "64")]
#[inline]
pub(crate) unsafe fn store_slot(slot: *mut u64, value: u64) {
    // SAFETY: aligned, live and unused per the caller.
    unsafe { core::sync::atomic::AtomicU64::from_ptr(slot) }
        .store(value, core::sync::atomic::Ordering::Relaxed)
}

/// Whether the add takes this CPU's base from the platform's hooks instead of a register:
/// where the build says so (`cfg(pcpu_base_from_platform)`: aarch64 and riscv64 with feature
/// `platform-base` or `sim`).
pub(crate) const BASE_FROM_PLATFORM: bool = cfg!(pcpu_base_from_platform);

/// The per-CPU register the add goes through, as the bring-up check names it.
pub const REGISTER: &str = "Platform::cpu_base";

/// What the add takes as this CPU's base now, for the bring-up check: the platform's answer.
///
/// # Safety
/// None needed here; `unsafe` because reading an arch's register may need a privilege level.
pub(crate) unsafe fn current_base() -> Result<usize, Error> {
    Ok(crate::platform::cpu_base())
}

/// The other register a kernel may keep its per-CPU pointer in, with its value, where an
/// arch has two candidates; for the bring-up check's message. None here.
pub(crate) fn other_register() -> Option<(&'static str, usize)> {
    None
}

/// The byte limit of the segment the add goes through, where the add has one; `None`: the
/// add goes through no segment. A zone that grows reaches chunks at offsets anywhere in the
/// address space, so such a segment must span it all.
pub(crate) fn segment_limit() -> Option<usize> {
    None
}

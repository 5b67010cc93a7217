// SPDX-License-Identifier: BSD-2-Clause
//! Slot reads and writes for arches whose aligned 64-bit load and store never tear (x86_64,
//! aarch64, riscv64): a relaxed `AtomicU64` access, which is the plain `mov`/`ldr`/`ld`.
//! Used by those arches. `mod.rs`.

use core::sync::atomic::{AtomicU64, Ordering};

/// Reads a slot of any CPU.
///
/// # Safety
/// `slot` is an aligned slot inside a live zone.
#[inline]
pub(crate) unsafe fn load_slot(slot: *mut u64) -> u64 {
    // SAFETY: aligned and live per the caller; every owner's add is one atomic access to it.
    unsafe { AtomicU64::from_ptr(slot) }.load(Ordering::Relaxed)
}

/// Writes a slot that no CPU adds to (a slot being allocated).
///
/// # Safety
/// As [`load_slot`], and no CPU may add to the slot now.
#[inline]
pub(crate) unsafe fn store_slot(slot: *mut u64, value: u64) {
    // SAFETY: aligned, live and unused per the caller.
    unsafe { AtomicU64::from_ptr(slot) }.store(value, Ordering::Relaxed)
}

// SPDX-License-Identifier: BSD-2-Clause
//! `COUNTER_U64_DEFINE_EARLY(name)` from C: counters defined at file scope, usable before the
//! zone exists, as FreeBSD's `sys/counter.h` allows.
//!
//! The macro (in `include/pcpu_counter_inline.h`) makes `name` the address of a static
//! 64-bit word and puts `&name` into the linker set `pcpu_counter_early` (the section between
//! `__start_pcpu_counter_early` and `__stop_pcpu_counter_early`). Before any zone exists an
//! add reaches that word: the inline add is register-relative, so `name` holds the word's
//! address minus the *early base*, the value the boot CPU's per-CPU register holds until the
//! zone exists. That is 0 unless the kernel says otherwise with `pcpu_early_base(value)`
//! ([`rebase`]: a kernel whose register holds a hart id or a per-CPU pointer from reset),
//! which rewrites every `name` by the difference. The out-of-line `pcpu_counter_add` adds to
//! `name + early base` atomically. `pcpu_zone_init` (`pcpu_sim_machine_new` on the
//! host) then gives each such counter a slot, moves its early count into CPU 0's slot and
//! stores the slot's handle in `name`. Unlike FreeBSD, which drops the early counts, nothing
//! is lost; like FreeBSD's `SYSINIT`, the move runs before other CPUs start, so no add races
//! it (an add in flight on another CPU or in an interrupt handler during the move could be
//! lost).
//!
//! This file is the linker set and the early words; moving the early counts into the zone is
//! zone setup's (`init.rs`).

use crate::atomic::{AtomicPtr, AtomicUsize, Ordering};

use super::slot::counter_u64_t;

extern "C" {
    /// The linker set's bounds, defined by the linker (or the kernel's linker script).
    static __start_pcpu_counter_early: [u8; 0];
    static __stop_pcpu_counter_early: [u8; 0];
}

/// One entry of the linker set: the address of a C `counter_u64_t` variable, or null.
type EarlyEntry = AtomicPtr<counter_u64_t>;

/// The library's own null entry, so that the set (and its bounds) exists in every program.
#[used]
#[link_section = "pcpu_counter_early"]
static SENTINEL: EarlyEntry = AtomicPtr::new(core::ptr::null_mut());

/// The variables of the linker set: every `COUNTER_U64_DEFINE_EARLY` in the program.
pub(crate) fn early_variables() -> impl Iterator<Item = *mut counter_u64_t> {
    // Read it, so that the object that holds it is always linked with this one.
    let _ = SENTINEL.load(Ordering::Relaxed);
    // Only the addresses of the linker's symbols are taken.
    let start = core::ptr::addr_of!(__start_pcpu_counter_early).cast::<EarlyEntry>();
    let stop = core::ptr::addr_of!(__stop_pcpu_counter_early).cast::<EarlyEntry>();
    let n = (stop as usize - start as usize) / core::mem::size_of::<EarlyEntry>();
    (0..n).filter_map(move |i| {
        // SAFETY: the set holds `n` entries from `start`, in the image for ever.
        let var = unsafe { &*start.add(i) }.load(Ordering::Relaxed);
        (!var.is_null()).then_some(var)
    })
}

/// The early base: what the boot CPU's per-CPU register holds until the zone exists, as the
/// kernel said with `pcpu_early_base` (0 until then). Every early `name` holds its word's
/// address minus this.
static EARLY_BASE: AtomicUsize = AtomicUsize::new(0);

/// The word of early counter `c` (a `name` of the macro, before any zone exists).
pub(crate) fn word(c: counter_u64_t) -> *mut u64 {
    (c as usize).wrapping_add(EARLY_BASE.load(Ordering::Relaxed)) as *mut u64
}

/// Makes every early counter's `name` relative to `base` (its word's address minus `base`),
/// so that an add through a register holding `base` reaches the word. Refuses (`false`,
/// nothing changed) when a `name` would read as NULL.
///
/// The caller made sure that no zone exists and that nothing adds to an early counter
/// meanwhile (the boot CPU, before other CPUs start, interrupts off).
pub(crate) fn rebase(base: usize) -> bool {
    let old = EARLY_BASE.load(Ordering::Relaxed);
    // SAFETY: live `counter_u64_t` variables the macro defined; nothing adds meanwhile.
    let name = |var: *mut counter_u64_t| unsafe { var.read_volatile() } as usize;
    if early_variables().any(|var| name(var).wrapping_add(old) == base) {
        return false;
    }
    for var in early_variables() {
        let word = name(var).wrapping_add(old);
        // SAFETY: as above.
        unsafe { var.write_volatile(word.wrapping_sub(base) as counter_u64_t) };
    }
    EARLY_BASE.store(base, Ordering::Relaxed);
    true
}

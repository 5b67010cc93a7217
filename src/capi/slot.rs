// SPDX-License-Identifier: BSD-2-Clause
//! `counter_u64_t`: a counter is its slot, so the C handle is the slot's offset from the
//! per-CPU register, as a pointer-sized value. No table, no allocation, no claim.
//!
//! Offset 0 would read as C's NULL, so the C ABI never hands it out: a zone that starts at
//! offset 0 of the area keeps its first slot for good the first time C would get it.

use crate::atomic::{AtomicPtr, Ordering};
use crate::Zone;

/// Opaque, never dereferenced: a counter_u64_t's value is its slot's offset.
///
/// An incomplete type in C (`struct pcpu_counter`).
pub struct CounterSlot {
    _opaque: [u8; 0],
}

/// FreeBSD's `counter_u64_t`: the slot's offset from the per-CPU register, or NULL.
///
/// Never 0 for a live counter, and the same on every CPU.
pub type counter_u64_t = *mut CounterSlot;

/// The handle of the slot at `off` (not 0).
pub(crate) fn handle(off: usize) -> counter_u64_t {
    debug_assert_ne!(off, 0);
    off as counter_u64_t
}

/// What a C counter's value names: a slot of the C zone, or, before any zone exists, an
/// early counter's word (see `early`).
pub(crate) enum Target {
    Slot(&'static Zone<'static>, usize),
    Early(*mut u64),
}

/// The C zone once an add found it: the add path's one load of zone state.
///
/// Relaxed, and no fence: the zone is made before other CPUs start (`pcpu_zone_init`'s
/// contract), so the kernel's own start of each CPU orders the zone's making before that
/// CPU's adds; on the CPU that made it, program order does. The pointer is only ever a
/// `&'static Zone` that `zone::target` returned, and the C zone never changes once made.
static C_ZONE: AtomicPtr<Zone<'static>> = AtomicPtr::new(core::ptr::null_mut());

/// The add path's zone and offset of `c` once the C zone is known and `c` is a slot of its
/// first blocks: one relaxed load, the bounds check, no lock and no fence (aborting on NULL).
/// `None` before an add found the zone, and for a handle outside the first blocks (a chunk's,
/// or no counter): then `zone::target` says where it goes, or aborts, and [`remember`] keeps
/// the zone.
#[inline(always)]
pub(crate) fn add_slot(c: counter_u64_t) -> Option<(&'static Zone<'static>, usize)> {
    let zone = C_ZONE.load(Ordering::Relaxed);
    if zone.is_null() {
        return None;
    }
    // SAFETY: only ever set from a `&'static Zone` ([`remember`]), made before this CPU adds.
    let zone: &'static Zone<'static> = unsafe { &*zone };
    let off = c as usize;
    if off == 0 {
        not_a_counter();
    }
    zone.in_first_blocks(off).then_some((zone, off))
}

/// Keeps the C zone for [`add_slot`] once `zone::target` found one.
pub(crate) fn remember(target: &Target) {
    if let Target::Slot(zone, _) = *target {
        C_ZONE.store(core::ptr::from_ref(zone).cast_mut(), Ordering::Relaxed);
    }
}

/// Aborts (through the panic, which cannot unwind into C): `c` is no slot of the C zone.
#[cold]
#[inline(never)]
pub(crate) fn not_a_counter() -> ! {
    panic!("pcpu-counter: not a counter_u64_t of the zone")
}

/// Allocates a run of `n` slots of `zone` for C, a zone that grows asking its hooks with
/// `wait`: never one starting at offset 0 (that slot stays allocated for good, as C's NULL,
/// and the rest of such a run is freed and tried again).
pub(crate) fn alloc_run(
    zone: &Zone<'_>,
    n: usize,
    wait: crate::Wait,
) -> Result<usize, crate::Error> {
    loop {
        let off = zone.alloc_run(n, wait)?;
        if off != 0 {
            return Ok(off);
        }
        if n > 1 {
            zone.free_run(8, n - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::zone::{current_zone, target};
    use super::*;

    /// The add path's bounds check, once the zone is remembered: a slot of the zone passes
    /// with its offset; NULL aborts; a misaligned value and one past the area go to the slow
    /// path, which aborts.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "the C zone's making reads the early-counter linker set, whose bounds are extern statics Miri cannot resolve"
    )]
    fn the_add_path_checks_the_handle_against_the_remembered_zone() {
        // The process's simulated machine: made here, or by another test with its sizes.
        let _ = crate::sim::capi::pcpu_sim_machine_new(2, 64);
        let zone = current_zone().expect("a simulated machine");
        let c = crate::capi::counter_u64_alloc(crate::capi::M_NOWAIT);
        assert!(!c.is_null());
        remember(&target(c));
        let (found, off) = add_slot(c).expect("the zone is remembered");
        assert!(core::ptr::eq(found, zone));
        assert_eq!(off, c as usize);
        let end = zone.layout().offset + zone.layout().len;
        let caught = std::panic::catch_unwind(|| add_slot(core::ptr::null_mut()));
        assert!(caught.is_err(), "NULL passed the check");
        for bad in [c as usize + 4, end] {
            assert!(
                add_slot(bad as counter_u64_t).is_none(),
                "{bad:#x} passed the check"
            );
            let caught = std::panic::catch_unwind(|| target(bad as counter_u64_t));
            assert!(caught.is_err(), "{bad:#x} passed the slow path's check");
        }
        // SAFETY: a live handle, freed once.
        unsafe { crate::capi::counter_u64_free(c) };
    }
}

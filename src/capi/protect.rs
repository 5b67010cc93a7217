// SPDX-License-Identifier: BSD-2-Clause
//! `counter_enter()` / `counter_exit()` from C: FreeBSD's nullary form, with the nesting kept
//! per CPU (as FreeBSD's `critical_enter` keeps it per thread), and the explicit-state form
//! `pcpu_counter_enter_state` / `pcpu_counter_exit_state`.
//!
//! Where the arch's add needs no protection (x86_64, aarch64, i386 with CX8) both forms do
//! nothing. Elsewhere the outermost `counter_enter()` on a CPU takes local protection and keeps
//! it in that CPU's entry of a static table; inner ones only count, and the `counter_exit()`
//! that brings the count back to 0 releases it. The CPU is read after protection is taken, so
//! the thread cannot move between the read and the entry's use.

use core::cell::{Cell, UnsafeCell};
use core::mem::MaybeUninit;

use super::slot::{self, counter_u64_t};
use crate::platform::{self, Protection};
use crate::{arch, Protected};

/// The most CPUs the nullary `counter_enter()` keeps nesting depths for.
///
/// Where the arch's add needs protection, `pcpu_zone_init` refuses a zone with more CPUs
/// (`PCPU_ECPU`).
pub const PCPU_NEST_CPUS: usize = 256;

/// One CPU's nesting: the depth, and the outermost section's protection while it is above 0.
struct Nest {
    depth: Cell<u32>,
    outer: UnsafeCell<MaybeUninit<Protection>>,
}

impl Nest {
    const fn new() -> Nest {
        Nest {
            depth: Cell::new(0),
            outer: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

/// The nesting of every CPU, indexed by the platform's current CPU. (In the host simulation
/// the C API's CPUs are those of its one machine, `pcpu_sim_machine_new`'s, each held by one
/// thread at a time, as a real CPU runs one thread.)
struct Nests([Nest; PCPU_NEST_CPUS]);

// SAFETY: an entry is only touched by the CPU it belongs to, with local protection held (so
// nothing else on that CPU runs in between either).
unsafe impl Sync for Nests {}

static NESTS: Nests = Nests([const { Nest::new() }; PCPU_NEST_CPUS]);

/// Runs `f` on the running CPU's entry; call with protection held.
fn with_this_cpu_nest<R>(f: impl FnOnce(&Nest) -> R) -> R {
    let cpu = platform::current_cpu();
    // Fixed texts, as every panic the C library can reach: a formatted CPU index would link
    // `core::fmt`'s integer formatting (about 640 bytes on i586).
    f(NESTS.0.get(cpu).unwrap_or_else(|| {
        panic!("pcpu-counter: counter_enter on a CPU index of PCPU_NEST_CPUS or more")
    }))
}

/// Enters one level of the nullary section; `needs` says whether the arch's add needs
/// protection (a parameter so that tests can run the table on any arch).
pub(crate) fn enter_nested(needs: bool) {
    if !needs {
        return;
    }
    let protection = Protection::acquire();
    with_this_cpu_nest(|nest| {
        let depth = nest.depth.get();
        if depth == 0 {
            // SAFETY: depth 0: the slot holds nothing; only this CPU, under protection,
            // touches it.
            unsafe { (*nest.outer.get()).write(protection) };
        } else {
            // An inner level: the outer protection holds; releasing this one restores the
            // protected state it found.
            drop(protection);
        }
        nest.depth.set(depth + 1);
    })
}

/// Leaves one level of the nullary section; panics on an exit without an enter.
pub(crate) fn exit_nested(needs: bool) {
    if !needs {
        return;
    }
    with_this_cpu_nest(|nest| {
        let depth = nest.depth.get();
        assert!(
            depth > 0,
            "pcpu-counter: counter_exit without counter_enter"
        );
        nest.depth.set(depth - 1);
        if depth == 1 {
            // SAFETY: depth 1: the outermost enter wrote the slot and nothing has read it
            // since.
            drop(unsafe { (*nest.outer.get()).assume_init_read() });
        }
    })
}

/// Whether `ncpus` CPUs fit the nesting table on this arch (always, where no protection is
/// needed).
pub(crate) fn nest_fits(ncpus: usize) -> bool {
    !arch::needs_protection() || ncpus <= PCPU_NEST_CPUS
}

/// FreeBSD's `counter_enter()`: enters local protection where the arch's add needs it.
///
/// Nests: each `counter_enter()` is matched by one `counter_exit()` on the same CPU, and the
/// outermost pair holds the protection. A no-op on x86_64, aarch64 and i386 with CX8.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_NOWAIT);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// counter_enter();
/// unsafe { pcpu_counter_add_protected(c, 2) };
/// counter_enter(); // nested
/// unsafe { pcpu_counter_add_protected(c, 3) };
/// counter_exit();
/// counter_exit();
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 5);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub extern "C" fn counter_enter() {
    enter_nested(arch::needs_protection())
}

/// FreeBSD's `counter_exit()`: leaves the innermost `counter_enter()` of this CPU.
///
/// Aborts with a message where the arch keeps protection and this CPU is in no section.
///
/// ```
/// pcpu_counter::capi::counter_enter();
/// pcpu_counter::capi::counter_exit();
/// ```
#[no_mangle]
pub extern "C" fn counter_exit() {
    exit_nested(arch::needs_protection())
}

/// The state `pcpu_counter_enter_state()` hands to `pcpu_counter_exit_state()` (opaque).
///
/// Pass it back unchanged, on the same CPU, in LIFO order.
#[repr(C)]
pub struct pcpu_protect_t {
    opaque: [MaybeUninit<u64>; 2],
}

const _: () = assert!(
    core::mem::size_of::<Protected>() <= core::mem::size_of::<pcpu_protect_t>()
        && core::mem::align_of::<Protected>() <= core::mem::align_of::<pcpu_protect_t>()
);

/// `counter_enter()` with the state in the caller's hands instead of a per-CPU table.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// let c = counter_u64_alloc(M_NOWAIT);
/// assert_eq!(pcpu_sim_bind(0), 0);
/// let state = pcpu_counter_enter_state();
/// unsafe { pcpu_counter_add_protected(c, 2); pcpu_counter_add_protected(c, 3) };
/// unsafe { pcpu_counter_exit_state(state) };
/// pcpu_sim_unbind();
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 5);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub extern "C" fn pcpu_counter_enter_state() -> pcpu_protect_t {
    let mut state = pcpu_protect_t {
        opaque: [MaybeUninit::uninit(); 2],
    };
    // SAFETY: the buffer is large and aligned enough (asserted above);
    // `pcpu_counter_exit_state` reads the guard back out exactly once.
    unsafe {
        state
            .opaque
            .as_mut_ptr()
            .cast::<Protected>()
            .write(Protected::enter())
    };
    state
}

/// `counter_exit()` for `pcpu_counter_enter_state`: leaves the section `state` came from.
///
/// # Safety
/// `state` is the value of a `pcpu_counter_enter_state` on this CPU not yet passed here,
/// and sections are left in reverse order of entry.
///
/// ```
/// let state = pcpu_counter::capi::pcpu_counter_enter_state();
/// unsafe { pcpu_counter::capi::pcpu_counter_exit_state(state) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_counter_exit_state(state: pcpu_protect_t) {
    // SAFETY: per the contract, `state` holds a guard written by `pcpu_counter_enter_state`
    // and not yet read back.
    drop(unsafe { state.opaque.as_ptr().cast::<Protected>().read() })
}

/// The out-of-line add behind `counter_u64_add_protected(c, v)`, inside `counter_enter()`.
///
/// # Safety
/// As `pcpu_counter_add`, and the caller is inside `counter_enter()` on this CPU.
///
/// ```
/// # use pcpu_counter::{capi::*, sim::capi::*};
/// # assert_eq!(pcpu_sim_machine_new(1, 64), 0);
/// # let c = counter_u64_alloc(M_NOWAIT);
/// # assert_eq!(pcpu_sim_bind(0), 0);
/// counter_enter();
/// unsafe { pcpu_counter_add_protected(c, 7) };
/// counter_exit();
/// # pcpu_sim_unbind();
/// assert_eq!(unsafe { counter_u64_fetch(c) }, 7);
/// # unsafe { counter_u64_free(c) };
/// ```
#[no_mangle]
pub unsafe extern "C" fn pcpu_counter_add_protected(c: counter_u64_t, v: i64) {
    match slot::add_slot(c) {
        // SAFETY: a live slot of the C zone, inside protection per the contract.
        Some((zone, off)) => unsafe { zone.add_protected(off, v) },
        // SAFETY: the caller's contract.
        None => unsafe { super::counter::add_first(c, v, true) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sim::capi::{pcpu_sim_bind, pcpu_sim_machine_new, pcpu_sim_unbind};
    use crate::sim::interrupts_blocked;

    /// The C API's machine (one per process; made here or by another test with these sizes),
    /// so that its CPUs, and so the nesting table's entries, are held by one thread at a time.
    fn on_c_cpu(cpu: usize, f: impl FnOnce()) {
        assert_eq!(pcpu_sim_machine_new(2, 64), 0);
        assert_eq!(pcpu_sim_bind(cpu), 0);
        struct Unbind;
        impl Drop for Unbind {
            fn drop(&mut self) {
                pcpu_sim_unbind();
            }
        }
        let _unbind = Unbind;
        f()
    }

    /// The nesting table bounds the CPUs only where the arch's add needs protection: on the
    /// others a zone of any CPU count suits the C API.
    #[test]
    fn the_nesting_table_bounds_cpus_only_where_protection_is_needed() {
        assert!(nest_fits(1) && nest_fits(PCPU_NEST_CPUS));
        assert_eq!(nest_fits(PCPU_NEST_CPUS + 1), !arch::needs_protection());
        assert_eq!(nest_fits(usize::MAX), !arch::needs_protection());
    }

    /// The table as an arch that needs protection uses it: the outermost level holds the
    /// protection, inner exits keep it, the last exit releases it; per CPU.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "the C machine reads the early-counter linker set's bounds, extern statics Miri cannot resolve"
    )]
    fn nesting_holds_protection_until_the_outermost_exit() {
        for cpu in 0..2 {
            on_c_cpu(cpu, || {
                assert!(!interrupts_blocked());
                enter_nested(true);
                assert!(interrupts_blocked());
                enter_nested(true);
                enter_nested(true);
                exit_nested(true);
                exit_nested(true);
                assert!(
                    interrupts_blocked(),
                    "an inner exit released the protection"
                );
                exit_nested(true);
                assert!(
                    !interrupts_blocked(),
                    "the outermost exit kept the protection"
                );
            });
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "the C machine reads the early-counter linker set's bounds, extern statics Miri cannot resolve"
    )]
    #[should_panic(expected = "counter_exit without counter_enter")]
    fn an_exit_without_an_enter_is_refused() {
        on_c_cpu(0, || exit_nested(true));
    }
}

//! The simulation's answers to the platform's questions (`src/platform.rs` takes them from
//! here, and only from here): the current CPU, its per-CPU base, local protection, the add's
//! check, and where a zone's area lives. Each is a thread-local read, inline.

use core::cell::Cell;

pub(crate) use super::interrupt::{protect, unprotect, ProtectState};

std::thread_local! {
    /// The bound CPU's per-CPU base, or 0. Read from signal handlers: a const-initialised
    /// `Cell`.
    static BASE: Cell<usize> = const { Cell::new(0) };
}

/// The platform's current CPU under simulation: panics on a thread that holds no CPU.
pub(crate) fn current_cpu() -> usize {
    super::current_cpu_checked().unwrap_or_else(|| no_cpu())
}

/// The bound CPU's per-CPU base (its block of the machine's zone), where the arch takes the
/// base from the platform: aarch64 and riscv64, whose registers a host thread cannot own, and
/// the portable fallback. Panics on a thread that holds no CPU.
#[cfg_attr(
    not(any(pcpu_base_from_platform, not(pcpu_hosted_cpus))),
    allow(dead_code)
)]
#[inline(always)]
pub(crate) fn cpu_base() -> usize {
    let base = BASE.with(Cell::get);
    if base == 0 {
        no_cpu();
    }
    base
}

/// Records the bound CPU's base (0: none), for [`cpu_base`].
pub(super) fn set_cpu_base(base: usize) {
    BASE.with(|b| b.set(base));
}

/// Every zone gets an area of its own: each simulated machine is a computer of its own, and a
/// zone made outside any machine belongs to none (adds to it are refused, see [`check_add`]).
#[inline(always)]
pub(crate) const fn own_areas() -> bool {
    true
}

/// The add path's check, in release builds too: the thread must hold a CPU of the counter's
/// machine. An ordinary thread's per-CPU register points nowhere (on x86_64 its GS base is 0),
/// and each machine is an area of its own, so without the check an add would fault or change
/// another machine's counter at the same offset. Binding records the machine's area in a
/// thread-local; the check compares it with the counter's: one thread-local load and a
/// compare (its cost is in `cargo xtask bench`).
#[inline(always)]
pub(crate) fn check_add(area: &crate::area::Area) {
    if super::bound_area() != area as *const crate::area::Area as usize {
        wrong_area()
    }
}

#[cold]
#[inline(never)]
fn no_cpu() -> ! {
    panic!(
        "pcpu-counter: this thread holds no simulated CPU; under the `sim` feature every add \
         runs on one: take it with Machine::bind or Machine::run_on"
    )
}

#[cold]
#[inline(never)]
fn wrong_area() -> ! {
    if super::binding().is_none() {
        no_cpu();
    }
    panic!(
        "pcpu-counter: add on a thread that holds no simulated CPU of this counter's machine \
         (it holds a CPU of another machine, or the counter's zone belongs to no machine)"
    )
}

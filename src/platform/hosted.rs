// SPDX-License-Identifier: BSD-2-Clause
//! The backend of a hosted program without the simulation (unix, windows; `cfg
//! pcpu_no_cpu_register`): its threads have no per-CPU register, so no zone can be made
//! (`Error::NoCpuRegister`) and no add runs. Nothing here is asked for an add; local
//! protection has nothing to protect (early counters add to an atomic word), and no kernel
//! hook is linked.

#[cold]
fn no_cpu_register() -> ! {
    panic!("pcpu-counter: {}", crate::Error::NoCpuRegister)
}

/// No CPU index exists for an ordinary thread.
#[allow(dead_code)]
pub(crate) fn current_cpu() -> usize {
    no_cpu_register()
}

/// No per-CPU base exists for an ordinary thread.
#[allow(dead_code)]
pub(crate) fn cpu_base() -> usize {
    no_cpu_register()
}

/// The arch's register is read directly (there is none here: no zone is made).
#[inline(always)]
pub(crate) fn simulated_register() -> Option<usize> {
    None
}

/// Before every add: nothing to check (no zone is made, so no add runs).
#[inline(always)]
pub(crate) fn check_add(_area: &crate::area::Area) {}

/// Before every add to a per-CPU static: nothing to check (no static is installed).
// Called only under the simulation (`statics::__check`).
#[allow(dead_code)]
#[inline(always)]
pub(crate) fn check_static_add(_area: usize) {}

/// Whether every zone gets an area of its own: no zone is made at all.
#[cfg(feature = "alloc")]
#[inline(always)]
pub(crate) const fn own_areas() -> bool {
    false
}

/// Local protection holds nothing here.
#[derive(Clone, Copy)]
pub(crate) struct State;

/// Enters local protection: nothing to protect.
pub(crate) fn acquire() -> State {
    State
}

/// Leaves local protection: nothing to restore.
///
/// # Safety
/// None needed.
pub(crate) unsafe fn release(_state: State) {}

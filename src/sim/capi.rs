// SPDX-License-Identifier: BSD-2-Clause
//! A small C API to the host simulation (features `sim` and `capi`), for C test programs:
//! `pcpu_sim_machine_new` makes the process's machine and installs its zone as the C ABI's
//! zone (the global zone, as `pcpu_zone_init` does), `pcpu_sim_bind`/`pcpu_sim_unbind` take
//! and leave its CPUs. The symbols sit beside the C ABI's in one library (`pcpu_counter::sim::capi`).

use core::cell::RefCell;
use core::ffi::c_int;
use std::boxed::Box;
use std::sync::OnceLock;

use super::{Bound, Machine};
use crate::capi::{code, PCPU_EINSTALLED, PCPU_ENOTINSTALLED, PCPU_OK};
use crate::Error;

/// The thread already holds a simulated CPU (`pcpu_sim_bind` only; Rust: `AlreadyBound`).
///
/// The simulation's code, not the product's: the header declares it under `PCPU_COUNTER_SIM`,
/// and -13 is no other code's.
pub const PCPU_EBOUND: c_int = -13;

static MACHINE: OnceLock<&'static Machine> = OnceLock::new();

std::thread_local! {
    /// The simulated CPU this thread holds through `pcpu_sim_bind`.
    static BOUND: RefCell<Option<Bound<'static>>> = const { RefCell::new(None) };
}

/// The machine `pcpu_sim_machine_new` made, if any.
pub(crate) fn machine() -> Option<&'static Machine> {
    MACHINE.get().copied()
}

/// Host simulation: makes the process's simulated machine, once, with the early counters.
///
/// Every `COUNTER_U64_DEFINE_EARLY` counter gets a slot with its early count, as
/// `pcpu_zone_init` does.
///
/// The machine has `ncpus` CPUs and room for at least `counters` counters. From then on the C ABI allocates from its zone. Once per process; a second
/// call with the same sizes returns 0, with other sizes `PCPU_EINSTALLED`.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(4, 64), 0);
/// assert_eq!(pcpu_sim_machine_new(4, 64), 0);
/// assert_eq!(pcpu_sim_machine_new(5, 64), PCPU_EINSTALLED);
/// assert_eq!(pcpu_sim_machine_new(0, 64), PCPU_EINSTALLED);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_sim_machine_new(ncpus: usize, counters: usize) -> c_int {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _making = MAKING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(machine) = machine() {
        let zone = machine.zone();
        let same = zone.ncpus() == ncpus && zone.capacity() >= counters;
        return if same { PCPU_OK } else { PCPU_EINSTALLED };
    }
    let zone = match super::machine::machine_zone(ncpus, counters) {
        Ok(zone) => zone,
        Err(e) => return code(e),
    };
    if let Err(e) = crate::capi::fits_c(&zone) {
        return e;
    }
    match Machine::with_installed_zone(zone) {
        Ok(m) => {
            // Set under `MAKING`, so it cannot be set already.
            let m: &'static Machine = Box::leak(Box::new(m));
            let _ = MACHINE.set(m);
            crate::capi::move_into(m.zone());
            PCPU_OK
        }
        Err(e) => code(e),
    }
}

/// Host simulation: the calling thread takes simulated CPU `cpu`.
///
/// Waits while another thread holds it, and points its per-CPU register there. Returns 0,
/// `PCPU_ENOTINSTALLED`, `PCPU_ECPU`, or `PCPU_EBOUND` if the thread already holds a CPU.
///
/// ```
/// use pcpu_counter::{capi::*, sim::capi::*};
/// assert_eq!(pcpu_sim_machine_new(2, 64), 0);
/// assert_eq!(pcpu_sim_bind(1), 0);
/// assert_eq!(pcpu_sim_bind(0), PCPU_EBOUND);
/// pcpu_sim_unbind();
/// assert_eq!(pcpu_sim_bind(2), PCPU_ECPU);
/// ```
#[no_mangle]
pub extern "C" fn pcpu_sim_bind(cpu: usize) -> c_int {
    let Some(machine) = machine() else {
        return PCPU_ENOTINSTALLED;
    };
    match machine.bind(cpu) {
        Ok(bound) => {
            BOUND.with(|b| *b.borrow_mut() = Some(bound));
            PCPU_OK
        }
        Err(Error::AlreadyBound) => PCPU_EBOUND,
        Err(e) => code(e),
    }
}

/// Leaves the simulated CPU the calling thread holds; nothing if it holds none.
///
/// ```
/// pcpu_counter::sim::capi::pcpu_sim_unbind();
/// ```
#[no_mangle]
pub extern "C" fn pcpu_sim_unbind() {
    BOUND.with(|b| drop(b.borrow_mut().take()));
}

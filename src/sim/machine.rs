// SPDX-License-Identifier: BSD-2-Clause
//! Simulated machines and the exclusive hold of a simulated CPU.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, AtomicUsize};
use std::boxed::Box;
use std::sync::{Mutex, MutexGuard};
use std::vec::Vec;

use crate::{Counter, Error, Zone};

/// The handler pointer a machine's simulated interrupts call: a thin pointer to a fat one.
pub(crate) type HandlerSlot = AtomicPtr<&'static (dyn Fn(usize) + Sync)>;

/// A simulated machine: `ncpus` CPUs, each held by at most one thread at a time, and a zone
/// with one block per CPU.
pub struct Machine {
    zone: MachineZone,
    cpus: Box<[Mutex<()>]>,
    pub(crate) handler: HandlerSlot,
    pub(crate) handlers_running: AtomicUsize,
}

/// A machine's own zone, or the global zone it installed.
enum MachineZone {
    Own(Zone<'static>),
    Global(&'static Zone<'static>),
    /// A zone sharing its registers with the per-CPU statics' copies.
    Statics(super::statics::StaticsZone),
}

/// A machine's zone: one heap block per CPU.
pub(super) fn machine_zone(ncpus: usize, counters: usize) -> Result<Zone<'static>, Error> {
    #[cfg(target_arch = "x86")]
    super::i386::force_no_cx8_from_environment();
    Zone::on_heap(ncpus, counters, 8)
}

impl Machine {
    /// A machine with `ncpus` CPUs and room for 1024 counters.
    ///
    /// # Panics
    /// If `ncpus` is zero; [`with_capacity`](Machine::with_capacity) returns the error instead.
    pub fn new(ncpus: usize) -> Self {
        Self::with_capacity(ncpus, 1024).unwrap_or_else(|e| panic!("Machine::new({ncpus}): {e}"))
    }

    /// A machine with `ncpus` CPUs and room for at least `counters` counters.
    pub fn with_capacity(ncpus: usize, counters: usize) -> Result<Self, Error> {
        Ok(Self::around(MachineZone::Own(machine_zone(
            ncpus, counters,
        )?)))
    }

    /// A machine whose zone is [`install`](crate::freebsd::install)ed as the global zone, so that the
    /// FreeBSD-named functions ([`counter_u64_alloc`](crate::freebsd::counter_u64_alloc), ...) work on
    /// its CPUs. Fails with [`Error::AlreadyInstalled`] if a global zone exists.
    pub fn with_global_zone(ncpus: usize, counters: usize) -> Result<Self, Error> {
        let zone = crate::freebsd::install(machine_zone(ncpus, counters)?)?;
        Ok(Self::around(MachineZone::Global(zone)))
    }

    /// A machine whose CPUs also hold copies of the per-CPU statics
    /// ([`percpu_counter!`](crate::percpu_counter)), installed over the same registers (see
    /// [`statics::install_section`](crate::statics::install_section)), and a zone of at least `counters`
    /// counters. One such machine at a time: [`Error::AlreadyInstalled`] while another
    /// lives. The statics' template keeps what threads holding no CPU added before.
    pub fn with_statics(ncpus: usize, counters: usize) -> Result<Self, Error> {
        Ok(Self::around(MachineZone::Statics(
            super::statics::StaticsZone::new(ncpus, counters)?,
        )))
    }

    /// A machine around `zone`, which it [`install`](crate::freebsd::install)s as the global
    /// zone (the C API's machine, whose zone is checked before it is installed).
    #[cfg(pcpu_c_abi)]
    pub(super) fn with_installed_zone(zone: Zone<'static>) -> Result<Self, Error> {
        let zone = crate::freebsd::install(zone)?;
        Ok(Self::around(MachineZone::Global(zone)))
    }

    fn around(zone: MachineZone) -> Self {
        let ncpus = match &zone {
            MachineZone::Own(z) => z.ncpus(),
            MachineZone::Global(z) => z.ncpus(),
            MachineZone::Statics(z) => z.zone().ncpus(),
        };
        let cpus: Vec<Mutex<()>> = (0..ncpus).map(|_| Mutex::new(())).collect();
        Machine {
            zone,
            cpus: cpus.into_boxed_slice(),
            handler: AtomicPtr::new(core::ptr::null_mut()),
            handlers_running: AtomicUsize::new(0),
        }
    }

    /// The machine's zone.
    pub fn zone(&self) -> &Zone<'static> {
        match &self.zone {
            MachineZone::Own(zone) => zone,
            MachineZone::Global(zone) => zone,
            MachineZone::Statics(zone) => zone.zone(),
        }
    }

    /// Number of simulated CPUs.
    pub fn ncpus(&self) -> usize {
        self.zone().ncpus()
    }

    /// Allocates a counter in the machine's zone.
    pub fn alloc(&self) -> Result<Counter<'_>, Error> {
        self.zone().alloc()
    }

    /// Takes CPU `cpu` for the calling thread, waiting while another thread holds it, and
    /// points the thread's per-CPU register at the CPU's block. Dropping the result leaves it.
    pub fn bind(&self, cpu: usize) -> Result<Bound<'_>, Error> {
        let base = self.zone().cpu_base(cpu)?;
        if crate::platform::backend::binding().is_some() {
            return Err(Error::AlreadyBound);
        }
        let hold = self.cpus[cpu]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: `base` is this CPU's block of the machine's zone, which outlives the hold.
        unsafe { super::register::bind(base) };
        // The register first, then the binding: a signal that sees the binding finds the
        // register ready.
        let area = self.zone().area() as *const crate::Area as usize;
        crate::platform::backend::set_binding(Some((self as *const Machine as usize, cpu, area)));
        Ok(Bound {
            machine: self,
            cpu,
            _hold: hold,
            _thread: PhantomData,
        })
    }

    /// Runs `f` on CPU `cpu` (see [`bind`](Machine::bind)).
    ///
    /// # Panics
    /// If `cpu` is out of range or the thread already holds a CPU.
    pub fn run_on<R>(&self, cpu: usize, f: impl FnOnce() -> R) -> R {
        let _bound = self
            .bind(cpu)
            .unwrap_or_else(|e| panic!("run_on({cpu}): {e}"));
        f()
    }
}

impl core::fmt::Debug for Machine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Machine")
            .field("zone", self.zone())
            .finish()
    }
}

/// The calling thread's exclusive hold of a simulated CPU. Not `Send`: it is the thread's.
pub struct Bound<'m> {
    machine: &'m Machine,
    cpu: usize,
    _hold: MutexGuard<'m, ()>,
    _thread: PhantomData<*mut ()>,
}

impl<'m> Bound<'m> {
    /// The CPU held.
    pub fn cpu(&self) -> usize {
        self.cpu
    }

    /// Leaves this CPU and takes `cpu` (waiting for it), as a scheduler migrates a thread.
    /// On error the thread holds no CPU.
    pub fn migrate(self, cpu: usize) -> Result<Bound<'m>, Error> {
        let machine = self.machine;
        drop(self);
        machine.bind(cpu)
    }
}

impl core::fmt::Debug for Bound<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Bound").field("cpu", &self.cpu).finish()
    }
}

impl Drop for Bound<'_> {
    fn drop(&mut self) {
        // The binding first, then the register: a signal in between sees no CPU and does not
        // add through a stale register.
        crate::platform::backend::set_binding(None);
        // SAFETY: clears this thread's register; the zone is no longer used through it.
        unsafe { super::register::unbind() };
    }
}

/// A machine that lives for ever, for the unit tests whose zone must be `'static` (an early
/// counter's `init`): leaked, and kept reachable from a static so that Miri's leak check
/// does not report it.
#[cfg(test)]
pub(crate) fn machine_for_ever(ncpus: usize) -> &'static Machine {
    static KEPT: std::sync::Mutex<Vec<&'static Machine>> = std::sync::Mutex::new(Vec::new());
    let machine: &'static Machine = Box::leak(Box::new(Machine::new(ncpus)));
    KEPT.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(machine);
    machine
}

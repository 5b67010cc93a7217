//! Host mode (feature `sim`): simulated CPUs on threads, so `cargo test` runs the real arch
//! primitives.
//!
//! A [`Machine`] has `ncpus` simulated CPUs and a zone with one block per CPU. A thread runs
//! on a simulated CPU only while it holds it exclusively ([`Machine::bind`],
//! [`Machine::run_on`]), as a real CPU runs one thread at a time; a thread asking for a busy
//! CPU waits. Binding points the thread's per-CPU register at the CPU's block: on x86_64
//! Linux the GS base (`arch_prctl(ARCH_SET_GS)`), so counters run the real `add gs:[off]`.
//! Simulated CPUs may outnumber the host's cores.
//!
//! Migration is leaving one CPU and taking another ([`Bound::migrate`]). Simulated
//! interrupts are signals: [`Machine::with_interrupt_handler`] names a handler that runs on
//! the interrupted thread, on the simulated CPU it holds, and [`interrupt_storm`] fires them
//! at a thread as fast as the host can while it works. Local protection (the platform hook
//! behind `counter_enter` and the fallback paths) blocks them, as disabling interrupts would.

mod interrupt;
mod machine;

pub use interrupt::{interrupt_storm, missed_interrupts, Storm};
pub use machine::{Bound, Machine};

#[cfg(test)]
pub(crate) use interrupt::interrupts_blocked;
pub(crate) use interrupt::{protect, unprotect, ProtectState};
#[cfg(test)]
pub(crate) use machine::machine_for_ever;

/// Test controls of the i386 primitives: the no-CX8 path on a CPU with CX8
/// ([`force_no_cx8`](i386::force_no_cx8); the environment variable `PCPU_COUNTER_FORCE_NO_CX8`
/// does the same from the start), the CX8 loop's retries, and how binding sets `%fs` here.
#[cfg(target_arch = "x86")]
pub mod i386 {
    pub use crate::arch::imp::{add_counting_retries, force_no_cx8, host_fs_mechanism};
}

/// Test controls of the aarch64 primitives: the LL/SC loop's retries.
#[cfg(target_arch = "aarch64")]
pub mod aarch64 {
    pub use crate::arch::imp::add_counting_retries;
}

use core::cell::Cell;

std::thread_local! {
    /// The machine and CPU this thread holds: `(machine address, cpu)`, or `(0, 0)`.
    /// Read from signal handlers, so a plain `Cell` with a const initialiser.
    static BINDING: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    /// The area (its address) of the machine this thread holds a CPU of, or 0: what the add
    /// path's check compares with the counter's area.
    static BOUND_AREA: Cell<usize> = const { Cell::new(0) };
}

/// The machine (by address) and CPU the calling thread holds, if any.
pub(crate) fn binding() -> Option<(usize, usize)> {
    let (machine, cpu) = BINDING.with(Cell::get);
    (machine != 0).then_some((machine, cpu))
}

/// Records the machine, CPU and area the thread holds (or none).
pub(crate) fn set_binding(value: Option<(usize, usize, usize)>) {
    let (machine, cpu, area) = value.unwrap_or((0, 0, 0));
    BINDING.with(|b| b.set((machine, cpu)));
    BOUND_AREA.with(|a| a.set(area));
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// The simulated CPU the calling thread holds, if any.
pub fn current_cpu_checked() -> Option<usize> {
    binding().map(|(_, cpu)| cpu)
}

/// The platform's `current_cpu` under simulation: panics on a thread that holds no CPU.
pub(crate) fn current_cpu() -> usize {
    current_cpu_checked().unwrap_or_else(|| no_cpu())
}

/// The add path's check, in release builds too: the thread must hold a CPU of the counter's
/// machine. An ordinary thread's per-CPU register points nowhere (on x86_64 its GS base is 0),
/// and each machine is an area of its own, so without the check an add would fault or change
/// another machine's counter at the same offset. Binding records the machine's area in a
/// thread-local; the check compares it with the counter's: one thread-local load and a
/// compare (its cost is in `cargo xtask bench`).
#[inline(always)]
pub(crate) fn check_area(area: &crate::Area) {
    check_area_tag(area as *const crate::Area as usize)
}

/// [`check_area`] with the area's address.
#[inline(always)]
pub(crate) fn check_area_tag(area: usize) {
    if BOUND_AREA.with(Cell::get) != area {
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
    if binding().is_none() {
        no_cpu();
    }
    panic!(
        "pcpu-counter: add on a thread that holds no simulated CPU of this counter's machine \
         (it holds a CPU of another machine, or the counter's zone belongs to no machine)"
    )
}

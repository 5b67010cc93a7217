//! Host mode (feature `std`): simulated CPUs on threads, so `cargo test` runs the real arch
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

pub(crate) use interrupt::{protect, unprotect, ProtectState};

use core::cell::Cell;

std::thread_local! {
    /// The machine and CPU this thread holds: `(machine address, cpu)`, or `(0, 0)`.
    /// Read from signal handlers, so a plain `Cell` with a const initialiser.
    static BINDING: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// The machine (by address) and CPU the calling thread holds, if any.
pub(crate) fn binding() -> Option<(usize, usize)> {
    let (machine, cpu) = BINDING.with(Cell::get);
    (machine != 0).then_some((machine, cpu))
}

pub(crate) fn set_binding(value: Option<(usize, usize)>) {
    BINDING.with(|b| b.set(value.unwrap_or((0, 0))));
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// The simulated CPU the calling thread holds, if any.
pub fn current_cpu_checked() -> Option<usize> {
    binding().map(|(_, cpu)| cpu)
}

/// The platform's `current_cpu` under simulation: panics on a thread that holds no CPU.
pub(crate) fn current_cpu() -> usize {
    current_cpu_checked().expect("pcpu-counter: this thread is not bound to a simulated CPU")
}

/// Debug check on the add path: the thread must hold a CPU of the counter's machine, or the
/// add would land in another zone's memory.
#[cfg(debug_assertions)]
#[inline]
pub(crate) fn debug_check_binding(zone: &crate::Zone<'_>) {
    let held = binding().map(|(machine, _)| machine::zone_of(machine));
    assert!(
        held == Some(zone as *const crate::Zone<'_> as usize),
        "pcpu-counter: add on a thread that holds no simulated CPU of this counter's machine"
    );
}

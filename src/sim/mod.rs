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

/// The add path's check, in release builds too: the thread must hold a CPU of the counter's
/// machine. Each machine is an area of its own, so otherwise the thread's per-CPU register
/// points at another machine's blocks, and the add would silently change that machine's
/// counter at the same offset. Every block of a machine starts with its area's address (the
/// tag); the check reads it through the per-CPU register (`gs:[0]` on x86_64) and compares:
/// one load and a compare (its cost is in `cargo xtask bench`).
#[inline(always)]
pub(crate) fn check_area(area: &crate::Area) {
    check_area_tag(area as *const crate::Area as usize)
}

/// [`check_area`] with the area's address.
#[inline(always)]
pub(crate) fn check_area_tag(area: usize) {
    #[cfg(debug_assertions)]
    if binding().is_none() {
        wrong_area();
    }
    // SAFETY: a thread that adds holds a simulated CPU (the simulation's contract, checked
    // above in debug builds): its register points at a block whose first word is the tag.
    if unsafe { crate::arch::host_block_tag() } != area {
        wrong_area()
    }
}

#[cold]
#[inline(never)]
fn wrong_area() -> ! {
    if binding().is_none() {
        panic!("pcpu-counter: add on a thread that holds no simulated CPU");
    }
    panic!(
        "pcpu-counter: add on a thread that holds no simulated CPU of this counter's machine \
         (its per-CPU register points at another machine's area)"
    )
}

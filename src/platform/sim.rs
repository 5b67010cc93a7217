// SPDX-License-Identifier: BSD-2-Clause
//! The simulation's backend (feature `sim`, `cfg pcpu_hosted_cpus`): its CPUs are host
//! threads, and each of the platform's questions is answered from the calling thread's state,
//! a thread-local read, inline: the current CPU, its per-CPU base, local protection (it blocks
//! simulated interrupts), the add's check, and where a zone's area lives.
//!
//! The harness (`src/sim/`: machines, interrupts, binding a thread's register) sits on top and
//! writes the thread's state kept here through [`set_binding`] and [`set_cpu_base`]; this file
//! imports nothing of the crate but the area's type, so the product never imports the harness.

use core::cell::Cell;

/// The signal that plays the interrupt line.
pub(crate) const IRQ: libc::c_int = libc::SIGUSR1;

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

/// Records the machine, CPU and area the thread holds (or none). A simulated interrupt runs
/// its handler only while the binding is set, and the handler's adds check the area: so the
/// area is set before the binding and cleared after it (a signal between the two stores
/// otherwise finds a binding whose area is not there yet, and its add panics in the handler).
pub(crate) fn set_binding(value: Option<(usize, usize, usize)>) {
    use core::sync::atomic::{compiler_fence, Ordering::SeqCst};
    match value {
        Some((machine, cpu, area)) => {
            BOUND_AREA.with(|a| a.set(area));
            compiler_fence(SeqCst);
            BINDING.with(|b| b.set((machine, cpu)));
        }
        None => {
            BINDING.with(|b| b.set((0, 0)));
            compiler_fence(SeqCst);
            BOUND_AREA.with(|a| a.set(0));
        }
    }
    compiler_fence(SeqCst);
}

/// The simulated CPU the calling thread holds, if any.
pub fn current_cpu_checked() -> Option<usize> {
    binding().map(|(_, cpu)| cpu)
}

std::thread_local! {
    /// The bound CPU's per-CPU base, or 0. Read from signal handlers: a const-initialised
    /// `Cell`.
    static BASE: Cell<usize> = const { Cell::new(0) };
}

/// The platform's current CPU under simulation: panics on a thread that holds no CPU.
// Asked by the C ABI and the portable fallback.
#[allow(dead_code)]
pub(crate) fn current_cpu() -> usize {
    current_cpu_checked().unwrap_or_else(|| no_cpu())
}

/// The bound CPU's per-CPU base (its block of the machine's zone), where the arch takes the
/// base from the platform: aarch64 and riscv64, whose registers a host thread cannot own, and
/// the portable fallback. Every add asks [`check_add`] first, which refuses a thread that
/// holds no CPU of the counter's machine: the base read here is then that CPU's.
#[inline(always)]
pub(crate) fn cpu_base() -> usize {
    BASE.with(Cell::get)
}

/// Records the bound CPU's base (0: none), for [`cpu_base`].
pub(crate) fn set_cpu_base(base: usize) {
    BASE.with(|b| b.set(base));
}

/// What the bound CPU's per-CPU register holds, for the bring-up check: the simulation's
/// record of it ([`cpu_base`]), set with the register itself.
pub(crate) fn simulated_register() -> Option<usize> {
    Some(cpu_base())
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
    if BOUND_AREA.with(Cell::get) != area as *const crate::area::Area as usize {
        wrong_area()
    }
}

/// Before every add to a per-CPU static: the thread holds a CPU of the machine whose
/// copies are installed (`area`, its address), or, before any install (0), holds none (its
/// register is 0 and the add reaches the template, as a kernel's boot CPU before bring-up).
/// One thread-local load and a compare, as [`check_add`].
#[inline(always)]
pub(crate) fn check_static_add(area: usize) {
    if BOUND_AREA.with(Cell::get) != area {
        wrong_static_area(area)
    }
}

#[cold]
#[inline(never)]
fn wrong_static_area(area: usize) -> ! {
    if area != 0 {
        wrong_area()
    }
    panic!(
        "pcpu-counter: a per-CPU static's add on a simulated CPU while no machine holds the \
         statics (make the machine with Machine::with_statics)"
    )
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

/// What leaving local protection needs: whether the interrupt signal was already blocked
/// before the matching [`acquire`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct State {
    was_blocked: bool,
}

cfg_if::cfg_if! {
    if #[cfg(miri)] {
        // Under Miri (`cargo xtask verify`'s miri step) there are no signals: Miri has no
        // `sigaction`, `pthread_kill` or `pthread_sigmask`. No simulated interrupt can
        // arrive, so local protection has nothing to mask; it keeps the nesting depth of the
        // thread's protected sections instead, so that the nesting rules (an inner exit keeps
        // the protection, the outermost releases it) stay checked. `interrupt_storm` and the
        // interrupt tests do not run under Miri.
        std::thread_local! {
            /// This thread's protected sections currently open.
            static DEPTH: Cell<usize> = const { Cell::new(0) };
        }

        /// Local protection under simulation (Miri: no interrupts; counts the nesting).
        pub(crate) fn acquire() -> State {
            let depth = DEPTH.with(Cell::get);
            DEPTH.with(|d| d.set(depth + 1));
            State { was_blocked: depth > 0 }
        }

        /// Leaves local protection (Miri: closes one level of the nesting).
        ///
        /// # Safety
        /// `state` is from the matching `acquire` on this thread, released in LIFO order.
        pub(crate) unsafe fn release(state: State) {
            let depth = DEPTH.with(Cell::get);
            debug_assert!(depth > 0 && state.was_blocked == (depth > 1));
            DEPTH.with(|d| d.set(depth - 1));
        }

        /// Whether this thread is inside local protection (what the nesting tests check).
        #[cfg(test)]
        pub(crate) fn interrupts_blocked() -> bool {
            DEPTH.with(Cell::get) > 0
        }
    } else {
        fn irq_set() -> libc::sigset_t {
            // SAFETY: sigemptyset initialises the set before sigaddset uses it.
            unsafe {
                let mut set: libc::sigset_t = core::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, IRQ);
                set
            }
        }

        /// Local protection under simulation: blocks simulated interrupts on this thread.
        /// Nests.
        pub(crate) fn acquire() -> State {
            let set = irq_set();
            // SAFETY: zeroed is a valid sigset_t to receive the old mask.
            let mut old: libc::sigset_t = unsafe { core::mem::zeroed() };
            // SAFETY: both sets are valid; this only changes the calling thread's mask.
            let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
            debug_assert_eq!(rc, 0);
            // SAFETY: `old` was filled in by pthread_sigmask.
            let was_blocked = unsafe { libc::sigismember(&old, IRQ) } == 1;
            State { was_blocked }
        }

        /// Leaves local protection: unblocks simulated interrupts unless an outer
        /// `acquire` holds.
        ///
        /// # Safety
        /// `state` is from the matching `acquire` on this thread, released in LIFO order.
        pub(crate) unsafe fn release(state: State) {
            if !state.was_blocked {
                let set = irq_set();
                // SAFETY: valid set; this only changes the calling thread's mask.
                let rc = unsafe {
                    libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, core::ptr::null_mut())
                };
                debug_assert_eq!(rc, 0);
            }
        }

        /// Whether the simulated interrupt is blocked on this thread (what protection does).
        #[cfg(test)]
        pub(crate) fn interrupts_blocked() -> bool {
            // SAFETY: zeroed is a valid sigset_t to receive the mask; a null new set only
            // queries.
            unsafe {
                let mut now: libc::sigset_t = core::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, core::ptr::null(), &mut now);
                libc::sigismember(&now, IRQ) == 1
            }
        }
    }
}

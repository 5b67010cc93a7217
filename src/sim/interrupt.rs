// SPDX-License-Identifier: BSD-2-Clause
//! Simulated interrupts (a signal delivered to the thread on a simulated CPU) and the local
//! protection that masks them.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::machine::{HandlerSlot, Machine};

use crate::platform::backend::IRQ;
use crate::platform::Protection;

std::thread_local! {
    /// Interrupts this thread took (whether or not a handler ran).
    static TAKEN: Cell<u64> = const { Cell::new(0) };
    /// Interrupts that ran a handler on this thread: they landed while it held a simulated
    /// CPU of a machine with a handler. The count storms wait on (see [`interrupt_storm_until`]).
    static HANDLED: Cell<u64> = const { Cell::new(0) };
}

/// Interrupts that arrived on a thread holding no simulated CPU, so no handler ran.
static MISSED: AtomicU64 = AtomicU64::new(0);

#[cfg(not(miri))]
extern "C" fn on_irq(_signal: libc::c_int) {
    // SAFETY: errno is thread-local; it is saved and restored around the handler.
    let errno = unsafe { *libc::__errno_location() };
    TAKEN.with(|t| t.set(t.get() + 1));
    match crate::platform::backend::binding() {
        Some((machine, cpu)) => {
            // SAFETY: a binding exists only while its `Bound` borrows the machine.
            let machine = unsafe { &*(machine as *const Machine) };
            machine.handlers_running.fetch_add(1, Ordering::SeqCst);
            let handler = machine.handler.load(Ordering::SeqCst);
            if !handler.is_null() {
                // SAFETY: `with_interrupt_handler` keeps the handler alive until it has seen
                // `handlers_running` at 0 after clearing the pointer.
                unsafe { (*handler)(cpu) };
                HANDLED.with(|h| h.set(h.get() + 1));
            }
            machine.handlers_running.fetch_sub(1, Ordering::SeqCst);
        }
        None => {
            MISSED.fetch_add(1, Ordering::Relaxed);
        }
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Installs the simulated interrupt's signal handler, once per process.
#[cfg(not(miri))]
fn install_irq_handler() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction with a handler, SA_RESTART and an empty mask is valid;
        // `on_irq` only touches thread-locals with const initialisers and atomics.
        unsafe {
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = on_irq as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            let rc = libc::sigaction(IRQ, &action, core::ptr::null_mut());
            assert_eq!(rc, 0, "sigaction: {}", std::io::Error::last_os_error());
        }
    });
}

/// Under Miri there are no signals (see `platform::backend::acquire`): a handler may be
/// named, but no simulated interrupt ever calls it.
#[cfg(miri)]
fn install_irq_handler() {}

/// Interrupts taken by threads that held no simulated CPU at the time (no handler ran).
pub fn missed_interrupts() -> u64 {
    MISSED.load(Ordering::Relaxed)
}

impl Machine {
    /// Runs `body` with `handler` as this machine's interrupt handler: every simulated
    /// interrupt that hits a thread holding one of this machine's CPUs calls
    /// `handler(cpu)` on that thread, in signal context (so it must not allocate or lock).
    ///
    /// # Panics
    /// If the machine already has a handler (calls do not nest).
    pub fn with_interrupt_handler<R>(
        &self,
        handler: &(dyn Fn(usize) + Sync),
        body: impl FnOnce() -> R,
    ) -> R {
        install_irq_handler();
        let fat: &(dyn Fn(usize) + Sync) = handler;
        // SAFETY: only the lifetime changes; `Clear` below takes the pointer away and waits
        // for running handlers before `fat` goes out of scope, even when `body` panics.
        let fat: &'static (dyn Fn(usize) + Sync) = unsafe { core::mem::transmute(fat) };
        let slot = &fat as *const &'static (dyn Fn(usize) + Sync) as *mut _;
        let installed = self.handler.compare_exchange(
            core::ptr::null_mut(),
            slot,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        assert!(
            installed.is_ok(),
            "with_interrupt_handler: the machine already has a handler"
        );

        struct Clear<'a>(&'a HandlerSlot, &'a core::sync::atomic::AtomicUsize);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.store(core::ptr::null_mut(), Ordering::SeqCst);
                while self.1.load(Ordering::SeqCst) != 0 {
                    core::hint::spin_loop();
                }
            }
        }
        let _clear = Clear(&self.handler, &self.handlers_running);
        body()
    }
}

/// Interrupts that ran a handler on the calling thread so far (in all its storms): those that
/// landed while it held a simulated CPU of a machine with a handler.
pub fn interrupts_handled() -> u64 {
    HANDLED.with(Cell::get)
}

/// What an [`interrupt_storm`] did (or has done so far, as [`interrupt_storm_until`] shows it
/// to each step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Storm {
    /// Signals sent to the working thread.
    pub raised: u64,
    /// Interrupts the working thread took (signals that arrive while one is pending merge),
    /// whether or not a handler ran: one that lands while the thread holds no simulated CPU
    /// runs none.
    pub taken: u64,
    /// Interrupts that ran a handler on the working thread: it held a simulated CPU of a
    /// machine with a handler when they landed. The event a test waits for; `raised` and
    /// `taken` are not (on a loaded machine they land between `run_on` calls, or not at all
    /// while the raiser waits for a core).
    pub handled: u64,
}

/// Runs `work` on the calling thread while another thread interrupts it as fast as it can.
///
/// Handlers run as [`Machine::with_interrupt_handler`] set them up, on the simulated CPU the
/// thread holds when each interrupt lands. The storm stops, and every interrupt has been taken
/// or merged, before this returns. How many interrupts land is up to the host's scheduler
/// (none, on a loaded machine, during a short `work`): a test that needs interrupts handled
/// uses [`interrupt_storm_until`], which waits for them by count.
///
/// # Panics
/// Under Miri, which cannot send or take signals.
pub fn interrupt_storm<R>(work: impl FnOnce() -> R) -> (R, Storm) {
    storm(|_| work())
}

/// Runs `step` again and again on the calling thread under one interrupt storm, until it
/// returns `true` or `max_steps` steps ran; returns the steps run and the storm.
///
/// Each step gets the storm so far, so it can stop once the event it needs has happened,
/// counted: [`Storm::handled`] (interrupts that ran a handler on this thread), or a count of
/// its own. A step that saw no interrupt handled yields the core: on a loaded machine the
/// thread raising them may be waiting for it. `max_steps` is not a time: it only turns a
/// storm that can never deliver into a failure (the caller checks its count) instead of a
/// hang, so make it far more steps than an idle machine needs.
///
/// Run it on a thread that holds a simulated CPU for the whole storm (inside
/// [`Machine::run_on`] or a [`Machine::bind`]): an interrupt that lands while the thread holds
/// none runs no handler, and the yields between steps, where a starved raiser gets the core,
/// are where most interrupts land on a loaded machine.
///
/// # Panics
/// Under Miri, which cannot send or take signals.
pub fn interrupt_storm_until(max_steps: u64, mut step: impl FnMut(&Storm) -> bool) -> (u64, Storm) {
    let (steps, storm) = storm(|so_far| {
        let mut steps = 0;
        while steps < max_steps {
            let before = so_far();
            if step(&before) {
                break;
            }
            steps += 1;
            if so_far().handled == before.handled {
                std::thread::yield_now();
            }
        }
        steps
    });
    (steps, storm)
}

/// Runs `step` again and again on the calling thread under one interrupt storm, never yielding
/// the core between steps, until it returns `true` (the event it waits for has been counted)
/// or `cap` has passed; returns the steps run, the storm, and whether `step` returned `true`.
///
/// For a test whose event is an interrupt landing *inside* `step`, between two given
/// instructions (a retry of an add loop, a loss in a racy add), not merely one handled. Such
/// interrupts arrive only where the thread is stopped mid-`step`: a signal sent while the thread
/// runs on another core (an IPI stops it at whatever instruction it is at), or one sent while it
/// was preempted, which is delivered as the thread resumes at the instruction where the tick
/// stopped it. [`interrupt_storm_until`] yields the core after a step that saw no interrupt
/// handled, and on a loaded machine that yield is where every interrupt lands: the thread is
/// off the core for milliseconds while the raiser runs, the signal waits, and it is delivered
/// on the return from `sched_yield`, outside `step`; the step itself (microseconds) is then
/// too short for a tick or a concurrent raise ever to hit it (one interrupt per step, none
/// inside). Without the yield the thread runs whole time slices of steps and is stopped inside
/// them.
///
/// `cap` is not a measure of the event: it only turns a storm that can never deliver into a
/// failure instead of a hang, so make it minutes; the caller's message for a storm that ran
/// out should name the host's load ([`host_load`]).
///
/// Run it on a thread that holds a simulated CPU for the whole storm (inside
/// [`Machine::run_on`] or a [`Machine::bind`]).
///
/// # Panics
/// Under Miri, which cannot send or take signals.
pub fn interrupt_storm_inside(
    cap: std::time::Duration,
    mut step: impl FnMut(&Storm) -> bool,
) -> (u64, Storm, bool) {
    let started = std::time::Instant::now();
    let ((steps, done), storm) = storm(|so_far| {
        let mut steps = 0;
        loop {
            if step(&so_far()) {
                return (steps, true);
            }
            steps += 1;
            if started.elapsed() >= cap {
                return (steps, false);
            }
        }
    });
    (steps, storm, done)
}

/// The host's load, for the message of a test that waited for an event in vain: `load average
/// 6.02 5.51 3.20 on 2 cores` (`/proc/loadavg`, and the cores this process may run on).
pub fn host_load() -> std::string::String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    match std::fs::read_to_string("/proc/loadavg") {
        Ok(text) => {
            let averages: std::vec::Vec<&str> = text.split_whitespace().take(3).collect();
            std::format!("load average {} on {cores} cores", averages.join(" "))
        }
        Err(e) => std::format!("load average unknown (/proc/loadavg: {e}) on {cores} cores"),
    }
}

/// The storm itself: `work` gets a function that reads the storm so far.
fn storm<R>(work: impl FnOnce(&dyn Fn() -> Storm) -> R) -> (R, Storm) {
    if cfg!(miri) {
        panic!("interrupt_storm: simulated interrupts are signals, which Miri does not support");
    }
    install_irq_handler();
    // SAFETY: pthread_self has no preconditions.
    let target = unsafe { libc::pthread_self() };
    let stop = AtomicBool::new(false);
    let raised = AtomicU64::new(0);
    let (taken_before, handled_before) = (TAKEN.with(Cell::get), HANDLED.with(Cell::get));
    let so_far = || {
        // The counts are written by the signal handler on this thread: read them afresh.
        core::sync::atomic::compiler_fence(Ordering::SeqCst);
        Storm {
            raised: raised.load(Ordering::Relaxed),
            taken: TAKEN.with(Cell::get) - taken_before,
            handled: HANDLED.with(Cell::get) - handled_before,
        }
    };
    let result = std::thread::scope(|s| {
        let raiser = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: `target` is the thread running `work`, which stays alive (it joins
                // this thread below) until `stop` is set and this loop has ended.
                let rc = unsafe { libc::pthread_kill(target, IRQ) };
                assert_eq!(rc, 0, "pthread_kill failed");
                raised.fetch_add(1, Ordering::Release);
                // On a core it shares with the target, give the target the core to take this
                // one (signals raised while one is pending merge); alone on a core, this returns
                // at once.
                std::thread::yield_now();
            }
        });
        // The storm is on before the work starts.
        while raised.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        let result = work(&so_far);
        stop.store(true, Ordering::Relaxed);
        raiser.join().expect("interrupt raiser panicked");
        result
    });
    // A signal still pending is taken at the latest when it is unblocked; make sure it is by
    // passing through a point where it is deliverable.
    drop(Protection::acquire());
    (result, so_far())
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU64;

    /// Local protection under simulation really masks the interrupt, and nests: a storm run
    /// entirely inside two `Protection`s raises at least once (it starts its work only after
    /// the first raise) and runs no handler; the inner release keeps the mask; the outer one takes
    /// the pending interrupt. Every step is an event, none a time.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "simulated interrupts are signals, which Miri does not support"
    )]
    fn protect_masks_simulated_interrupts_and_nests() {
        let machine = Machine::new(1);
        let handled = AtomicU64::new(0);
        let handler = |_cpu: usize| {
            handled.fetch_add(1, Ordering::Relaxed);
        };
        machine.with_interrupt_handler(&handler, || {
            machine.run_on(0, || {
                let outer = Protection::acquire();
                let inner = Protection::acquire();
                let ((), storm) = interrupt_storm(|| {
                    (0..100_000u64).for_each(|i| {
                        core::hint::black_box(i);
                    })
                });
                assert!(storm.raised > 0, "the storm raised nothing");
                assert_eq!(
                    (storm.taken, storm.handled),
                    (0, 0),
                    "taken under protection"
                );
                drop(inner);
                assert_eq!(
                    handled.load(Ordering::Relaxed),
                    0,
                    "the inner release unmasked"
                );
                let before = interrupts_handled();
                drop(outer);
                // The interrupt raised under protection is taken as the mask lifts.
                assert!(
                    handled.load(Ordering::Relaxed) > 0,
                    "the pending interrupt was lost"
                );
                assert_eq!(
                    interrupts_handled() - before,
                    handled.load(Ordering::Relaxed)
                );
            })
        });
    }
}

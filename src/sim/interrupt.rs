// SPDX-License-Identifier: BSD-2-Clause
//! Simulated interrupts (a signal delivered to the thread on a simulated CPU) and the local
//! protection that masks them.

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::machine::{HandlerSlot, Machine};

use super::host::{protect, unprotect, IRQ};

std::thread_local! {
    /// Interrupts this thread took (whether or not a handler ran).
    static TAKEN: Cell<u64> = const { Cell::new(0) };
}

/// Interrupts that arrived on a thread holding no simulated CPU, so no handler ran.
static MISSED: AtomicU64 = AtomicU64::new(0);

#[cfg(not(miri))]
extern "C" fn on_irq(_signal: libc::c_int) {
    // SAFETY: errno is thread-local; it is saved and restored around the handler.
    let errno = unsafe { *libc::__errno_location() };
    TAKEN.with(|t| t.set(t.get() + 1));
    match super::host::binding() {
        Some((machine, cpu)) => {
            // SAFETY: a binding exists only while its `Bound` borrows the machine.
            let machine = unsafe { &*(machine as *const Machine) };
            machine.handlers_running.fetch_add(1, Ordering::SeqCst);
            let handler = machine.handler.load(Ordering::SeqCst);
            if !handler.is_null() {
                // SAFETY: `with_interrupt_handler` keeps the handler alive until it has seen
                // `handlers_running` at 0 after clearing the pointer.
                unsafe { (*handler)(cpu) };
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

/// Under Miri there are no signals (see `protect`): a handler may be named, but no simulated
/// interrupt ever calls it.
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

/// What an [`interrupt_storm`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Storm {
    /// Signals sent to the working thread.
    pub raised: u64,
    /// Interrupts the working thread took (signals that arrive while one is pending merge).
    pub taken: u64,
}

/// Runs `work` on the calling thread while another thread interrupts it as fast as it can.
///
/// Handlers run as [`Machine::with_interrupt_handler`] set them up, on the simulated CPU the
/// thread holds when each interrupt lands. The storm stops, and every interrupt has been taken
/// or merged, before this returns.
///
/// # Panics
/// Under Miri, which cannot send or take signals.
pub fn interrupt_storm<R>(work: impl FnOnce() -> R) -> (R, Storm) {
    if cfg!(miri) {
        panic!("interrupt_storm: simulated interrupts are signals, which Miri does not support");
    }
    install_irq_handler();
    // SAFETY: pthread_self has no preconditions.
    let target = unsafe { libc::pthread_self() };
    let stop = AtomicBool::new(false);
    let started = AtomicBool::new(false);
    let taken_before = TAKEN.with(Cell::get);
    let (result, raised) = std::thread::scope(|s| {
        let raiser = s.spawn(|| {
            let mut raised = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: `target` is the thread running `work`, which stays alive (it joins
                // this thread below) until `stop` is set and this loop has ended.
                let rc = unsafe { libc::pthread_kill(target, IRQ) };
                assert_eq!(rc, 0, "pthread_kill failed");
                raised += 1;
                started.store(true, Ordering::Release);
            }
            raised
        });
        // The storm is on before the work starts.
        while !started.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let result = work();
        stop.store(true, Ordering::Relaxed);
        (result, raiser.join().expect("interrupt raiser panicked"))
    });
    // A signal still pending is taken at the latest when it is unblocked; make sure it is by
    // passing through a point where it is deliverable.
    let state = protect();
    // SAFETY: the matching `protect` just above.
    unsafe { unprotect(state) };
    let taken = TAKEN.with(Cell::get) - taken_before;
    (result, Storm { raised, taken })
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU64;

    /// Local protection under simulation really masks the interrupt, and nests.
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
        let spin = || {
            (0..300_000u64).for_each(|i| {
                core::hint::black_box(i);
            })
        };
        machine.with_interrupt_handler(&handler, || {
            machine.run_on(0, || {
                let ((masked, unmasked), _) = interrupt_storm(|| {
                    let outer = protect();
                    let inner = protect();
                    let before = handled.load(Ordering::Relaxed);
                    spin();
                    // SAFETY: LIFO release of the two `protect`s above.
                    unsafe { unprotect(inner) };
                    spin(); // still inside `outer`
                    let masked = handled.load(Ordering::Relaxed) - before;
                    // SAFETY: as above.
                    unsafe { unprotect(outer) };
                    // Unmasked, an interrupt lands soon (bounded, in case the raiser starves).
                    let before = handled.load(Ordering::Relaxed);
                    let mut spins = 0u64;
                    while handled.load(Ordering::Relaxed) == before && spins < 4_000_000_000 {
                        spins = core::hint::black_box(spins + 1);
                    }
                    (masked, handled.load(Ordering::Relaxed) - before)
                });
                assert_eq!(masked, 0, "an interrupt ran under protection");
                assert!(
                    unmasked > 0,
                    "no interrupt landed while unmasked: the test proves nothing"
                );
            })
        });
    }
}

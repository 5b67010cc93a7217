//! Simulated interrupts: a handler adds to the same counters, on the same CPU, while the
//! interrupted thread is adding. Nothing may be lost; a racy add must be caught.

mod common;

use pcpu_counter::sim::{interrupt_storm_until, Machine, Storm};
use std::sync::atomic::{AtomicU64, Ordering};

/// Only turns a storm that never delivers into a failure instead of a hang: runs need a few
/// dozen steps idle, and a few hundred under load.
const MAX_STEPS: u64 = 200_000;

/// On every CPU of `machine` at once, a thread under an interrupt storm calls `add` until the
/// handler (which calls `add` too) has run at least its share of `min_handled` times on that
/// CPU. Returns (adds the threads made, handler runs, interrupts taken).
///
/// The wait is for interrupts that ran the handler ([`Storm::handled`]), counted, not for
/// interrupts raised or taken, nor for a time: on a loaded machine the thread raising them
/// may wait for a core, and each step that saw none handled yields it
/// ([`interrupt_storm_until`]).
fn storm_on_every_cpu(
    machine: &Machine,
    min_handled: u64,
    add: &(dyn Fn() + Sync),
) -> (u64, u64, u64) {
    const STEP: u64 = 10_000;
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        add();
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let share = min_handled.div_ceil(machine.ncpus() as u64);
    let work = || {
        let mut adds = 0;
        let (_, storm) = interrupt_storm_until(MAX_STEPS, |storm| {
            if storm.handled >= share {
                return true;
            }
            (0..STEP).for_each(|_| add());
            adds += STEP;
            false
        });
        (adds, storm)
    };
    let storms: Vec<(u64, Storm)> = machine.with_interrupt_handler(&handler, || {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..machine.ncpus())
                .map(|cpu| {
                    let work = &work;
                    s.spawn(move || machine.run_on(cpu, work))
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        })
    });
    let handled = handled.into_inner();
    let adds = storms.iter().map(|(adds, _)| adds).sum();
    let taken = storms.iter().map(|(_, storm)| storm.taken).sum();
    let per_cpu: Vec<u64> = storms.iter().map(|(_, storm)| storm.handled).collect();
    assert_eq!(
        per_cpu.iter().sum::<u64>(),
        handled,
        "the storms' handled interrupts are the handler's runs"
    );
    assert!(
        per_cpu.iter().all(|&h| h >= share),
        "interrupts handled per CPU {per_cpu:?} in {adds} adds, wanted {share} each: the storm proves nothing"
    );
    println!("{handled} interrupts handled ({per_cpu:?} per CPU) in {adds} adds");
    (adds, handled, taken)
}

#[test]
fn handler_adds_interleave_exactly() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let (adds, handled, taken) = storm_on_every_cpu(&machine, 2_000, &|| c.inc());
    assert_eq!(
        handled, taken,
        "every interrupt taken on a bound thread runs the handler"
    );
    assert_eq!(c.fetch(), adds + handled);
}

/// Under `counter_enter` (where the arch's add needs protection) no interrupt runs a handler,
/// and one raised meanwhile runs at `counter_exit`. The guard is held until the storm has
/// raised an interrupt after it was taken (a count of raises, not a time).
#[test]
fn protection_masks_interrupts() {
    const STEP: u64 = 1_000;
    let machine = Machine::new(1);
    let c = machine.alloc().unwrap();
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let (mut held, mut inside, mut adds, mut done) = (false, 0, 0u64, false);
    let storm = machine.with_interrupt_handler(&handler, || {
        machine.run_on(0, || {
            let mut guard = None;
            // The storm's raises as first seen with the guard held.
            let mut raised_under_guard = None;
            let mut before = 0;
            let (_, storm) = interrupt_storm_until(MAX_STEPS, |storm| {
                match (&guard, raised_under_guard) {
                    (None, _) => {
                        let g = pcpu_counter::freebsd::counter_enter();
                        held = g.holds_protection();
                        before = handled.load(Ordering::Relaxed);
                        guard = Some(g);
                    }
                    (Some(_), None) => raised_under_guard = Some(storm.raised),
                    // Raise number `r + 2` began after raise `r + 1` ended, which was after
                    // `r` was read with the guard held: it was raised under the guard.
                    (Some(_), Some(r)) if storm.raised >= r + 2 => {
                        inside = handled.load(Ordering::Relaxed) - before;
                        pcpu_counter::freebsd::counter_exit(guard.take().unwrap());
                        done = true;
                        return true;
                    }
                    (Some(_), Some(_)) => {}
                }
                let g = guard.as_ref().unwrap();
                (0..STEP).for_each(|_| c.add_protected(g, 1));
                adds += STEP;
                false
            });
            storm
        })
    });
    assert!(done, "no interrupt raised under the guard in {adds} adds");
    if held {
        assert_eq!(
            inside, 0,
            "an interrupt ran inside counter_enter/counter_exit"
        );
    } else {
        // The arch's add needs no protection (x86_64, aarch64, i386 with CX8).
        assert!(!pcpu_counter::arch::NAME.starts_with("portable"));
    }
    assert!(
        storm.handled > 0,
        "the interrupt raised under the guard never ran: {storm:?}"
    );
    assert_eq!(c.fetch(), adds);
}

/// The same storm against a per-CPU add split into load, add and store (no single
/// instruction, no protection) loses the handler's adds: the test can fail.
#[cfg(target_arch = "x86_64")]
#[test]
fn storm_catches_a_racy_per_cpu_add() {
    // The storm runs until the count shows a loss (common::assert_storm_catches_racy_add: no
    // yield between steps, so interrupts land inside the adds however loaded the machine is).
    common::assert_storm_catches_racy_add(|off, _slot| {
        // SAFETY: the thread holds CPU 0 of the helper's machine, so gs:[off] is that CPU's
        // slot of its counter; the load/add/store split is the deliberate bug.
        unsafe {
            core::arch::asm!(
                "mov {t}, qword ptr gs:[{off}]",
                "add {t}, 1",
                "mov qword ptr gs:[{off}], {t}",
                off = in(reg) off,
                t = out(reg) _,
                options(nostack),
            )
        }
    });
}

/// Threads alone cannot break that racy add, because a simulated CPU runs one thread at a
/// time: only interrupts can. This shows the CPUs really are exclusive.
#[cfg(target_arch = "x86_64")]
#[test]
fn simulated_cpus_are_exclusive() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let off = c.offset();
    std::thread::scope(|s| {
        for t in 0..6 {
            let machine = &machine;
            s.spawn(move || {
                for round in 0..200 {
                    let _cpu = machine.bind((t + round) % 2).unwrap();
                    for _ in 0..500 {
                        // SAFETY: as in the test above, without interrupts.
                        unsafe {
                            core::arch::asm!(
                                "mov {t}, qword ptr gs:[{off}]",
                                "add {t}, 1",
                                "mov qword ptr gs:[{off}], {t}",
                                off = in(reg) off, t = out(reg) _, options(nostack),
                            )
                        }
                    }
                }
            });
        }
    });
    assert_eq!(c.fetch(), 6 * 200 * 500);
}

//! Simulated interrupts: a handler adds to the same counters, on the same CPU, while the
//! interrupted thread is adding. Nothing may be lost; a racy add must be caught.

use pcpu_counter::sim::{interrupt_storm, Machine};
use std::sync::atomic::{AtomicU64, Ordering};

/// Adds `per_thread` ones to `c` on every CPU of `machine`, each thread under an interrupt
/// storm whose handler adds 1 to `c` too. Returns (handler runs, interrupts taken).
fn storm_on_every_cpu(machine: &Machine, per_thread: u64, add: &(dyn Fn() + Sync)) -> (u64, u64) {
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        add();
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let taken = machine.with_interrupt_handler(&handler, || {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..machine.ncpus())
                .map(|cpu| {
                    s.spawn(move || {
                        machine.run_on(cpu, || interrupt_storm(|| (0..per_thread).for_each(|_| add())).1.taken)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).sum::<u64>()
        })
    });
    (handled.into_inner(), taken)
}

#[test]
fn handler_adds_interleave_exactly() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let (handled, taken) = storm_on_every_cpu(&machine, 300_000, &|| c.inc());
    assert!(handled > 100, "only {handled} interrupts were handled: the test proves nothing");
    assert_eq!(handled, taken, "every interrupt taken on a bound thread runs the handler");
    assert_eq!(c.fetch(), 2 * 300_000 + handled);
}

#[test]
fn protection_masks_interrupts() {
    let machine = Machine::new(1);
    let c = machine.alloc().unwrap();
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let mut held = false;
    machine.with_interrupt_handler(&handler, || {
        machine.run_on(0, || {
            let (inside, storm) = interrupt_storm(|| {
                let guard = pcpu_counter::counter_enter();
                held = guard.holds_protection();
                let before = handled.load(Ordering::Relaxed);
                for _ in 0..20_000 {
                    c.add_protected(&guard, 1);
                }
                let during = handled.load(Ordering::Relaxed) - before;
                pcpu_counter::counter_exit(guard);
                during
            });
            assert!(storm.raised > 0 && storm.taken > 0);
            if held {
                assert_eq!(inside, 0, "an interrupt ran inside counter_enter/counter_exit");
            } else {
                // The arch's add needs no protection (x86_64, aarch64, i386 with CX8).
                assert!(!pcpu_counter::arch::NAME.starts_with("portable"));
            }
        })
    });
    assert_eq!(c.fetch(), 20_000);
}

/// The same storm against a per-CPU add split into load, add and store (no single
/// instruction, no protection) loses the handler's adds: the test can fail.
#[cfg(target_arch = "x86_64")]
#[test]
fn storm_catches_a_racy_per_cpu_add() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    let off = c.offset();
    let racy_add = || {
        // SAFETY: the thread holds a CPU of `machine`, so gs:[off] is that CPU's slot of `c`;
        // the load/add/store split is the deliberate bug.
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
    };
    let mut lost = 0;
    for _ in 0..10 {
        let before = c.fetch();
        let (handled, _) = storm_on_every_cpu(&machine, 300_000, &racy_add);
        lost = (2 * 300_000 + handled) - (c.fetch() - before);
        if lost > 0 {
            break;
        }
    }
    assert!(lost > 0, "a racy per-CPU add lost nothing under interrupts: the storm proves nothing");
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

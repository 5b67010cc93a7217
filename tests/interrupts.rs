//! Simulated interrupts: a handler adds to the same counters, on the same CPU, while the
//! interrupted thread is adding. Nothing may be lost; a racy add must be caught.

use pcpu_counter::sim::{interrupt_storm, Machine};
use std::sync::atomic::{AtomicU64, Ordering};

/// On every CPU of `machine` at once, a thread under an interrupt storm calls `add` until the
/// handlers (which call `add` too) have run at least `min_handled` times in all. Returns (adds
/// the threads made, handler runs, interrupts taken).
///
/// The bound is a count, not a time: on a loaded machine the thread that raises the
/// interrupts may wait for a core, so a thread that saw no interrupt during a chunk of adds
/// yields it, and the adds go on until the handlers have run often enough. `MAX_ADDS` only
/// turns a broken storm (no interrupt ever delivered) into a failure instead of a hang; runs
/// need a few hundred thousand adds idle, and a few million under load.
fn storm_on_every_cpu(
    machine: &Machine,
    min_handled: u64,
    add: &(dyn Fn() + Sync),
) -> (u64, u64, u64) {
    const CHUNK: u64 = 10_000;
    const MAX_ADDS: u64 = 2_000_000_000;
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        add();
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let work = || {
        let mut adds = 0;
        loop {
            let before = handled.load(Ordering::Relaxed);
            if before >= min_handled || adds >= MAX_ADDS {
                return adds;
            }
            (0..CHUNK).for_each(|_| add());
            adds += CHUNK;
            if handled.load(Ordering::Relaxed) == before {
                std::thread::yield_now();
            }
        }
    };
    let (adds, taken) = machine.with_interrupt_handler(&handler, || {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..machine.ncpus())
                .map(|cpu| {
                    let work = &work;
                    s.spawn(move || machine.run_on(cpu, || interrupt_storm(work)))
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .fold((0, 0), |(a, t), (adds, storm)| (a + adds, t + storm.taken))
        })
    });
    let handled = handled.into_inner();
    assert!(
        handled >= min_handled,
        "only {handled} interrupts were handled in {adds} adds: the storm proves nothing"
    );
    println!("{handled} interrupts handled in {adds} adds");
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
                let guard = pcpu_counter::freebsd::counter_enter();
                held = guard.holds_protection();
                let before = handled.load(Ordering::Relaxed);
                for _ in 0..20_000 {
                    c.add_protected(&guard, 1);
                }
                let during = handled.load(Ordering::Relaxed) - before;
                pcpu_counter::freebsd::counter_exit(guard);
                during
            });
            assert!(storm.raised > 0 && storm.taken > 0);
            if held {
                assert_eq!(
                    inside, 0,
                    "an interrupt ran inside counter_enter/counter_exit"
                );
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
    // Each try is a storm of at least 2000 handled interrupts on both CPUs; a loss needs one
    // to land between the load and the store. Tries, not time, bound the search.
    const TRIES: usize = 200;
    let caught = (1..=TRIES).find_map(|try_| {
        let before = c.fetch();
        let (adds, handled, _) = storm_on_every_cpu(&machine, 2_000, &racy_add);
        let lost = (adds + handled) - (c.fetch() - before);
        (lost > 0).then_some((try_, lost))
    });
    let (tries, lost) = caught.unwrap_or_else(|| {
        panic!("a racy per-CPU add lost nothing under interrupts in {TRIES} tries: the storm proves nothing")
    });
    println!("the racy add lost {lost} adds, caught on try {tries}");
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

//! Early counters: counts made before the zone exists are kept and moved into the per-CPU
//! slots, exactly once, even while other CPUs add during `init` (a naive `init` that does not
//! wait for early adds in flight is caught by the same check).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};

use pcpu_counter::sim::Machine;
use pcpu_counter::{counter_u64_define_early, early::EarlyCounter, Error};

counter_u64_define_early!(static BOOT);

/// Machines an early counter's `init` borrows for `'static`: leaked on purpose, and kept
/// reachable from a static so that Miri's leak check, which skips what a static reaches,
/// still reports any other leak.
fn leak(machine: Machine) -> &'static Machine {
    static LEAKED: Mutex<Vec<&'static Machine>> = Mutex::new(Vec::new());
    let machine = Box::leak(Box::new(machine));
    LEAKED.lock().unwrap().push(machine);
    machine
}

fn leak_machine(ncpus: usize) -> &'static Machine {
    leak(Machine::with_capacity(ncpus, 64).unwrap())
}

#[test]
fn counts_before_init_move_into_the_initialising_cpus_slot() {
    // Before any zone: threads holding no CPU at all may add (fewer under Miri, which is slow).
    const N: u64 = if cfg!(miri) { 100 } else { 1000 };
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || (0..N).for_each(|_| BOOT.add(t + 1)));
        }
    });
    assert_eq!(BOOT.fetch(), 10 * N);
    assert!(BOOT.counter().is_none());
    let machine = leak_machine(4);
    machine.run_on(2, || BOOT.init(machine.zone())).unwrap();
    let counter = BOOT.counter().unwrap();
    assert_eq!(counter.cpu_slot(2), Ok(10 * N), "moved into CPU 2's slot");
    assert_eq!(counter.cpu_slot(0), Ok(0));
    machine.run_on(3, || BOOT.add(5));
    assert_eq!((BOOT.fetch(), counter.fetch()), (10 * N + 5, 10 * N + 5));
    assert_eq!(counter.cpu_slot(3), Ok(5));
    assert_eq!(
        machine.run_on(0, || BOOT.init(machine.zone())),
        Err(Error::AlreadyInstalled)
    );
    assert_eq!(
        machine.zone().in_use(),
        1,
        "a second init allocates nothing"
    );
}

#[test]
fn init_on_a_full_zone_fails_and_keeps_the_counts() {
    static C: EarlyCounter = EarlyCounter::new();
    C.add(7);
    let machine = leak(Machine::with_capacity(1, 1).unwrap());
    let hog: Vec<_> = (0..machine.zone().capacity())
        .map(|_| machine.alloc().unwrap())
        .collect();
    let full = machine.run_on(0, || C.init(machine.zone()));
    assert!(matches!(full, Err(Error::ZoneFull { .. })), "{full:?}");
    assert_eq!(C.fetch(), 7);
    C.add(1);
    drop(hog);
    machine.run_on(0, || C.init(machine.zone())).unwrap();
    assert_eq!((C.fetch(), C.counter().unwrap().fetch()), (8, 8));
}

/// Adders on CPUs 1.. add while CPU 0 runs `init` in the middle of their adds. Returns what
/// the per-CPU counter and the early counter read afterwards, and the exact total added.
fn race(init: fn(&EarlyCounter, &'static Machine) -> Result<(), Error>) -> (u64, u64, u64) {
    // Miri is thousands of times slower, and its scheduler switches threads at random points.
    const MIN_ADDS: u64 = if cfg!(miri) { 30 } else { 2_000 };
    let machine = leak_machine(4);
    let counter = EarlyCounter::new();
    let go = Barrier::new(4);
    let stop = AtomicBool::new(false);
    let added: u64 = std::thread::scope(|s| {
        let adders: Vec<_> = (1..4)
            .map(|cpu| {
                let (counter, go, stop) = (&counter, &go, &stop);
                s.spawn(move || {
                    machine.run_on(cpu, || {
                        go.wait();
                        let mut n = 0u64;
                        // Keep adding until init is over, and at least a while.
                        while !stop.load(Ordering::Relaxed) || n < MIN_ADDS {
                            counter.add(cpu as i64);
                            n += 1;
                        }
                        n * cpu as u64
                    })
                })
            })
            .collect();
        machine.run_on(0, || {
            go.wait();
            for _ in 0..200 {
                std::hint::spin_loop();
            }
            init(&counter, machine).unwrap();
            stop.store(true, Ordering::Relaxed);
        });
        adders.into_iter().map(|a| a.join().unwrap()).sum()
    });
    let slots = counter.counter().unwrap().fetch();
    (slots, counter.fetch(), added)
}

#[test]
fn init_racing_with_adds_loses_and_doubles_nothing() {
    for trial in 0..if cfg!(miri) { 3 } else { 100 } {
        let (slots, fetched, added) = race(|c, m| c.init(m.zone()));
        assert_eq!(slots, added, "trial {trial}: the per-CPU slots");
        assert_eq!(fetched, added, "trial {trial}: fetch");
    }
}

/// Runs only in the broken build (`cargo xtask verify --only broken`).
#[cfg(pcpu_counter_broken = "early_init_without_waiting")]
#[test]
fn the_same_check_catches_an_init_that_does_not_wait_for_early_adds() {
    let lost = (0..200).any(|_| {
        let (slots, _, added) = race(|c, m| c.init_without_waiting(m.zone()));
        slots != added
    });
    assert!(
        lost,
        "the naive init never left a count outside the slots in 200 trials"
    );
}

#[test]
fn fetch_never_goes_back_during_init() {
    // Fewer adds under Miri, which is slow.
    const N: u64 = if cfg!(miri) { 100 } else { 5_000 };
    let machine = leak_machine(3);
    let counter = EarlyCounter::new();
    (0..500).for_each(|_| counter.inc());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = 0;
            while !done.load(Ordering::Relaxed) {
                let now = counter.fetch();
                assert!(now >= last, "fetch went from {last} to {now}");
                last = now;
            }
        });
        s.spawn(|| machine.run_on(1, || (0..N).for_each(|_| counter.inc())));
        machine.run_on(0, || counter.init(machine.zone())).unwrap();
        machine.run_on(2, || (0..100).for_each(|_| counter.inc()));
        std::thread::sleep(std::time::Duration::from_millis(1));
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(counter.fetch(), 600 + N);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "holds no simulated CPU")]
fn init_off_cpu_is_caught_in_debug_builds() {
    let machine = leak_machine(1);
    let counter = EarlyCounter::new();
    let _ = counter.init(machine.zone());
}

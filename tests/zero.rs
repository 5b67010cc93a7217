//! `zero` and `fetch_and_zero` racing with adds: nothing lost, nothing counted twice.

use pcpu_counter::freebsd::{counter_u64_fetch, counter_u64_zero};
use pcpu_counter::sim::Machine;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[test]
fn zero_resets_without_touching_slots() {
    let machine = Machine::new(4);
    let c = machine.alloc().unwrap();
    machine.run_on(2, || c.add(41));
    counter_u64_zero(&c);
    assert_eq!(counter_u64_fetch(&c), 0);
    assert_eq!(
        c.cpu_slot(2).unwrap(),
        41,
        "zero must not write a CPU's slot"
    );
    machine.run_on(3, || c.add(1));
    assert_eq!(c.fetch(), 1);
    assert_eq!(c.fetch_and_zero(), 1);
    assert_eq!(c.fetch_and_zero(), 0);
}

/// Writers add while a reader repeatedly takes `fetch_and_zero`; every delta is a count that
/// really happened, and the deltas plus the final fetch equal every add, exactly. Writers keep
/// going until the reader has taken many non-empty deltas while they ran, so the race really
/// happens even on a loaded machine: a writer that saw no new race during a chunk of adds
/// yields its core to the reader. `MAX_ADDS` only turns a reader that never runs into a
/// failure instead of a hang (a count, not a time).
#[test]
fn fetch_and_zero_racing_with_adds_loses_nothing() {
    const WRITERS: usize = 6;
    const MIN_ADDS: u64 = 30_000;
    const MAX_ADDS: u64 = 1_000_000_000;
    const MIN_RACES: u64 = 200;
    let machine = Machine::new(WRITERS + 1);
    let c = machine.alloc().unwrap();
    let done = AtomicBool::new(false);
    let races = AtomicU64::new(0);
    let (adds, deltas) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|cpu| {
                let (machine, c, races) = (&machine, &c, &races);
                s.spawn(move || {
                    machine.run_on(cpu, || {
                        let mut adds = 0u64;
                        while adds < MIN_ADDS
                            || (races.load(Ordering::Relaxed) < MIN_RACES && adds < MAX_ADDS)
                        {
                            let seen = races.load(Ordering::Relaxed);
                            (0..1000).for_each(|_| c.add(1));
                            adds += 1000;
                            if races.load(Ordering::Relaxed) == seen {
                                std::thread::yield_now();
                            }
                        }
                        adds
                    })
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut sum = 0u64;
            while !done.load(Ordering::Relaxed) {
                let delta = c.fetch_and_zero();
                assert!(
                    delta <= WRITERS as u64 * MAX_ADDS,
                    "impossible delta {delta}: a zero went backwards"
                );
                if delta > 0 {
                    races.fetch_add(1, Ordering::Relaxed);
                }
                sum += delta;
            }
            sum
        });
        let adds: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        done.store(true, Ordering::Relaxed);
        (adds, reader.join().unwrap())
    });
    let races = races.into_inner();
    assert!(
        races >= MIN_RACES,
        "the reader raced with the writers only {races} times in {adds} adds"
    );
    println!("{races} non-empty deltas taken during {adds} adds");
    assert_eq!(deltas + c.fetch(), adds);
}

/// Two exporters zeroing the same counter at once still split the adds exactly between them.
#[test]
fn concurrent_fetch_and_zero_calls_split_the_count() {
    let machine = Machine::new(3);
    let c = machine.alloc().unwrap();
    let done = AtomicBool::new(false);
    let total = std::thread::scope(|s| {
        let writer = s.spawn(|| machine.run_on(0, || (0..50_000).for_each(|_| c.add(2))));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut sum = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        let delta = c.fetch_and_zero();
                        assert!(
                            delta <= 100_000,
                            "delta {delta} is negative: deltas overlapped"
                        );
                        sum += delta;
                    }
                    sum
                })
            })
            .collect();
        writer.join().unwrap();
        done.store(true, Ordering::Relaxed);
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    assert_eq!(total + c.fetch_and_zero(), 100_000);
}

/// `zero` while adding: the count after the last zero is exactly the adds made after it.
#[test]
fn zero_racing_with_adds_counts_each_add_once() {
    let machine = Machine::new(2);
    let c = machine.alloc().unwrap();
    std::thread::scope(|s| {
        let writer = s.spawn(|| machine.run_on(0, || (0..20_000).for_each(|_| c.add(1))));
        for _ in 0..200 {
            c.zero();
        }
        writer.join().unwrap();
    });
    let after = c.fetch();
    assert!(after <= 20_000);
    c.zero();
    machine.run_on(1, || c.add(5));
    assert_eq!(c.fetch(), 5);
}

/// A remote plain store (what FreeBSD's zero would be without its IPI rendezvous) races with
/// the owner's add; this shows the harness above would catch it: the writer's adds made after
/// a store-to-zero on its slot would be lost or resurrected.
///
/// The two threads must run at the same moment on two cores. On a loaded machine they may
/// mostly run one after the other, so each try's writer goes on until the reader has taken
/// many non-empty values while it ran (each one a moment when both ran), bounded by a count
/// of adds; and tries, not time, bound the search.
#[test]
fn a_remote_store_zero_would_lose_adds() {
    const TRIES: usize = 200;
    const MIN_ADDS: u64 = 200_000;
    const MAX_ADDS: u64 = 200_000_000;
    const MIN_OVERLAPS: u64 = 2_000;
    let slot = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let overlaps = AtomicU64::new(0);
    let caught = (1..=TRIES).find_map(|try_| {
        slot.store(0, Ordering::Relaxed);
        overlaps.store(0, Ordering::Relaxed);
        let (adds, zeroed) = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut adds = 0u64;
                while adds < MIN_ADDS
                    || (overlaps.load(Ordering::Relaxed) < MIN_OVERLAPS && adds < MAX_ADDS)
                {
                    // The owner's non-locked read-modify-write, as on a real CPU.
                    for _ in 0..1000 {
                        let v = slot.load(Ordering::Relaxed);
                        slot.store(v + 1, Ordering::Relaxed);
                    }
                    adds += 1000;
                }
                done.store(true, Ordering::Relaxed);
                adds
            });
            let mut zeroed = 0u64;
            while !done.load(Ordering::Relaxed) {
                let taken = slot.swap(0, Ordering::Relaxed);
                if taken > 0 {
                    overlaps.fetch_add(1, Ordering::Relaxed);
                }
                zeroed += taken;
            }
            let adds = writer.join().unwrap();
            done.store(false, Ordering::Relaxed);
            (adds, zeroed)
        });
        let counted = zeroed + slot.load(Ordering::Relaxed);
        (counted != adds).then_some((try_, adds, counted))
    });
    let (tries, adds, counted) = caught.unwrap_or_else(|| {
        panic!("a remote store-zero never lost or doubled an add in {TRIES} tries")
    });
    println!("a remote store-zero counted {counted} of {adds} adds, caught on try {tries}");
}

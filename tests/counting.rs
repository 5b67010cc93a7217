//! Exact sums: many threads, many counters, random binding and migration, 1 to 256 CPUs.

mod common;

use common::{RacyShared, Workload};
use pcpu_counter::sim::Machine;
use pcpu_counter::{
    freebsd::{counter_enter, counter_exit, counter_u64_add_protected},
    Counter,
};

fn check_exact(ncpus: usize, w: Workload) {
    let machine = Machine::new(ncpus);
    let counters: Vec<Counter<'_>> = (0..w.counters).map(|_| machine.alloc().unwrap()).collect();
    let expected = common::run(&machine, w, &|i, v| counters[i].add(v));
    for (i, c) in counters.iter().enumerate() {
        assert_eq!(c.fetch(), expected[i], "counter {i} on {ncpus} CPUs");
        let per_cpu = (0..ncpus).fold(0u64, |acc, cpu| acc.wrapping_add(c.cpu_slot(cpu).unwrap()));
        assert_eq!(per_cpu, expected[i], "slots of counter {i} do not add up");
    }
}

fn workload(threads: usize, seed: u64) -> Workload {
    Workload {
        threads,
        rounds: 40,
        adds_per_round: 500,
        counters: 7,
        range: 1000,
        seed,
    }
}

#[test]
fn one_cpu_many_threads() {
    check_exact(1, workload(4, 1));
}

#[test]
fn two_cpus() {
    check_exact(2, workload(6, 2));
}

#[test]
fn seven_cpus() {
    check_exact(7, workload(8, 7));
}

#[test]
fn sixty_four_cpus() {
    check_exact(64, workload(16, 64));
}

#[test]
fn two_hundred_fifty_six_cpus() {
    check_exact(256, workload(24, 256));
}

#[test]
fn every_cpu_counts_into_its_own_slot() {
    let machine = Machine::new(8);
    let c = machine.alloc().unwrap();
    std::thread::scope(|s| {
        for cpu in 0..8 {
            let (machine, c) = (&machine, &c);
            s.spawn(move || machine.run_on(cpu, || (0..=cpu).for_each(|_| c.inc())));
        }
    });
    for cpu in 0..8 {
        assert_eq!(c.cpu_slot(cpu).unwrap(), cpu as u64 + 1);
    }
    assert_eq!(c.fetch(), 36);
    assert!(c.cpu_slot(8).is_err());
}

#[test]
fn negative_adds_and_wrap_around() {
    let machine = Machine::new(3);
    let c = machine.alloc().unwrap();
    machine.run_on(0, || c.add(-5));
    assert_eq!(c.fetch(), (-5i64) as u64);
    assert_eq!(c.fetch() as i64, -5);
    machine.run_on(1, || c.add(7));
    assert_eq!(c.fetch(), 2);
    machine.run_on(2, || {
        c.add(i64::MAX);
        c.add(i64::MAX);
        c.add(2);
    });
    // 2 + 2 * (2^63 - 1) + 2 = 2^64 + 2, which wraps to 2.
    assert_eq!(c.fetch(), 2);
    assert_eq!(c.cpu_slot(0).unwrap(), u64::MAX - 4);
    machine.run_on(0, || c.add(i64::MIN));
    assert_eq!(c.fetch(), 2u64.wrapping_add(1 << 63));
}

#[test]
fn protected_batches_are_exact() {
    let machine = Machine::new(4);
    let (packets, bytes) = (machine.alloc().unwrap(), machine.alloc().unwrap());
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (machine, packets, bytes) = (&machine, &packets, &bytes);
            s.spawn(move || {
                for round in 0..200u64 {
                    let _cpu = machine.bind(((t + round) % 4) as usize).unwrap();
                    let guard = counter_enter();
                    for k in 0..8 {
                        counter_u64_add_protected(&guard, packets, 1);
                        bytes.add_protected(&guard, (64 + k) as i64);
                    }
                    counter_exit(guard);
                }
            });
        }
    });
    assert_eq!(packets.fetch(), 8 * 200 * 8);
    assert_eq!(bytes.fetch(), 8 * 200 * (64 * 8 + 28));
}

#[test]
fn migration_keeps_every_add() {
    let machine = Machine::new(5);
    let c = machine.alloc().unwrap();
    std::thread::scope(|s| {
        for t in 0..4usize {
            let (machine, c) = (&machine, &c);
            s.spawn(move || {
                let mut bound = machine.bind(t).unwrap();
                for step in 0..1000usize {
                    c.add(3);
                    bound = bound.migrate((t + step) % 5).unwrap();
                    c.add(-1);
                }
                drop(bound);
            });
        }
    });
    assert_eq!(c.fetch(), 4 * 1000 * 2);
}

/// The same harness, run against a shared racy `+=`, must see adds lost: it can fail.
///
/// A loss needs two threads adding at the same moment on two cores. On a loaded machine a
/// short run fits in one time slice and its threads run one after the other, so each try is
/// twice as long as the one before (up to 128 times the first): tries, not time, bound it.
#[test]
fn harness_catches_a_racy_counter() {
    const TRIES: u64 = 24;
    let machine = Machine::new(4);
    let caught = (0..TRIES).find_map(|attempt| {
        let racy = RacyShared::new();
        let w = Workload {
            threads: 4,
            rounds: 20,
            adds_per_round: 20_000 << attempt.min(7),
            counters: 1,
            range: 0,
            seed: attempt,
        };
        let expected = common::run(&machine, w, &|_, v| racy.add(v));
        let lost = expected[0] - racy.get();
        (lost > 0).then_some((attempt + 1, lost, expected[0]))
    });
    let (tries, lost, adds) = caught.unwrap_or_else(|| {
        panic!("a racy shared += lost nothing in {TRIES} tries: the harness cannot fail")
    });
    println!("a racy shared += lost {lost} of {adds} adds, caught on try {tries}");
}

//! `ApproxCounter`: exact sums, the carry identity and the bound, on simulated CPUs.
//!
//! After every add and zero has returned, the approximate value is exactly the precise value
//! less every CPU's slot remainder below a batch (`Σ slot & (batch - 1)`): the tests check that
//! identity, not only the bound it implies. The carry race runs against a broken carry (a load
//! and a store instead of one atomic add) in the build with
//! `--cfg pcpu_counter_broken="approx_racy_carry"` (`cargo xtask verify --only broken`).

mod common;

use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as MemOrdering};

use common::Workload;
use pcpu_counter::sim::{interrupt_storm_until, Machine};
use pcpu_counter::{ApproxCounter, Error};
use proptest::prelude::*;

/// The sum of every CPU's slot remainder below a batch: what the approximate value lacks.
fn remainders(c: &ApproxCounter<'_>, ncpus: usize) -> u64 {
    (0..ncpus).fold(0u64, |acc, cpu| {
        acc.wrapping_add(c.cpu_slot(cpu).unwrap() & (c.batch() - 1))
    })
}

/// The identity and the bound, with nothing in flight.
fn assert_settled(c: &ApproxCounter<'_>, ncpus: usize, what: &str) {
    let (precise, approx) = (c.precise(), c.approximate());
    let rem = remainders(c, ncpus);
    assert_eq!(
        approx,
        precise.wrapping_sub(rem),
        "{what}: approximate {approx} != precise {precise} - remainders {rem}"
    );
    let (under, over) = c.accuracy();
    assert_eq!(over, 0);
    assert_eq!(under, ncpus as u64 * (c.batch() - 1));
    assert!(
        precise.wrapping_sub(approx) <= under,
        "{what}: approximate {approx} is more than {under} under precise {precise}"
    );
}

fn check_exact(ncpus: usize, batch: u64, w: Workload) {
    let machine = Machine::new(ncpus);
    let counters: Vec<ApproxCounter<'_>> = (0..w.counters)
        .map(|_| ApproxCounter::new(machine.alloc().unwrap(), batch).unwrap())
        .collect();
    let expected = common::run(&machine, w, &|i, v| counters[i].add(v));
    for (i, c) in counters.iter().enumerate() {
        assert_eq!(c.precise(), expected[i], "counter {i} on {ncpus} CPUs");
        assert_settled(
            c,
            ncpus,
            &format!("counter {i} on {ncpus} CPUs, batch {batch}"),
        );
    }
}

/// Whether this is the host arch at native speed: elsewhere (i686, aarch64 and riscv64 under
/// `cargo xtask cross`, much of it emulated by qemu-user) the tests run fewer adds.
const FULL: bool = cfg!(all(target_arch = "x86_64", not(miri)));

fn workload(threads: usize, range: i64, seed: u64) -> Workload {
    Workload {
        threads,
        rounds: if cfg!(miri) {
            2
        } else if FULL {
            40
        } else {
            8
        },
        adds_per_round: if cfg!(miri) { 20 } else { 500 },
        counters: 5,
        range,
        seed,
    }
}

#[test]
fn exact_sums_and_the_carry_identity_from_1_to_256_cpus() {
    check_exact(1, 16, workload(4, 0, 1));
    check_exact(2, 16, workload(6, 1000, 2));
    check_exact(7, 64, workload(8, 1000, 7));
    check_exact(64, 32, workload(16, 0, 64));
    check_exact(256, 256, workload(24, 100, 256));
}

/// Adds of 16 from `threads` CPUs at once, batch 16 (every add carries): returns the
/// approximate and the precise value.
fn carry_race(threads: usize, adds: u64) -> (u64, u64) {
    let machine = Machine::new(threads);
    let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    std::thread::scope(|s| {
        for cpu in 0..threads {
            let (c, machine) = (&c, &machine);
            s.spawn(move || machine.run_on(cpu, || (0..adds).for_each(|_| c.add(16))));
        }
    });
    (c.approximate(), c.precise())
}

#[test]
fn concurrent_carries_are_never_lost() {
    let adds = if FULL { 100_000 } else { 5_000 };
    for _ in 0..3 {
        assert_eq!(carry_race(4, adds), (64 * adds, 64 * adds));
    }
}

/// Runs only in the broken build (`cargo xtask verify --only broken`): the same race finds
/// the carry that is a load and a store.
#[cfg(pcpu_counter_broken = "approx_racy_carry")]
#[test]
fn the_same_race_catches_a_carry_that_is_not_atomic() {
    let lost = (0..50).any(|_| {
        let (approx, precise) = carry_race(4, 100_000);
        assert_eq!(precise, 6_400_000, "the slots themselves are exact");
        approx != precise
    });
    assert!(lost, "the racy carry never lost a carry in 50 trials");
}

/// Adds racing with `fetch_and_zero` from another thread: the deltas and the final value add
/// up to every add, and once all is done the approximate value obeys the identity.
#[test]
fn zeroes_racing_with_carries_lose_nothing() {
    let adds: u64 = if FULL { 50_000 } else { 5_000 };
    let machine = Machine::new(3);
    let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    let done = AtomicBool::new(false);
    let deltas = AtomicU64::new(0);
    std::thread::scope(|s| {
        let zeroer = s.spawn(|| {
            let mut zeroes = 0u64;
            while !done.load(MemOrdering::Relaxed) || zeroes == 0 {
                deltas.fetch_add(c.fetch_and_zero(), MemOrdering::Relaxed);
                zeroes += 1;
            }
        });
        let adders: Vec<_> = (0..3)
            .map(|cpu| {
                let (c, machine) = (&c, &machine);
                s.spawn(move || machine.run_on(cpu, || (0..adds).for_each(|_| c.add(7))))
            })
            .collect();
        adders.into_iter().for_each(|a| a.join().unwrap());
        done.store(true, MemOrdering::Relaxed);
        zeroer.join().unwrap();
    });
    let total = deltas.load(MemOrdering::Relaxed) + c.precise();
    assert_eq!(total, 3 * 7 * adds, "deltas + final value != every add");
    assert_settled(&c, 3, "after the zero race");
}

/// Interrupts on the same CPU land between an add's `xadd` and its carry: every step of the
/// slot's chain is carried once.
///
/// The storm lasts until 1000 interrupts ran the handler (a count, not a time), on a thread
/// that holds CPU 1 throughout: an interrupt landing while it held none would run no handler.
#[cfg(not(miri))]
#[test]
fn interrupts_between_an_add_and_its_carry_lose_nothing() {
    const WANTED: u64 = 1000;
    const STEP: u64 = 20_000;
    /// Only turns a storm that never delivers into a failure instead of a hang.
    const MAX_STEPS: u64 = 100_000;
    let machine = Machine::new(2);
    let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    let in_handler = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        c.add(21);
        in_handler.fetch_add(1, MemOrdering::Relaxed);
    };
    let mut adds = 0u64;
    let (steps, storm) = machine.with_interrupt_handler(&handler, || {
        machine.run_on(1, || {
            interrupt_storm_until(MAX_STEPS, |storm| {
                if storm.handled >= WANTED {
                    return true;
                }
                (0..STEP).for_each(|_| c.add(7));
                adds += STEP;
                false
            })
        })
    });
    let handled = in_handler.load(MemOrdering::Relaxed);
    assert!(
        handled >= WANTED,
        "only {handled} interrupts ran the handler in {steps} steps ({storm:?}): proves nothing"
    );
    assert_eq!(
        storm.handled, handled,
        "every handled interrupt ran this handler"
    );
    assert_eq!(c.precise(), 7 * adds + 21 * handled);
    assert_settled(&c, 2, "after the interrupt storm");
}

#[test]
fn compare_answers_far_values_from_the_approximate_value_and_near_ones_exactly() {
    let machine = Machine::new(4);
    let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    assert_eq!(c.accuracy(), (60, 0));
    machine.run_on(2, || (0..100).for_each(|_| c.inc()));
    machine.run_on(3, || (0..5).for_each(|_| c.inc()));
    assert_eq!((c.precise(), c.approximate()), (105, 96));
    // The precise value lies in [96, 156].
    assert_eq!(c.compare_approximate(95), Some(Ordering::Greater));
    assert_eq!(c.compare_approximate(157), Some(Ordering::Less));
    for t in [96, 104, 105, 106, 156] {
        assert_eq!(c.compare_approximate(t), None, "threshold {t}");
        assert_eq!(c.compare(t), 105.cmp(&t), "threshold {t}");
    }
    assert_eq!(c.compare(-1_000), Ordering::Greater);
    assert_eq!(c.compare(i64::MAX), Ordering::Less);
}

#[test]
fn zero_and_fetch_and_zero_move_both_values() {
    let machine = Machine::new(2);
    let c = ApproxCounter::new(machine.alloc().unwrap(), 16).unwrap();
    machine.run_on(0, || c.add(40));
    machine.run_on(1, || c.add(7));
    assert_eq!((c.precise(), c.approximate()), (47, 32));
    assert_eq!(c.fetch_and_zero(), 47);
    // The slots keep 40 and 7: their remainders (8 and 7) are what approximate lacks.
    assert_eq!((c.precise(), c.approximate()), (0, (-15i64) as u64));
    machine.run_on(1, || c.add(9)); // slot 7 -> 16: one carry of 16
    assert_eq!((c.precise(), c.approximate()), (9, 1));
    c.zero();
    assert_eq!(c.precise(), 0);
    assert_settled(&c, 2, "after zero");
}

#[test]
fn a_counter_keeps_its_count_when_it_becomes_approximate() {
    let machine = Machine::new(3);
    let plain = machine.alloc().unwrap();
    machine.run_on(0, || plain.add(100));
    machine.run_on(2, || plain.add(21));
    plain.fetch_and_zero();
    machine.run_on(1, || plain.add(50));
    let c = ApproxCounter::new(plain, 32).unwrap();
    assert_eq!(c.precise(), 50);
    assert_settled(&c, 3, "right after new");
    machine.run_on(1, || c.add(14)); // slot 50 -> 64: one carry
    assert_eq!((c.precise(), c.approximate()), (64, 64 - 4 - 21));
    assert_settled(&c, 3, "after a carry");
}

#[test]
fn a_batch_that_is_not_a_power_of_two_up_to_2_pow_32_is_refused() {
    let machine = Machine::new(1);
    for batch in [0, 1, 3, 8, 100, 1 << 33, u64::MAX] {
        let err = ApproxCounter::new(machine.alloc().unwrap(), batch).unwrap_err();
        assert_eq!(err, Error::BadBatch { batch });
    }
    assert_eq!(
        machine.zone().in_use(),
        0,
        "the refused counters' slots are freed"
    );
    for batch in [16, 32, 1 << 32] {
        assert_eq!(
            ApproxCounter::new(machine.alloc().unwrap(), batch)
                .unwrap()
                .batch(),
            batch
        );
    }
    assert_eq!(
        Error::BadBatch { batch: 3 }.to_string(),
        "approximate counter batch 3 is not a power of two from 16 to 2^32"
    );
}

#[test]
fn a_full_zone_refuses_the_second_slot_and_loses_nothing() {
    let machine = Machine::with_capacity(2, 64).unwrap();
    let capacity = machine.zone().capacity();
    let keep: Vec<_> = (0..capacity - 1)
        .map(|_| machine.alloc().unwrap())
        .collect();
    let last = machine.alloc().unwrap();
    machine.run_on(1, || last.add(5));
    let err = ApproxCounter::new(last, 16).unwrap_err();
    assert_eq!(err, Error::ZoneFull { capacity });
    assert_eq!(
        machine.zone().in_use(),
        capacity - 1,
        "the moved-in counter is freed"
    );
    assert_eq!(keep.len(), capacity - 1);
}

#[derive(Debug, Clone)]
enum Op {
    Add { cpu: usize, v: i64 },
    Zero,
}

fn ops(ncpus: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        12 => (0..ncpus, -300i64..1000).prop_map(|(cpu, v)| Op::Add { cpu, v }),
        1 => Just(Op::Zero),
    ];
    prop::collection::vec(op, 0..200)
}

proptest! {
    // Fewer cases off the host arch (see `FULL`); `PROPTEST_CASES` still sets the host's.
    #![proptest_config(ProptestConfig {
        cases: if FULL { ProptestConfig::default().cases } else { 32 },
        ..ProptestConfig::default()
    })]

    /// Random adds (of either sign) and zeroes on random CPUs: after every step the identity
    /// and the bound hold, the precise value is the model's, and `compare` agrees with the
    /// model for thresholds near and far.
    #[test]
    fn the_bound_holds_after_every_random_add(
        (ncpus, ops) in (1usize..9).prop_flat_map(|n| (Just(n), ops(n))),
        shift in 4u32..14,
        thresholds in prop::collection::vec(-5_000i64..50_000, 4),
    ) {
        let machine = Machine::new(ncpus);
        let c = ApproxCounter::new(machine.alloc().unwrap(), 1 << shift).unwrap();
        let mut model = 0u64;
        let mut deltas = 0u64;
        for op in &ops {
            match *op {
                Op::Add { cpu, v } => {
                    machine.run_on(cpu, || c.add(v));
                    model = model.wrapping_add(v as u64);
                }
                Op::Zero => deltas = deltas.wrapping_add(c.fetch_and_zero()),
            }
            let precise = c.precise();
            prop_assert_eq!(precise.wrapping_add(deltas), model);
            let rem = remainders(&c, ncpus);
            prop_assert_eq!(c.approximate(), precise.wrapping_sub(rem));
            prop_assert!(precise.wrapping_sub(c.approximate()) <= c.accuracy().0);
            for &t in &thresholds {
                let near = [t, (precise as i64).saturating_add(1), precise as i64];
                for t in near {
                    let exact = (precise as i64).cmp(&t);
                    prop_assert_eq!(c.compare(t), exact);
                    if let Some(o) = c.compare_approximate(t) {
                        prop_assert_eq!(o, exact);
                    }
                }
            }
        }
    }
}

#[test]
fn the_handle_names_the_counters_slot_and_debug_shows_it() {
    let machine = Machine::new(2);
    let counter = machine.alloc().unwrap();
    let off = counter.offset();
    let c = ApproxCounter::new(counter, 32).unwrap();
    assert_eq!(c.offset(), off, "the counter keeps the slot it was made on");
    machine.run_on(1, || c.add(40));
    assert_eq!(c.cpu_slot(1), Ok(40));
    let text = format!("{c:?}");
    assert_eq!(
        text,
        format!("ApproxCounter {{ offset: {off}, batch: 32, approximate: 32, precise: 40 }}")
    );
}

//! Per-CPU histograms: bucket rules against a reference at their edges, exact bucket counts
//! and sums from migrating threads and interrupt handlers, `count` equal to the `+Inf` bucket
//! in every read taken while CPUs observe (with a stored count that the same check catches),
//! quantiles within each rule's bound, and lossless delta export.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;

use pcpu_counter::histogram::{Buckets, Histogram, MinMax};
use pcpu_counter::sim::{interrupt_storm_until, Machine};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

/// A rule as the reference sees it: how it was made.
#[derive(Clone, Copy, Debug)]
enum Rule {
    LogLinear { k: u32, lowest: u64, count: usize },
    Linear { base: u64, step: u64, count: usize },
}

impl Rule {
    fn buckets(self) -> Buckets {
        match self {
            Rule::LogLinear {
                k: 0,
                lowest,
                count,
            } => Buckets::power_of_two(lowest, count),
            Rule::LogLinear { k, lowest, count } => Buckets::log_linear(k, lowest, count),
            Rule::Linear { base, step, count } => Buckets::linear(base, step, count),
        }
    }

    /// Where each regular bucket starts, and where the overflow bucket starts (`2^64` when it
    /// is empty), enumerated one bucket after the other: `count + 1` values.
    fn starts(self) -> Vec<u128> {
        match self {
            Rule::LogLinear { k, lowest, count } => {
                let mut starts = vec![lowest as u128];
                while starts.len() <= count {
                    let at = *starts.last().unwrap();
                    // One value per bucket below 2^(k+1), then 2^k buckets per power of two.
                    let width = if at < 1 << (k + 1) {
                        1
                    } else {
                        let log2 = 127 - at.leading_zeros();
                        1u128 << (log2 - k)
                    };
                    starts.push(at + width);
                }
                starts
            }
            Rule::Linear { base, step, count } => (0..=count as u128)
                .map(|i| base as u128 + i * step as u128)
                .collect(),
        }
    }

    /// The reference slot of `v`: 0 below the first bucket, `1 + i` in bucket `i`, `count + 1`
    /// past the last.
    fn slot_of(self, v: u64) -> usize {
        let starts = self.starts();
        let v = v as u128;
        match starts.iter().rposition(|&s| s <= v) {
            None => 0,
            Some(i) => i + 1,
        }
    }

    /// The midpoint error each rule guarantees for a quantile `truth` in a regular bucket:
    /// `|midpoint - truth|` is within it.
    fn error_holds(self, midpoint: u64, truth: u64) -> bool {
        let error = midpoint.abs_diff(truth) as u128;
        match self {
            // Relative error under 2^-(k+1) (1/2 for powers of two); none below 2^(k+1).
            Rule::LogLinear { k, .. } if truth < 1 << (k + 1) => error == 0,
            Rule::LogLinear { k, .. } => error << (k + 1) < truth as u128,
            Rule::Linear { step, .. } => error <= (step as u128 - 1) / 2,
        }
    }
}

/// Rules with every kind of edge: from 0, from a power of two, every `u64`, an empty
/// overflow, an empty underflow, single buckets.
const RULES: [Rule; 12] = [
    Rule::LogLinear {
        k: 0,
        lowest: 0,
        count: 65,
    },
    Rule::LogLinear {
        k: 0,
        lowest: 1,
        count: 64,
    },
    Rule::LogLinear {
        k: 0,
        lowest: 1024,
        count: 4,
    },
    Rule::LogLinear {
        k: 1,
        lowest: 0,
        count: 64 << 1,
    },
    Rule::LogLinear {
        k: 3,
        lowest: 0,
        count: 62 << 3,
    },
    Rule::LogLinear {
        k: 3,
        lowest: 1024,
        count: 20,
    },
    Rule::LogLinear {
        k: 2,
        lowest: 6,
        count: 10,
    },
    Rule::LogLinear {
        k: 4,
        lowest: 1 << 40,
        count: 1,
    },
    Rule::Linear {
        base: 100,
        step: 8,
        count: 3,
    },
    Rule::Linear {
        base: 0,
        step: 1,
        count: 10,
    },
    Rule::Linear {
        base: u64::MAX - 15,
        step: 16,
        count: 1,
    },
    Rule::Linear {
        base: 0,
        step: 1 << 63,
        count: 2,
    },
];

/// Values at every edge of `rule`: 0, 1, each power of two and its neighbours, each bucket
/// start and its neighbours, `u64::MAX`.
fn edges(rule: Rule) -> Vec<u64> {
    let mut values = vec![0, 1, 2, u64::MAX, u64::MAX - 1];
    for e in 0..64 {
        let p = 1u64 << e;
        values.extend([p - 1, p, p + 1]);
    }
    for s in rule.starts() {
        for v in [s.wrapping_sub(1), s, s + 1] {
            if let Ok(v) = u64::try_from(v) {
                values.push(v);
            }
        }
    }
    values
}

#[test]
fn every_rule_puts_each_edge_in_the_reference_bucket() {
    for rule in RULES {
        let buckets = rule.buckets();
        for v in edges(rule) {
            assert_eq!(buckets.slot_of(v), rule.slot_of(v), "{rule:?} value {v}");
        }
    }
}

#[test]
fn every_bucket_range_is_the_reference_range() {
    for rule in RULES {
        let (buckets, starts) = (rule.buckets(), rule.starts());
        let count = buckets.count();
        assert_eq!(buckets.slots(), count + 3, "{rule:?}");
        let range = |lo: u128, next: u128| match lo < next && lo <= u64::MAX as u128 {
            true => Some((lo as u64, (next - 1).min(u64::MAX as u128) as u64)),
            false => None,
        };
        assert_eq!(buckets.range(0), range(0, starts[0]), "{rule:?} underflow");
        for i in 0..count {
            let expected = range(starts[i], starts[i + 1]);
            assert_eq!(buckets.range(1 + i), expected, "{rule:?} bucket {i}");
        }
        let overflow = range(starts[count], 1 << 64);
        assert_eq!(buckets.range(count + 1), overflow, "{rule:?} overflow");
        assert_eq!(
            buckets.range(count + 2),
            None,
            "{rule:?}: the sum is no bucket"
        );
    }
}

#[test]
fn rules_out_of_range_are_refused() {
    let refused = |make: fn() -> Buckets| std::panic::catch_unwind(make).is_err();
    assert!(
        refused(|| Buckets::power_of_two(3, 4)),
        "lowest not a power of two"
    );
    assert!(refused(|| Buckets::power_of_two(1, 65)), "past u64::MAX");
    assert!(refused(|| Buckets::power_of_two(0, 0)), "no bucket");
    assert!(
        refused(|| Buckets::log_linear(13, 0, 4)),
        "too many sub-buckets"
    );
    assert!(
        refused(|| Buckets::log_linear(2, 9, 4)),
        "9 starts no bucket"
    );
    assert!(
        refused(|| Buckets::log_linear(2, 0, (63 << 2) + 1)),
        "past u64::MAX"
    );
    assert!(
        refused(|| Buckets::linear(0, 3, 4)),
        "step not a power of two"
    );
    assert!(
        refused(|| Buckets::linear(u64::MAX - 15, 16, 2)),
        "past u64::MAX"
    );
    // The largest of each is accepted.
    assert_eq!(Buckets::power_of_two(0, 65).count(), 65);
    assert_eq!(Buckets::log_linear(2, 0, 63 << 2).count(), 252);
    assert_eq!(Buckets::linear(0, 1 << 63, 2).count(), 2);
}

#[test]
fn observed_edges_count_in_their_reference_buckets_with_their_sum() {
    let machine = Machine::new(2);
    for rule in RULES.iter().filter(|r| r.buckets().slots() <= 512) {
        let h = Histogram::new(machine.zone(), rule.buckets()).unwrap();
        let values = edges(*rule);
        let mut expected = vec![0u64; h.buckets().slots()];
        for (i, &v) in values.iter().enumerate() {
            machine.run_on(i % 2, || h.observe(v));
            expected[rule.slot_of(v)] += 1;
            expected[h.buckets().sum_slot()] = expected[h.buckets().sum_slot()].wrapping_add(v);
        }
        let mut out = vec![0; h.buckets().slots()];
        let read = h.read(&mut out);
        assert_eq!(read.values(), expected, "{rule:?}");
        assert_eq!(read.count(), values.len() as u64, "{rule:?}");
        assert_eq!((h.count(), h.sum()), (read.count(), read.sum()), "{rule:?}");
    }
}

/// The slot values a list of values gives under `buckets`: each value's bucket and the sum.
fn expected_values(buckets: Buckets, values: impl IntoIterator<Item = u64>) -> Vec<u64> {
    let mut expected = vec![0u64; buckets.slots()];
    for v in values {
        expected[buckets.slot_of(v)] += 1;
        expected[buckets.sum_slot()] = expected[buckets.sum_slot()].wrapping_add(v);
    }
    expected
}

/// The value thread `t` observes at its `k`-th observe: spread over every bucket of a
/// log-linear rule with 8 sub-buckets up to 2^20, underflow and overflow included.
fn value(t: u64, k: u64) -> u64 {
    let x = (t * 7919 + k * 104_729) % 1_000_003;
    (x * x) >> (x % 24)
}

#[test]
fn exact_buckets_and_sum_from_migrating_threads() {
    const THREADS: u64 = 12;
    const ROUNDS: u64 = if cfg!(miri) { 2 } else { 50 };
    const OBSERVES: u64 = if cfg!(miri) { 20 } else { 300 };
    const RULE: Buckets = Buckets::log_linear(3, 16, 120);
    let machine = Machine::new(8);
    let h = Histogram::new(machine.zone(), RULE).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (machine, h) = (&machine, &h);
            s.spawn(move || {
                for round in 0..ROUNDS {
                    let on = machine.bind(((t + round) % 8) as usize).unwrap();
                    for k in 0..OBSERVES / 2 {
                        h.observe(value(t, round * OBSERVES + k));
                    }
                    // Half the round on the next CPU, as a scheduler migrates.
                    let _on = on.migrate(((t + round + 1) % 8) as usize).unwrap();
                    for k in OBSERVES / 2..OBSERVES {
                        h.observe(value(t, round * OBSERVES + k));
                    }
                }
            });
        }
    });
    let all = (0..THREADS).flat_map(|t| (0..ROUNDS * OBSERVES).map(move |k| value(t, k)));
    let expected = expected_values(RULE, all);
    assert!(
        expected[0] > 0 && expected[RULE.overflow_slot()] > 0,
        "{expected:?}"
    );
    let mut out = [0; RULE.slots()];
    let read = h.read(&mut out);
    assert_eq!(read.values(), expected);
    assert_eq!(read.count(), THREADS * ROUNDS * OBSERVES);
}

/// Only turns a storm that never delivers into a failure instead of a hang.
const MAX_STEPS: u64 = 200_000;

#[test]
fn interrupt_handlers_observe_into_the_same_slots_exactly() {
    const RULE: Buckets = Buckets::power_of_two(1, 20);
    const IN_HANDLER: u64 = 1000; // bucket [512, 1024)
    const IN_THREAD: u64 = 5; // bucket [4, 8)
    const STEP: u64 = 5_000;
    let machine = Machine::new(2);
    let h = Histogram::new(machine.zone(), RULE).unwrap();
    let handled = AtomicU64::new(0);
    let handler = |_cpu: usize| {
        h.observe(IN_HANDLER);
        handled.fetch_add(1, Ordering::Relaxed);
    };
    let work = || {
        let mut observed = 0;
        let (_, storm) = interrupt_storm_until(MAX_STEPS, |storm| {
            if storm.handled >= 200 {
                return true;
            }
            (0..STEP).for_each(|_| h.observe(IN_THREAD));
            observed += STEP;
            false
        });
        (observed, storm.handled)
    };
    let runs: Vec<(u64, u64)> = machine.with_interrupt_handler(&handler, || {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..2)
                .map(|cpu| {
                    let (machine, work) = (&machine, &work);
                    s.spawn(move || machine.run_on(cpu, work))
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        })
    });
    let observed: u64 = runs.iter().map(|r| r.0).sum();
    let handled = handled.into_inner();
    assert!(
        runs.iter().all(|r| r.1 >= 200),
        "interrupts handled per CPU {runs:?}: the storm proves nothing ({})",
        pcpu_counter::sim::host_load()
    );
    let mut expected = vec![0u64; RULE.slots()];
    expected[RULE.slot_of(IN_THREAD)] = observed;
    expected[RULE.slot_of(IN_HANDLER)] = handled;
    expected[RULE.sum_slot()] = observed * IN_THREAD + handled * IN_HANDLER;
    let mut out = [0; RULE.slots()];
    assert_eq!(h.read(&mut out).values(), expected);
    println!("{observed} observes and {handled} in interrupt handlers, every one counted");
}

/// Sets its flag when dropped, also when an assertion unwinds, so that observer threads stop
/// and a failing test fails instead of waiting for them forever.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `observers` CPUs observe while CPU 0 reads `reads` times; returns the first read whose
/// `count` is not its last cumulative bucket (`+Inf`), if any.
fn inconsistent_read_while_observing(observers: usize, reads: usize) -> Option<String> {
    // 64 buckets: the first ones are read while later slots still wait, so a count kept apart
    // would be read well after the buckets it should agree with.
    const RULE: Buckets = Buckets::power_of_two(1, 64);
    let machine = Machine::new(observers + 1);
    let h = Histogram::new(machine.zone(), RULE).unwrap();
    let (stop, start) = (AtomicBool::new(false), Barrier::new(observers + 1));
    std::thread::scope(|s| {
        for cpu in 1..=observers {
            let (machine, h, stop, start) = (&machine, &h, &stop, &start);
            s.spawn(move || {
                machine.run_on(cpu, || {
                    start.wait();
                    let mut k = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        h.observe(k % 4096);
                        k += 1;
                    }
                })
            });
        }
        start.wait();
        let _stop = StopOnDrop(&stop);
        let mut out = [0; RULE.slots()];
        let found = (0..reads).find_map(|i| {
            let read = h.read(&mut out);
            let inf = read.cumulative().last().unwrap();
            let buckets: u64 = read.values()[..=RULE.overflow_slot()].iter().sum();
            (inf != (u64::MAX, read.count()) || buckets != read.count()).then(|| {
                format!(
                    "read {i}: count {} but +Inf bucket {inf:?}, buckets summing to {buckets}",
                    read.count()
                )
            })
        });
        stop.store(true, Ordering::Relaxed);
        found
    })
}

#[test]
fn every_read_while_cpus_observe_has_count_equal_to_the_inf_bucket() {
    let reads = if cfg!(miri) { 20 } else { 20_000 };
    if let Some(bad) = inconsistent_read_while_observing(3, reads) {
        panic!("{bad}");
    }
}

/// The broken variant `histogram_stored_count` (a count kept in a slot of its own, added after
/// the bucket): the same reads must see a count that is not the `+Inf` bucket.
#[cfg(pcpu_counter_broken = "histogram_stored_count")]
#[test]
fn consistency_check_catches_a_stored_count() {
    // Tries, not time: on a loaded machine the observers may wait for a core.
    const TRIES: usize = 50;
    let caught = (1..=TRIES).find_map(|_| inconsistent_read_while_observing(2, 20_000));
    let bad = caught.unwrap_or_else(|| panic!("a stored count was never caught in {TRIES} tries"));
    println!("the stored count was caught: {bad}");
}

#[test]
fn fetch_and_zero_loses_no_observation_under_concurrent_observes() {
    const RULE: Buckets = Buckets::linear(0, 4, 6);
    const OBSERVERS: usize = 3;
    let machine = Machine::new(OBSERVERS + 1);
    let h = Histogram::new(machine.zone(), RULE).unwrap();
    let (stop, start) = (AtomicBool::new(false), Barrier::new(OBSERVERS + 1));
    std::thread::scope(|s| {
        let observers: Vec<_> = (1..=OBSERVERS)
            .map(|cpu| {
                let (machine, h, stop, start) = (&machine, &h, &stop, &start);
                s.spawn(move || {
                    let mut expected = vec![0u64; RULE.slots()];
                    machine.run_on(cpu, || {
                        start.wait();
                        let mut k = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            let v = (k * 7 + cpu as u64) % 30;
                            h.observe(v);
                            expected[RULE.slot_of(v)] += 1;
                            expected[RULE.sum_slot()] += v;
                            k += 1;
                        }
                    });
                    expected
                })
            })
            .collect();
        start.wait();
        let _stop = StopOnDrop(&stop);
        let (min_takes, min_taken) = if cfg!(miri) {
            (20, 200)
        } else {
            (2_000, 300_000)
        };
        let mut taken = vec![0u64; RULE.slots()];
        let mut takes = 0;
        while takes < min_takes || taken[..RULE.sum_slot()].iter().sum::<u64>() < min_taken {
            let mut out = [0; RULE.slots()];
            let delta = h.fetch_and_zero(&mut out);
            assert_eq!(delta.cumulative().last().unwrap().1, delta.count());
            for (t, v) in taken.iter_mut().zip(delta.values()) {
                *t += v;
            }
            takes += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let mut observed = vec![0u64; RULE.slots()];
        for o in observers {
            for (total, v) in observed.iter_mut().zip(o.join().unwrap()) {
                *total += v;
            }
        }
        let mut out = [0; RULE.slots()];
        let rest = h.read(&mut out);
        let exported: Vec<u64> = taken
            .iter()
            .zip(rest.values())
            .map(|(t, r)| t + r)
            .collect();
        assert_eq!(exported, observed, "deltas plus the rest, slot by slot");
    });
}

#[test]
fn quantiles_lie_in_their_bucket_within_each_rules_bound() {
    let machine = Machine::new(2);
    let rules: Vec<Rule> = RULES
        .into_iter()
        .filter(|r| r.buckets().slots() <= 512)
        .collect();
    let strategy = (
        0..rules.len(),
        proptest::collection::vec(
            prop_oneof![0..64u64, 0..100_000u64, 1000..1200u64, any::<u64>()],
            1..200,
        ),
        0.0..=1.0f64,
    );
    let mut runner = TestRunner::new(common::proptest_config());
    let result = runner.run(&strategy, |(r, mut values, q)| {
        let rule = rules[r];
        let h = Histogram::new(machine.zone(), rule.buckets()).unwrap();
        for (i, &v) in values.iter().enumerate() {
            machine.run_on(i % 2, || h.observe(v));
        }
        let mut out = vec![0; h.buckets().slots()];
        let read = h.read(&mut out);
        let estimate = read.quantile(q).unwrap();
        values.sort_unstable();
        let rank = ((q * values.len() as f64).ceil() as usize).max(1);
        let truth = values[rank - 1];
        prop_assert!(
            estimate.lowest() <= truth && truth <= estimate.highest(),
            "{rule:?} q {q}: the true quantile {truth} outside {estimate:?}"
        );
        prop_assert_eq!(estimate.slot(), rule.slot_of(truth));
        let regular = (1..=h.buckets().count()).contains(&estimate.slot());
        prop_assert!(
            !regular || rule.error_holds(estimate.midpoint(), truth),
            "{rule:?} q {q}: midpoint {} of {estimate:?} too far from {truth}",
            estimate.midpoint()
        );
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn an_empty_histogram_has_no_quantile_and_a_bad_buffer_panics() {
    let machine = Machine::new(1);
    let h = Histogram::new(machine.zone(), Buckets::linear(0, 2, 4)).unwrap();
    assert_eq!(machine.zone().in_use(), 7);
    let mut out = [0; 7];
    assert_eq!(h.read(&mut out).quantile(0.5), None);
    let short =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.read(&mut [0; 6]).count()));
    assert!(short.is_err(), "a buffer shorter than the slots");
    drop(h);
    assert_eq!(machine.zone().in_use(), 0, "the run freed");
}

#[test]
fn min_and_max_are_exact_from_migrating_threads_and_interrupt_handlers() {
    const STEP: u64 = 2_000;
    let machine = Machine::new(2);
    let marks = MinMax::new(machine.zone()).unwrap();
    assert_eq!(
        (marks.min(), marks.max(), marks.fetch_and_reset()),
        (None, None, (None, None))
    );
    let handled = AtomicU64::new(0);
    // The handler's values are the extremes; the threads' lie between them.
    let handler = |cpu: usize| {
        marks.observe(if cpu == 0 { 3 } else { 1 << 50 });
        handled.fetch_add(1, Ordering::Relaxed);
    };
    machine.with_interrupt_handler(&handler, || {
        std::thread::scope(|s| {
            for t in 0..2usize {
                let (machine, marks) = (&machine, &marks);
                s.spawn(move || {
                    let on = machine.bind(t).unwrap();
                    let (_, storm) = interrupt_storm_until(MAX_STEPS, |storm| {
                        if storm.handled >= 50 {
                            return true;
                        }
                        (0..STEP).for_each(|k| marks.observe(100 + (k * 7919) % 1_000_000));
                        false
                    });
                    assert!(storm.handled >= 50, "{}", pcpu_counter::sim::host_load());
                    // And from the other CPU, as a scheduler migrates.
                    let _on = on.migrate(1 - t).unwrap();
                    marks.observe(50 + t as u64);
                });
            }
        })
    });
    assert!(handled.into_inner() >= 100);
    assert_eq!((marks.min(), marks.max()), (Some(3), Some(1 << 50)));
    assert_eq!(marks.fetch_and_reset(), (Some(3), Some(1 << 50)));
    machine.run_on(1, || marks.observe(77));
    assert_eq!(marks.fetch_and_reset(), (Some(77), Some(77)));
}

#[test]
fn min_max_reset_under_concurrent_observes_loses_no_extreme() {
    const OBSERVERS: usize = 3;
    let machine = Machine::new(OBSERVERS + 1);
    let marks = MinMax::new(machine.zone()).unwrap();
    let (stop, start) = (AtomicBool::new(false), Barrier::new(OBSERVERS + 1));
    std::thread::scope(|s| {
        let observers: Vec<_> = (1..=OBSERVERS)
            .map(|cpu| {
                let (machine, marks, stop, start) = (&machine, &marks, &stop, &start);
                s.spawn(move || {
                    let (mut low, mut high) = (u64::MAX, 0);
                    machine.run_on(cpu, || {
                        start.wait();
                        let mut k = 1u64;
                        while !stop.load(Ordering::Relaxed) {
                            // Odd values: a reading of anything else was never observed.
                            let v = (k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20) | 1;
                            marks.observe(v);
                            (low, high) = (low.min(v), high.max(v));
                            k += 1;
                        }
                    });
                    (low, high)
                })
            })
            .collect();
        start.wait();
        let _stop = StopOnDrop(&stop);
        let (mut low, mut high) = (u64::MAX, 0);
        for _ in 0..if cfg!(miri) { 20 } else { 20_000 } {
            // A racing observe may be in this minimum and the next maximum: each is checked
            // alone.
            let (min, max) = marks.fetch_and_reset();
            assert!(min.is_none_or(|m| m % 2 == 1), "{min:?} was never observed");
            assert!(max.is_none_or(|m| m % 2 == 1), "{max:?} was never observed");
            (low, high) = (low.min(min.unwrap_or(u64::MAX)), high.max(max.unwrap_or(0)));
        }
        stop.store(true, Ordering::Relaxed);
        let (mut true_low, mut true_high) = (u64::MAX, 0);
        for o in observers {
            let (l, h) = o.join().unwrap();
            (true_low, true_high) = (true_low.min(l), true_high.max(h));
        }
        let (min, max) = marks.fetch_and_reset();
        (low, high) = (low.min(min.unwrap_or(u64::MAX)), high.max(max.unwrap_or(0)));
        assert_eq!(
            (low, high),
            (true_low, true_high),
            "every period's extremes together"
        );
    });
}

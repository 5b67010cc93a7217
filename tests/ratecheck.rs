//! `counter_ratecheck`: FreeBSD's contract with exact values, tick wrap-around, and one
//! winner of the reset among racing CPUs (a lock-free naive reset is caught by the same check).

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Barrier;

use pcpu_counter::sim::Machine;
use pcpu_counter::{
    freebsd::counter_ratecheck,
    ratecheck::{Clock, CounterRate},
    Counter,
};

#[test]
fn zero_under_minus_one_over_count_at_new_second() {
    let machine = Machine::new(2);
    static NOW: AtomicU32 = AtomicU32::new(10_000);
    let clock = Clock {
        now: || NOW.load(Ordering::Relaxed),
        hz: 100,
    };
    let rate = CounterRate::new(machine.alloc().unwrap(), clock).unwrap();
    machine.run_on(1, || {
        let first: Vec<i64> = (0..8).map(|_| counter_ratecheck(&rate, 5)).collect();
        assert_eq!(first, [0, 0, 0, 0, 0, -1, -1, -1]);
        NOW.store(10_099, Ordering::Relaxed); // 99 ticks: the same second
        assert_eq!(rate.check(5), -1);
        NOW.store(10_100, Ordering::Relaxed);
        assert_eq!(
            rate.check(5),
            9,
            "the last second's 9 events, over the limit"
        );
        assert_eq!(rate.counter().fetch(), 1);
        let second: Vec<i64> = (0..4).map(|_| rate.check(5)).collect();
        assert_eq!(second, [0, 0, 0, 0]);
        NOW.store(10_300, Ordering::Relaxed); // a quiet second: 5 events are not over 5
        assert_eq!(rate.check(5), 0, "at the limit, the reset reports 0");
        // A limit of 0: every event is over it, even the one that opens a second, whose -1
        // then wins over the count (FreeBSD's order: reset, count, compare).
        assert_eq!(rate.check(0), -1);
        NOW.store(10_400, Ordering::Relaxed);
        assert_eq!(rate.check(0), -1);
        assert_eq!(rate.counter().fetch(), 1);
    });
}

#[test]
fn ticks_wrap_around() {
    let machine = Machine::new(1);
    let rate = CounterRate::new(
        machine.alloc().unwrap(),
        Clock {
            now: || 0,
            hz: 1000,
        },
    )
    .unwrap();
    machine.run_on(0, || {
        assert_eq!(rate.check_at(u32::MAX - 500, 1), 0);
        assert_eq!(rate.check_at(u32::MAX - 1, 1), -1);
        assert_eq!(
            rate.check_at(200, 1),
            -1,
            "701 ticks later across the wrap: same second"
        );
        assert_eq!(
            rate.check_at(499, 1),
            3,
            "1000 ticks later across the wrap: new second"
        );
    });
}

/// `threads` CPUs call `check` at once at the start of a new second; returns how many of
/// them saw a count (> 0), and whether each of those saw `want`.
fn winners(check: &(dyn Fn(u32) -> i64 + Sync), machine: &Machine, now: u32, want: i64) -> usize {
    let threads = machine.ncpus();
    let start = Barrier::new(threads);
    let results: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|cpu| {
                let start = &start;
                s.spawn(move || {
                    machine.run_on(cpu, || {
                        start.wait();
                        check(now)
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        assert!(*r == want || *r == 0 || *r == -1, "unexpected result {r}");
    }
    results.iter().filter(|&&r| r > 0).count()
}

#[test]
fn one_cpu_wins_each_reset() {
    let machine = Machine::new(8);
    let rate = CounterRate::new(machine.alloc().unwrap(), Clock { now: || 0, hz: 100 }).unwrap();
    // 199 resets (5 under Miri, which is slow).
    for second in 1..if cfg!(miri) { 6 } else { 200u32 } {
        // 30 events from CPU 0, over the limit of 10; then 8 CPUs race at the next second.
        let before = rate.counter().fetch() as i64;
        machine.run_on(0, || {
            (0..30).for_each(|_| _ = rate.check_at(second * 100 - 1, 10))
        });
        let want = before + 30;
        let won = winners(&|now| rate.check_at(now, 10), &machine, second * 100, want);
        assert_eq!(won, 1, "second {second}: {won} CPUs reported the count");
    }
}

/// FreeBSD's ratecheck without the reset lock: every CPU that sees a new second resets,
/// with FreeBSD's fetch-then-zero.
struct NaiveRate<'z> {
    rate: Counter<'z>,
    ticks: AtomicU32,
    over: AtomicI32,
}

impl NaiveRate<'_> {
    fn check_at(&self, now: u32, limit: i64) -> i64 {
        let mut val = i64::from(self.over.load(Ordering::Relaxed));
        if now.wrapping_sub(self.ticks.load(Ordering::Relaxed)) >= 100 {
            let last = self.rate.fetch() as i64;
            std::thread::yield_now(); // widen the window the lock closes
            self.rate.zero();
            self.over.store(0, Ordering::Relaxed);
            self.ticks.store(now, Ordering::Relaxed);
            val = if last <= limit { 0 } else { last };
        }
        self.rate.inc();
        if self.over.load(Ordering::Relaxed) != 0 {
            return -1;
        }
        if self.rate.fetch() as i64 > limit {
            self.over.store(-1, Ordering::Relaxed);
            val = -1;
        }
        val
    }
}

#[test]
fn the_same_check_catches_a_reset_without_the_lock() {
    let machine = Machine::new(8);
    let naive = NaiveRate {
        rate: machine.alloc().unwrap(),
        ticks: AtomicU32::new(0),
        over: AtomicI32::new(0),
    };
    let caught = (1..200u32).any(|second| {
        machine.run_on(0, || {
            (0..30).for_each(|_| _ = naive.check_at(second * 100 - 1, 10))
        });
        // Whatever the naive reset returns, more than one winner is the failure.
        let threads = machine.ncpus();
        let start = Barrier::new(threads);
        let results: Vec<i64> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|cpu| {
                    let (start, naive, machine) = (&start, &naive, &machine);
                    s.spawn(move || {
                        machine.run_on(cpu, || {
                            start.wait();
                            naive.check_at(second * 100, 10)
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        results.iter().filter(|&&r| r > 0).count() > 1
    });
    assert!(
        caught,
        "the lock-free reset never had two winners in 199 seconds"
    );
}

/// CPUs `0..cpus` each check `n` events at tick 1050 (second 10, which a check at 1000 opened)
/// against `limit`, all at once; returns how many of those checks reported 0 (under the limit).
fn race_in_one_second(
    machine: &Machine,
    rate: &CounterRate<'_>,
    cpus: usize,
    n: u64,
    limit: i64,
) -> usize {
    let zeros = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for cpu in 0..cpus {
            let zeros = &zeros;
            s.spawn(move || {
                machine.run_on(cpu, || {
                    for _ in 0..n {
                        match rate.check_at(1050, limit) {
                            0 => drop(zeros.fetch_add(1, Ordering::Relaxed)),
                            -1 => {}
                            r => panic!("unexpected {r}"),
                        }
                    }
                })
            });
        }
    });
    zeros.into_inner()
}

#[test]
fn concurrent_events_within_a_second_are_all_counted() {
    // The limit, and events per CPU: more than the limit in all (fewer under Miri, which is
    // slow).
    const LIMIT: i64 = if cfg!(miri) { 100 } else { 1_000 };
    const N: u64 = if cfg!(miri) { 40 } else { 500 };
    let machine = Machine::new(6);
    let rate = CounterRate::new(machine.alloc().unwrap(), Clock { now: || 0, hz: 100 }).unwrap();
    machine.run_on(0, || assert_eq!(rate.check_at(1000, LIMIT), 0)); // opens second 10
    let zeros = race_in_one_second(&machine, &rate, 6, N, LIMIT);
    assert_eq!(
        rate.counter().fetch(),
        6 * N + 1,
        "no reset in the second: every event counted"
    );
    assert!(
        (zeros as i64) < LIMIT,
        "{zeros} events reported under a limit of {LIMIT} (1 already used)"
    );
    machine.run_on(3, || {
        assert_eq!(rate.check_at(1100, LIMIT), 6 * N as i64 + 1)
    });
}

#[test]
fn monotonic_clock_default() {
    let machine = Machine::new(1);
    let rate = CounterRate::new(machine.alloc().unwrap(), Clock::monotonic()).unwrap();
    machine.run_on(0, || {
        // A limit no test run can exceed: only the first reset can happen, reporting 0.
        let results: Vec<i64> = (0..100).map(|_| rate.check(1 << 40)).collect();
        assert_eq!(results, vec![0; 100]);
    });
    assert!(rate.counter().fetch() >= 1 && rate.counter().fetch() <= 100);
}

/// The limit holds whatever the approximate counter's batch: CPUs race in one second, and
/// fewer than `LIMIT` events (1 used to open the second) report 0, every event counted. At
/// batches 16 and 32 the bound (`CPUS * (batch - 1)`) is below the limit, so the first
/// events' checks answer from the approximate count; at 256 and 1024 every check sums (under
/// Miri: 16 and 1024).
#[test]
fn the_limit_holds_at_every_batch() {
    // Fewer CPUs and events under Miri, which is slow.
    const CPUS: usize = if cfg!(miri) { 3 } else { 6 };
    const LIMIT: i64 = if cfg!(miri) { 120 } else { 1_000 };
    const N: u64 = if cfg!(miri) { 50 } else { 400 };
    let batches: &[u64] = if cfg!(miri) {
        &[16, 1024]
    } else {
        &[16, 32, 256, 1024]
    };
    for &batch in batches {
        let machine = Machine::new(CPUS);
        let clock = Clock { now: || 0, hz: 100 };
        let rate = CounterRate::with_batch(machine.alloc().unwrap(), clock, batch).unwrap();
        machine.run_on(0, || assert_eq!(rate.check_at(1000, LIMIT), 0));
        let zeros = race_in_one_second(&machine, &rate, CPUS, N, LIMIT) as i64;
        assert_eq!(rate.counter().fetch(), CPUS as u64 * N + 1, "batch {batch}");
        assert!(zeros < LIMIT, "batch {batch}: {zeros} events reported 0");
    }
}

/// A check far below the limit is answered from the approximate count alone (one load): on
/// 256 CPUs with batch 64 the bound is 256 * 63, and a limit of a million is far above it.
/// Sequentially, on one CPU after another, exactly `limit` events report 0.
#[test]
fn checks_far_below_the_limit_need_no_sum() {
    let machine = Machine::new(256);
    let rate = CounterRate::new(machine.alloc().unwrap(), Clock { now: || 0, hz: 100 }).unwrap();
    assert_eq!(rate.counter().accuracy(), (256 * 63, 0));
    let limit: i64 = 1_000_000;
    // Fewer CPUs and events under Miri, which is slow.
    let (step, events) = if cfg!(miri) { (51, 10) } else { (5, 100) };
    for cpu in (0..256).step_by(step) {
        machine.run_on(cpu, || {
            (0..events).for_each(|_| assert_eq!(rate.check_at(1000, limit), 0))
        });
        assert_eq!(
            rate.counter().compare_approximate(limit),
            Some(std::cmp::Ordering::Less),
            "after CPU {cpu}"
        );
    }
    // From far below the limit to past it: 6 CPUs, batch 16 (bound 90), limit 200.
    let machine = Machine::new(6);
    let clock = Clock { now: || 0, hz: 100 };
    let rate = CounterRate::with_batch(machine.alloc().unwrap(), clock, 16).unwrap();
    let results: Vec<i64> = (0..250)
        .map(|i| machine.run_on(i % 6, || rate.check_at(1000, 200)))
        .collect();
    assert_eq!(results.iter().filter(|&&r| r == 0).count(), 200);
    assert!(results[200..].iter().all(|&r| r == -1), "{results:?}");
    assert_eq!(rate.counter().fetch(), 250);
    assert_eq!(
        CounterRate::with_batch(machine.alloc().unwrap(), Clock::monotonic(), 3).unwrap_err(),
        pcpu_counter::Error::BadBatch { batch: 3 }
    );
}

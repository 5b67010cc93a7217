//! The approximate counter (`ApproxCounter`, issue 21 item 2): its O(1) read, `compare` far
//! from and near its threshold, the precise sum, a rate check far below its limit, its
//! memory, all against the CPU count; and its add against the plain counter's add.

use std::hint::black_box;

use pcpu_counter::ratecheck::{Clock, CounterRate};
use pcpu_counter::sim::Machine;
use pcpu_counter::{ApproxCounter, Counter};

use crate::harness::{add_rounds, eight, medians_in_turn, ns_per_op, Sink};

/// The CPU counts of the read rows (the same as the `fetch` rows').
const CPUS: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// The batch of every row: `ApproxCounter::DEFAULT_BATCH` (64).
const BATCH: u64 = ApproxCounter::DEFAULT_BATCH;

/// The approximate counter's add, 8n times.
#[inline(never)]
pub fn approx_one(counter: &ApproxCounter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

/// The plain counter's add, 8n times (as `single::pcpu_one`, here for the same loop shape).
#[inline(never)]
pub fn plain_one(counter: &Counter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

pub fn run(sink: &mut Sink, quick: bool) {
    let (rounds, reads) = if quick { (3, 2_000u64) } else { (9, 20_000) };
    sink.record("approx", "batch", "-", BATCH, "");
    for ncpus in CPUS {
        let machine = Machine::new(ncpus);
        let c = ApproxCounter::new(machine.alloc().expect("alloc"), BATCH).expect("batch");
        // Every CPU adds 1000 + cpu: each carries 15 or 16 batches and keeps a remainder.
        for cpu in 0..ncpus {
            machine.run_on(cpu, || c.add(1000 + cpu as i64));
        }
        let total = (1000 * ncpus + ncpus * (ncpus - 1) / 2) as u64;
        assert_eq!(c.precise(), total);
        let (under, over) = c.accuracy();
        assert!(total - c.approximate() <= under && over == 0);
        let far = total as i64 + under as i64 + 1_000;
        let near = total as i64;
        assert_eq!(c.compare_approximate(far), Some(std::cmp::Ordering::Less));
        assert_eq!(c.compare_approximate(near), None);

        let ns = ns_per_op(rounds, 8 * reads, || {
            for _ in 0..reads {
                eight!(black_box(black_box(&c).approximate()));
            }
        });
        sink.record("approx", "approximate", ncpus, ns, "ns");
        let ns = ns_per_op(rounds, 8 * reads, || {
            for _ in 0..reads {
                eight!(black_box(black_box(&c).compare(black_box(far))));
            }
        });
        sink.record("approx", "compare far", ncpus, ns, "ns");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                black_box(black_box(&c).compare(black_box(near)));
            }
        });
        sink.record("approx", "compare near", ncpus, ns, "ns");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                black_box(black_box(&c).precise());
            }
        });
        sink.record("approx", "precise", ncpus, ns, "ns");

        // A rate check far below its limit: one add, the fence, one load (no sum).
        let rate = CounterRate::new(machine.alloc().expect("alloc"), Clock { now: || 0, hz: 1 })
            .expect("rate");
        let limit = i64::MAX / 2;
        let ns = machine.run_on(ncpus - 1, || {
            ns_per_op(rounds, reads, || {
                for _ in 0..reads {
                    black_box(rate.check_at(1, black_box(limit)));
                }
            })
        });
        assert_eq!(rate.counter().fetch(), rounds as u64 * reads);
        sink.record("approx", "ratecheck far below the limit", ncpus, ns, "ns");

        // The slot and its sixteens on every CPU, and the handle.
        let bytes = 16 * ncpus + std::mem::size_of::<ApproxCounter<'_>>();
        sink.record("approx", "memory", ncpus, bytes, "bytes");
        sink.record("approx", "bound (under)", ncpus, under, "");
    }

    run_add(sink, quick);
}

/// The adds: one thread on one CPU, the plain add and the approximate add (to its sixteens
/// once every 16 adds, to the shared word once every 64) in alternating rounds, median of
/// each.
pub fn run_add(sink: &mut Sink, quick: bool) {
    let (rounds, n) = add_rounds(quick);
    let n = black_box(n);
    let machine = Machine::new(1);
    let _bound = machine.bind(0).expect("bind");
    let plain = machine.alloc().expect("alloc");
    let approx = ApproxCounter::new(machine.alloc().expect("alloc"), BATCH).expect("batch");
    let medians = medians_in_turn(rounds, 2, |i| {
        match i {
            0 => plain_one(&plain, n),
            _ => approx_one(&approx, n),
        }
        8 * n
    });
    let adds = rounds as u64 * 8 * n;
    assert_eq!((plain.fetch(), approx.precise()), (adds, adds));
    assert_eq!(approx.approximate(), adds & !(BATCH - 1));
    sink.record("approx-add", "Counter::add", 1, medians[0], "ns/add");
    sink.record("approx-add", "ApproxCounter::add", 1, medians[1], "ns/add");
}

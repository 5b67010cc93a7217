//! The lazy counter (`LazyCounter`, issue 31 item 4): its memory idle and moved, and its add
//! before the move (the shared word) and after it, against the plain counter's add in the
//! same rounds.

use std::hint::black_box;
use std::mem::size_of;
use std::time::Instant;

use pcpu_counter::sim::Machine;
use pcpu_counter::{Counter, LazyCounter};

use crate::harness::{eight, median, Sink};
use crate::reads::ALLOC_CPUS;

/// The plain counter's add, 8n times (as `single::pcpu_one`, here for the same loop shape).
#[inline(never)]
pub fn plain_one(counter: &Counter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

/// The lazy counter's add, 8n times.
#[inline(never)]
pub fn lazy_one(counter: &LazyCounter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

pub fn run(sink: &mut Sink, quick: bool) {
    // Memory: idle, the counter itself and no slot (checked: the zone lends none); moved,
    // plus a slot of 8 bytes on each of `ALLOC_CPUS` CPUs, as the plain counter's.
    let cpus = ALLOC_CPUS;
    let machine = Machine::new(cpus);
    let idle = LazyCounter::new(machine.zone());
    idle.inc();
    assert_eq!((machine.zone().in_use(), idle.is_per_cpu()), (0, false));
    let lazy = size_of::<LazyCounter<'_>>();
    sink.record("lazy", "memory idle", cpus, lazy, "bytes");
    sink.record("lazy", "memory moved", cpus, lazy + 8 * cpus, "bytes");
    let plain = size_of::<Counter<'_>>() + 8 * cpus;
    sink.record("lazy", "memory Counter", cpus, plain, "bytes");

    // The adds: one thread on one CPU, in alternating rounds, median of each: the plain add,
    // the lazy add before its move (one thread never contends, and no threshold is set) and
    // after it (`try_move`).
    let (rounds, n) = if quick {
        (5, 1u64 << 12)
    } else {
        (101, 1 << 15)
    };
    let n = black_box(n);
    let machine = Machine::new(1);
    let _bound = machine.bind(0).expect("bind");
    let plain = machine.alloc().expect("alloc");
    let shared = LazyCounter::new(machine.zone());
    let moved = LazyCounter::new(machine.zone());
    moved.try_move().expect("a slot");
    let mut ns = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..rounds {
        let t = Instant::now();
        plain_one(&plain, n);
        ns[0].push(t.elapsed().as_nanos() as f64 / (8 * n) as f64);
        let t = Instant::now();
        lazy_one(&shared, n);
        ns[1].push(t.elapsed().as_nanos() as f64 / (8 * n) as f64);
        let t = Instant::now();
        lazy_one(&moved, n);
        ns[2].push(t.elapsed().as_nanos() as f64 / (8 * n) as f64);
    }
    let adds = rounds as u64 * 8 * n;
    assert_eq!(
        (plain.fetch(), shared.fetch(), moved.fetch()),
        (adds, adds, adds)
    );
    assert_eq!((shared.is_per_cpu(), moved.is_per_cpu()), (false, true));
    let [plain_ns, shared_ns, moved_ns] = &mut ns;
    sink.record("lazy-add", "Counter::add", 1, median(plain_ns), "ns/add");
    let before = "LazyCounter::add before the move";
    sink.record("lazy-add", before, 1, median(shared_ns), "ns/add");
    let after = "LazyCounter::add after the move";
    sink.record("lazy-add", after, 1, median(moved_ns), "ns/add");
}

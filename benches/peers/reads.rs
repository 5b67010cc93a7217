//! The slow paths: `fetch` and `zero` against the CPU count, and alloc + free.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use pcpu_counter::sim::Machine;
use thread_local::ThreadLocal;

use crate::harness::{ns_per_op, Sink};

/// The CPU counts `fetch` and `zero` are measured at.
pub const CPUS: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

/// The CPU count of the alloc + free and memory figures.
pub const ALLOC_CPUS: usize = 64;

pub fn run(sink: &mut Sink, quick: bool) {
    let (rounds, reads, allocs) = if quick {
        (3, 2_000, 2_000)
    } else {
        (9, 20_000, 50_000)
    };
    for ncpus in CPUS {
        let machine = Machine::new(ncpus);
        let counter = machine.alloc().expect("alloc");
        for cpu in 0..ncpus {
            machine.run_on(cpu, || counter.add(cpu as i64 + 1));
        }
        let total = (ncpus * (ncpus + 1) / 2) as u64;
        assert_eq!(counter.fetch(), total);
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                black_box(counter.fetch());
            }
        });
        sink.record("fetch", "pcpu-counter fetch", ncpus, ns, "ns");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                black_box(counter.fetch_and_zero());
            }
        });
        assert_eq!(counter.fetch(), 0, "zero left a count");
        sink.record("fetch", "pcpu-counter zero", ncpus, ns, "ns");

        // The stripes' read: the same sum over one padded stripe per CPU.
        let stripes: Vec<CachePadded<AtomicU64>> = (0..ncpus)
            .map(|_| CachePadded::new(AtomicU64::new(1)))
            .collect();
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                black_box(stripes.iter().map(|s| s.load(Relaxed)).sum::<u64>());
            }
        });
        sink.record("fetch", "CachePadded stripes sum", ncpus, ns, "ns");
    }

    let machine = Machine::new(ALLOC_CPUS);
    let ns = ns_per_op(rounds, allocs, || {
        for _ in 0..allocs {
            drop(black_box(machine.alloc().expect("alloc")));
        }
    });
    assert_eq!(machine.zone().in_use(), 0, "free left a slot in use");
    sink.record("alloc", "pcpu-counter alloc + free", ALLOC_CPUS, ns, "ns");
    let ns = ns_per_op(rounds, allocs, || {
        for _ in 0..allocs {
            drop(black_box(Box::new(AtomicU64::new(0))));
        }
    });
    sink.record("alloc", "Box<AtomicU64> new + drop", 1, ns, "ns");
    let ns = ns_per_op(rounds, allocs, || {
        for _ in 0..allocs {
            drop(black_box(fast_counter::ConcurrentCounter::new(ALLOC_CPUS)));
        }
    });
    sink.record("alloc", "fast-counter new + drop", ALLOC_CPUS, ns, "ns");
    let ns = ns_per_op(rounds, allocs, || {
        for _ in 0..allocs {
            let locals = ThreadLocal::<AtomicU64>::new();
            black_box(locals.get_or(|| AtomicU64::new(0)));
            drop(black_box(locals));
        }
    });
    sink.record(
        "alloc",
        "ThreadLocal<AtomicU64> new + get_or + drop",
        1,
        ns,
        "ns",
    );
}

//! The slow paths: `fetch` and `zero` against the CPU count, and alloc + free.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use pcpu_counter::sim::Machine;
use thread_local::ThreadLocal;

use crate::harness::{ns_per_op, Sink};
use pcpu_counter::array::CounterArray;

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

    group::<1024>(sink, quick);
    group::<123>(sink, quick);

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

/// A group of `N` counters (one array) read at every CPU count of [`CPUS`]: the group
/// snapshot (`fetch_all`, one pass CPU by CPU) against `N` single `fetch`es, and the group
/// `fetch_and_zero_all`, side by side in the same run. Nanoseconds per whole group read.
fn group<const N: usize>(sink: &mut Sink, quick: bool) {
    let rounds = if quick { 3 } else { 9 };
    for ncpus in CPUS {
        let machine = Machine::with_capacity(ncpus, N + 16).expect("machine");
        let a: CounterArray<'_, N> = CounterArray::new(machine.zone()).expect("array");
        for cpu in 0..ncpus {
            machine.run_on(cpu, || (0..N).for_each(|i| a.add(i, (cpu + i) as i64)));
        }
        let mut out = [0u64; N];
        a.fetch_all(&mut out);
        let singles: Vec<u64> = (0..N).map(|i| a.fetch(i)).collect();
        assert_eq!(out.as_slice(), singles, "group snapshot != single fetches");
        // About 4M slot loads per round in the full run.
        let reads = ((4_000_000 / (ncpus * N)) as u64 / if quick { 20 } else { 1 }).max(2);
        let name = |what: &str| format!("{N} counters: {what}");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                for (i, v) in out.iter_mut().enumerate() {
                    *v = black_box(a.fetch(i));
                }
                black_box(&out);
            }
        });
        sink.record("group", &name("counter by counter"), ncpus, ns, "ns");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                a.fetch_all(black_box(&mut out));
                black_box(&out);
            }
        });
        sink.record("group", &name("group snapshot"), ncpus, ns, "ns");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                a.fetch_and_zero_all(black_box(&mut out));
                black_box(&out);
            }
        });
        sink.record("group", &name("group fetch_and_zero"), ncpus, ns, "ns");
        a.fetch_all(&mut out);
        assert!(out.iter().all(|&v| v == 0), "group zero left a count");

        // The same reads with the slots out of the reader's cache, as when their owners have
        // just added to them (a line another CPU wrote must come from that CPU's cache):
        // every slot line of the array on every CPU is flushed before each read (not timed).
        #[cfg(target_arch = "x86_64")]
        {
            let cold_reads = (reads / 4).max(2);
            let lines: Vec<usize> = (0..ncpus)
                .flat_map(|cpu| {
                    let base = machine.zone().cpu_base(cpu).expect("cpu") + a.offset();
                    (0..N.div_ceil(8) + 1).map(move |l| base + 64 * l)
                })
                .collect();
            let flush = || {
                for &line in &lines {
                    // SAFETY: `clflush` of an address inside the machine's zone memory (the
                    // array's slots, and at most one line past them, still in the zone's
                    // blocks, which are padded to 128 bytes); it changes no data.
                    unsafe { std::arch::x86_64::_mm_clflush(line as *const u8) };
                }
                // SAFETY: a fence, no memory operand.
                unsafe { std::arch::x86_64::_mm_mfence() };
            };
            let mut cold = |read: &mut dyn FnMut(&mut [u64; N])| {
                let mut samples: Vec<f64> = (0..rounds)
                    .map(|_| {
                        let mut ns = 0.0;
                        for _ in 0..cold_reads {
                            flush();
                            let start = std::time::Instant::now();
                            read(black_box(&mut out));
                            ns += start.elapsed().as_nanos() as f64;
                        }
                        ns / cold_reads as f64
                    })
                    .collect();
                crate::harness::median(&mut samples)
            };
            let by_one = cold(&mut |out| {
                for (i, v) in out.iter_mut().enumerate() {
                    *v = black_box(a.fetch(i));
                }
            });
            let group = cold(&mut |out| a.fetch_all(out));
            sink.record(
                "group",
                &name("counter by counter, cold"),
                ncpus,
                by_one,
                "ns",
            );
            sink.record("group", &name("group snapshot, cold"), ncpus, group, "ns");
        }
    }
}

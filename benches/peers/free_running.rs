//! Ordinary Linux programs: free-running threads (no binding, the real scheduler) adding to
//! one counter, for the rseq backend (`pcpu_counter::rseq`) and the counters such a program
//! would otherwise use.
//!
//! Three figures per peer, all in one run: one thread's ns per add (inlined loops, 8 adds per
//! iteration as in `single`, on one counter and, for some, on 8 counters in turn), the throughput of 1 to 16 writer threads (the `throughput`
//! harness: a fixed window, exact counts asserted after every round) and the cost of one
//! read. The memory per counter is the layout's, reported beside them. Linux x86_64 and
//! aarch64 only (the backend's platforms).

use std::cell::Cell;
use std::hint::black_box;
use std::ptr;
use std::sync::atomic::{
    compiler_fence, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::time::Duration;

use crossbeam_utils::CachePadded;
use pcpu_counter::rseq;
use thread_local::ThreadLocal;

use crate::harness::{add_rounds, eight, median, medians_in_turn, ns_per_op, Sink};
use crate::throughput::{timed, WRITERS};

/// The section names in the results.
const SINGLE: &str = "linux single";
const THROUGHPUT: &str = "linux throughput";
const READ: &str = "linux read";
const MEMORY: &str = "linux memory";

/// Per-CPU slots for the `sched_getcpu` peer (ClickHouse's per-CPU atomics): one padded
/// atomic per possible CPU, the current CPU's bumped with a locked add.
struct GetcpuSlots(Vec<CachePadded<AtomicU64>>);

impl GetcpuSlots {
    fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
        GetcpuSlots(
            (0..n)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
        )
    }

    #[inline(always)]
    fn add(&self, v: u64) {
        // SAFETY: sched_getcpu has no preconditions; it returns -1 only on error.
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        self.0[cpu % self.0.len()].fetch_add(v, Relaxed);
    }

    fn sum(&self) -> u64 {
        self.0.iter().map(|s| s.load(Relaxed)).sum()
    }
}

/// A per-thread counter with a non-locked add: each thread's own padded word, bumped with a
/// relaxed load and store (exact, because only its thread writes it); readers sum the words.
/// The strongest counter a careful user writes by hand.
type PerThread = ThreadLocal<CachePadded<AtomicU64>>;

#[inline(always)]
fn per_thread_add(locals: &PerThread) {
    let mine = locals.get_or(|| CachePadded::new(AtomicU64::new(0)));
    mine.store(mine.load(Relaxed) + 1, Relaxed);
}

/// The rseq backend through its public API, 8n times.
#[inline(never)]
pub fn rseq_one(counter: &rseq::RseqCounter<'_>, n: u64) {
    for _ in 0..n {
        eight!(counter.add(1));
    }
}

/// The rseq add on 8 counters in turn, n rounds (8n adds): no add waits for the one before
/// it to the same slot (store-to-load forwarding), so this shows the add's own cost.
#[inline(never)]
pub fn rseq_eight(counters: &[rseq::RseqCounter<'_>; 8], n: u64) {
    for _ in 0..n {
        for c in counters {
            c.add(1);
        }
    }
}

/// The plain add on 8 globals in turn, n rounds.
#[inline(never)]
pub fn plain_global_eight(n: u64) {
    static mut GLOBALS: [u64; 8] = [0; 8];
    for _ in 0..n {
        for i in 0..8 {
            // SAFETY: only the single-thread section calls this, from one thread; `i < 8`.
            unsafe {
                let g = (&raw mut GLOBALS).cast::<u64>().add(i);
                ptr::write_volatile(g, ptr::read_volatile(g) + 1)
            }
        }
    }
}

#[inline(never)]
fn thread_local_eight(t: &[ThreadLocal<AtomicU64>; 8], n: u64) {
    for _ in 0..n {
        for c in t {
            c.get_or(|| AtomicU64::new(0)).fetch_add(1, Relaxed);
        }
    }
}

std::thread_local! {
    static CELL: Cell<u64> = const { Cell::new(0) };
    static CELLS: [Cell<u64>; 8] = const { [const { Cell::new(0) }; 8] };
}

/// The native thread-local counter a careful user writes: `thread_local!` with a const
/// `Cell<u64>`, no destructor, so each add is one `fs:`-relative add. The compiler fence
/// after each add stands for the code between two adds in a real program (without it the
/// compiler folds the loop into one add of 8n); it emits no instruction.
#[inline(always)]
fn cell_add(c: &Cell<u64>) {
    c.set(c.get() + 1);
    compiler_fence(SeqCst);
}

/// The native thread-local `Cell`, 8n times.
#[inline(never)]
fn cell_one(n: u64) {
    for _ in 0..n {
        eight!(CELL.with(cell_add));
    }
}

/// 8 native thread-local `Cell`s in turn, n rounds.
#[inline(never)]
fn cell_eight(n: u64) {
    for _ in 0..n {
        CELLS.with(|cells| cells.iter().for_each(cell_add));
    }
}

static STATIC_ONE: rseq::RseqStaticCounter = rseq::RseqStaticCounter::new();
static STATIC_EIGHT: [rseq::RseqStaticCounter; 8] = [const { rseq::RseqStaticCounter::new() }; 8];

/// The rseq add through a `static` [`rseq::RseqStaticCounter`], 8n times.
#[inline(never)]
fn static_one(n: u64) {
    for _ in 0..n {
        eight!(STATIC_ONE.add(1));
    }
}

/// 8 `static` [`rseq::RseqStaticCounter`]s in turn, n rounds.
#[inline(never)]
fn static_eight(n: u64) {
    for _ in 0..n {
        for c in &STATIC_EIGHT {
            c.add(1);
        }
    }
}

#[inline(never)]
fn getcpu_eight(s: &[GetcpuSlots; 8], n: u64) {
    for _ in 0..n {
        for c in s {
            c.add(1);
        }
    }
}

/// A plain, non-atomic add to a global (volatile load and store), 8n times: the floor.
#[inline(never)]
pub fn plain_global(n: u64) {
    static mut GLOBAL: u64 = 0;
    for _ in 0..n {
        // SAFETY: only the single-thread section calls this, from one thread.
        eight!(unsafe {
            let g = &raw mut GLOBAL;
            ptr::write_volatile(g, ptr::read_volatile(g) + 1)
        });
    }
}

#[inline(never)]
fn shared_one(a: &AtomicU64, n: u64) {
    for _ in 0..n {
        eight!(a.fetch_add(1, Relaxed));
    }
}

#[inline(never)]
fn fast_counter_one(c: &fast_counter::ConcurrentCounter, n: u64) {
    for _ in 0..n {
        eight!(c.add(1));
    }
}

#[inline(never)]
fn thread_local_one(t: &ThreadLocal<AtomicU64>, n: u64) {
    for _ in 0..n {
        eight!(t.get_or(|| AtomicU64::new(0)).fetch_add(1, Relaxed));
    }
}

#[inline(never)]
fn getcpu_one(s: &GetcpuSlots, n: u64) {
    for _ in 0..n {
        eight!(s.add(1));
    }
}

/// The single-thread rows that are not peers of the throughput and read sections: the native
/// thread-local (no other thread can read it) and the rseq counter declared as a `static`.
const CELL_PEER: &str = "thread_local! Cell<u64>";
const STATIC_RSEQ: &str = "pcpu-counter rseq StaticCounter";

/// The peers of this section, in report order.
const PEERS: [&str; 7] = [
    "pcpu-counter rseq",
    "AtomicU64 (shared)",
    "CachePadded stripes",
    "fast-counter",
    "ThreadLocal<AtomicU64>",
    "per-thread load+store",
    "sched_getcpu + locked add",
];

pub fn run(sink: &mut Sink, quick: bool) {
    sink.record("meta", "rseq path", "-", rseq::path(), "");
    let zone = rseq::RseqZone::new(64).expect("rseq zone");
    single(sink, quick, &zone);
    throughput(sink, quick, &zone);
    reads(sink, quick, &zone);
    memory(sink, &zone);
}

fn single(sink: &mut Sink, quick: bool, zone: &rseq::RseqZone) {
    let (rounds, n) = add_rounds(quick);
    let n: u64 = black_box(n);
    let calls = rounds as u64 * 8 * n;
    let counter = zone.alloc().expect("alloc");
    let shared = AtomicU64::new(0);
    let stripe = CachePadded::new(AtomicU64::new(0));
    let fast = fast_counter::ConcurrentCounter::new(1);
    let tl: ThreadLocal<AtomicU64> = ThreadLocal::new();
    let slots = GetcpuSlots::new();
    let counters: [rseq::RseqCounter<'_>; 8] =
        std::array::from_fn(|_| zone.alloc().expect("alloc"));
    let tls: [ThreadLocal<AtomicU64>; 8] = Default::default();
    let (cell_before, static_before) = (CELL.with(Cell::get), STATIC_ONE.fetch());
    let cells_before = CELLS.with(|c| c.iter().map(Cell::get).collect::<Vec<_>>());
    let statics_before: Vec<u64> = STATIC_EIGHT.iter().map(|c| c.fetch()).collect();
    let slots8: [GetcpuSlots; 8] = std::array::from_fn(|_| GetcpuSlots::new());
    type Call<'a> = Box<dyn FnMut() + 'a>;
    let mut variants: Vec<(&str, usize, Call<'_>)> = vec![
        ("plain add to a global", 1, Box::new(|| plain_global(n))),
        (PEERS[0], 1, Box::new(|| rseq_one(&counter, n))),
        (PEERS[1], 1, Box::new(|| shared_one(&shared, n))),
        (PEERS[2], 1, Box::new(|| shared_one(&stripe, n))),
        (PEERS[3], 1, Box::new(|| fast_counter_one(&fast, n))),
        (STATIC_RSEQ, 1, Box::new(|| static_one(n))),
        (CELL_PEER, 1, Box::new(|| cell_one(n))),
        (PEERS[4], 1, Box::new(|| thread_local_one(&tl, n))),
        (PEERS[6], 1, Box::new(|| getcpu_one(&slots, n))),
        (
            "plain add to a global",
            8,
            Box::new(|| plain_global_eight(n)),
        ),
        (PEERS[0], 8, Box::new(|| rseq_eight(&counters, n))),
        (STATIC_RSEQ, 8, Box::new(|| static_eight(n))),
        (CELL_PEER, 8, Box::new(|| cell_eight(n))),
        (PEERS[4], 8, Box::new(|| thread_local_eight(&tls, n))),
        (PEERS[6], 8, Box::new(|| getcpu_eight(&slots8, n))),
    ];
    let medians = medians_in_turn(rounds, variants.len(), |i| {
        (variants[i].2)();
        8 * n
    });
    for ((name, counters, _), median) in variants.iter().zip(medians) {
        sink.record(SINGLE, name, counters, median, "ns/add");
    }
    drop(variants);
    assert_eq!(counter.fetch(), calls, "rseq counter lost adds");
    assert_eq!(shared.load(Relaxed), calls);
    assert_eq!(stripe.load(Relaxed), calls);
    assert_eq!(fast.sum() as u64, calls);
    assert_eq!(tl.iter().map(|a| a.load(Relaxed)).sum::<u64>(), calls);
    assert_eq!(CELL.with(Cell::get) - cell_before, calls);
    assert_eq!(STATIC_ONE.fetch() - static_before, calls);
    assert_eq!(slots.sum(), calls);
    let per_counter = calls / 8;
    assert!(
        counters.iter().all(|c| c.fetch() == per_counter),
        "rseq counter lost adds"
    );
    assert!(tls
        .iter()
        .all(|t| t.iter().map(|a| a.load(Relaxed)).sum::<u64>() == per_counter));
    let cells_after = CELLS.with(|c| c.iter().map(Cell::get).collect::<Vec<_>>());
    assert!(cells_after
        .iter()
        .zip(&cells_before)
        .all(|(a, b)| a - b == per_counter));
    assert!(STATIC_EIGHT
        .iter()
        .zip(&statics_before)
        .all(|(c, b)| c.fetch() - b == per_counter));
    assert!(slots8.iter().all(|s| s.sum() == per_counter));
}

/// One round of peer `p` with `writers` free-running threads: (adds made, adds counted, s).
fn round(p: usize, writers: usize, window: Duration, zone: &rseq::RseqZone) -> (u64, u64, f64) {
    let (adds, counted, time) = match p {
        0 => {
            let c = zone.alloc().expect("alloc");
            let (adds, t) = timed(writers, window, |_, go| go.run(|| c.add(1)));
            (adds, c.fetch(), t)
        }
        1 => {
            let a = AtomicU64::new(0);
            let (adds, t) = timed(writers, window, |_, go| {
                go.run(|| {
                    a.fetch_add(1, Relaxed);
                })
            });
            (adds, a.load(Relaxed), t)
        }
        2 => {
            let stripes: Vec<CachePadded<AtomicU64>> = (0..writers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect();
            let (adds, t) = timed(writers, window, |i, go| {
                let mine = &stripes[i];
                go.run(|| {
                    mine.fetch_add(1, Relaxed);
                })
            });
            (adds, stripes.iter().map(|s| s.load(Relaxed)).sum(), t)
        }
        3 => {
            let c = fast_counter::ConcurrentCounter::new(writers);
            let (adds, t) = timed(writers, window, |_, go| go.run(|| c.add(1)));
            (adds, c.sum() as u64, t)
        }
        4 => {
            let tl: ThreadLocal<AtomicU64> = ThreadLocal::new();
            let (adds, t) = timed(writers, window, |_, go| {
                go.run(|| {
                    tl.get_or(|| AtomicU64::new(0)).fetch_add(1, Relaxed);
                })
            });
            (adds, tl.iter().map(|a| a.load(Relaxed)).sum(), t)
        }
        5 => {
            let pt: PerThread = ThreadLocal::new();
            let (adds, t) = timed(writers, window, |_, go| go.run(|| per_thread_add(&pt)));
            (adds, pt.iter().map(|a| a.load(Relaxed)).sum(), t)
        }
        _ => {
            let slots = GetcpuSlots::new();
            let (adds, t) = timed(writers, window, |_, go| go.run(|| slots.add(1)));
            (adds, slots.sum(), t)
        }
    };
    (adds, counted, time.wall.as_secs_f64())
}

fn throughput(sink: &mut Sink, quick: bool, zone: &rseq::RseqZone) {
    let (rounds, window) = if quick {
        (3, Duration::from_millis(30))
    } else {
        (7, Duration::from_millis(200))
    };
    let mut rates = vec![vec![Vec::new(); WRITERS.len()]; PEERS.len()];
    for r in 0..rounds {
        for (w, &writers) in WRITERS.iter().enumerate() {
            for k in 0..PEERS.len() {
                let p = (k + r) % PEERS.len();
                let (adds, counted, wall) = round(p, writers, window, zone);
                // Exact in every round, with the real scheduler migrating the threads.
                assert_eq!(counted, adds, "{} lost adds at {writers} writers", PEERS[p]);
                rates[p][w].push(adds as f64 / wall);
            }
        }
        eprintln!("linux throughput: round {} of {rounds} done", r + 1);
    }
    for (p, name) in PEERS.iter().enumerate() {
        for (w, &writers) in WRITERS.iter().enumerate() {
            sink.record(
                THROUGHPUT,
                name,
                writers,
                median(&mut rates[p][w]),
                "adds/s",
            );
        }
    }
}

/// The cost of one read after 2 threads added (ns per fetch or sum).
fn reads(sink: &mut Sink, quick: bool, zone: &rseq::RseqZone) {
    let (rounds, reads) = if quick { (3, 2_000) } else { (9, 50_000) };
    let c = zone.alloc().expect("alloc");
    let stripes: Vec<CachePadded<AtomicU64>> = (0..2)
        .map(|_| CachePadded::new(AtomicU64::new(0)))
        .collect();
    let fast = fast_counter::ConcurrentCounter::new(2);
    let tl: ThreadLocal<AtomicU64> = ThreadLocal::new();
    let pt: PerThread = ThreadLocal::new();
    let slots = GetcpuSlots::new();
    let shared = AtomicU64::new(0);
    std::thread::scope(|s| {
        for i in 0..2 {
            let (c, stripes, fast, tl, pt, slots, shared) =
                (&c, &stripes, &fast, &tl, &pt, &slots, &shared);
            s.spawn(move || {
                c.add(1);
                stripes[i].fetch_add(1, Relaxed);
                fast.add(1);
                tl.get_or(|| AtomicU64::new(0)).fetch_add(1, Relaxed);
                per_thread_add(pt);
                slots.add(1);
                shared.fetch_add(1, Relaxed);
            });
        }
    });
    let mut read = |name: &str, f: &dyn Fn() -> u64| {
        assert_eq!(f(), 2, "{name} read");
        let ns = ns_per_op(rounds, reads, || {
            for _ in 0..reads {
                black_box(f());
            }
        });
        sink.record(READ, name, 2, ns, "ns");
    };
    read(PEERS[0], &|| c.fetch());
    read(PEERS[1], &|| shared.load(Relaxed));
    read(PEERS[2], &|| stripes.iter().map(|s| s.load(Relaxed)).sum());
    read(PEERS[3], &|| fast.sum() as u64);
    read(PEERS[4], &|| tl.iter().map(|a| a.load(Relaxed)).sum());
    read(PEERS[5], &|| pt.iter().map(|a| a.load(Relaxed)).sum());
    read(PEERS[6], &|| slots.sum());
}

/// Bytes per counter, from each layout: the rseq zone's slots (one per slot index, plus the
/// shared block), and the peers' cells for `threads` threads on this machine's CPUs.
fn memory(sink: &mut Sink, zone: &rseq::RseqZone) {
    let padded = std::mem::size_of::<CachePadded<AtomicU64>>();
    let threads = 16;
    sink.record(MEMORY, PEERS[0], "-", 8 * (zone.nslots() + 1), "bytes");
    sink.record(MEMORY, PEERS[0], "index", rseq::path(), "");
    sink.record(MEMORY, PEERS[1], "-", 8, "bytes");
    sink.record(MEMORY, PEERS[2], "-", padded * threads, "bytes");
    sink.record(
        MEMORY,
        PEERS[6],
        "-",
        padded * GetcpuSlots::new().0.len(),
        "bytes",
    );
    sink.record(MEMORY, "threads", "-", threads, "");
}

//! Throughput of N writer threads adding 1 to one shared counter, for every peer.
//!
//! Each round runs every peer at every writer count for a fixed window: the writers start
//! together at a barrier, add in chunks until the main thread raises the stop flag, and the
//! throughput is all adds made over the time from the start to the last writer's exit. Rounds
//! are interleaved (round r runs peer order rotated by r) and the report takes the median of
//! the rounds. After every round the counter must read exactly the adds made; this crate's
//! counter and every exact peer are asserted, the racy peer's loss is recorded.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use pcpu_counter::sim::Machine;
use thread_local::ThreadLocal;

use crate::harness::{eight, median, process_cpu_time, Sink};

/// The writer counts: up to 8x the 2 cores of the machines here, on purpose.
pub const WRITERS: [usize; 5] = [1, 2, 4, 8, 16];

/// Adds between two looks at the stop flag (a multiple of 8).
const CHUNK: u64 = 1024;

/// The counters compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// This crate: `Counter::add`, each writer on its own simulated CPU (`add gs:[off]`).
    Pcpu,
    /// One shared `AtomicU64`, `fetch_add(1, Relaxed)` (a `lock inc`).
    SharedAtomic,
    /// One `std::sync::Mutex<u64>`.
    Mutex,
    /// The racy `+=` on one shared value: a relaxed load, then a relaxed store of value + 1
    /// (the sound Rust spelling of a non-atomic read-modify-write; it loses updates).
    Racy,
    /// Hand-made stripes: one `crossbeam_utils::CachePadded<AtomicU64>` per writer.
    PaddedStripes,
    /// `fast_counter::ConcurrentCounter`, published padded stripes (one cell per writer).
    FastCounter,
    /// `thread_local::ThreadLocal<AtomicU64>`: `get_or` then `fetch_add` on every add.
    ThreadLocal,
}

impl Peer {
    pub const ALL: [Peer; 7] = [
        Peer::Pcpu,
        Peer::SharedAtomic,
        Peer::Mutex,
        Peer::Racy,
        Peer::PaddedStripes,
        Peer::FastCounter,
        Peer::ThreadLocal,
    ];

    /// The name in the results (and the report's tables and plot).
    pub fn name(self) -> &'static str {
        match self {
            Peer::Pcpu => "pcpu-counter",
            Peer::SharedAtomic => "AtomicU64 (shared)",
            Peer::Mutex => "Mutex<u64>",
            Peer::Racy => "racy +=",
            Peer::PaddedStripes => "CachePadded stripes",
            Peer::FastCounter => "fast-counter",
            Peer::ThreadLocal => "ThreadLocal<AtomicU64>",
        }
    }
}

/// The start barrier and stop flag of one round.
pub(crate) struct Go {
    start: Barrier,
    stop: AtomicBool,
}

impl Go {
    /// Waits for the start, then calls `add` in chunks until stopped; returns the adds made.
    #[inline(always)]
    pub(crate) fn run(&self, mut add: impl FnMut()) -> u64 {
        self.start.wait();
        let mut adds = 0;
        while !self.stop.load(Relaxed) {
            // Unrolled by hand, so that every peer's loop has the same shape (the compiler
            // unrolls some peers' loops by itself and not this crate's `asm!`).
            for _ in 0..CHUNK / 8 {
                eight!(add());
            }
            adds += CHUNK;
        }
        adds
    }
}

/// How long a round took, by the clock and in CPU time used by the whole process.
pub(crate) struct Timing {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

/// Runs `writer(i, go)` on `writers` threads for about `window`; returns the adds all writers
/// made and the time from the start to the last writer's exit. Each writer does its setup,
/// then calls `go.run`.
pub(crate) fn timed(
    writers: usize,
    window: Duration,
    writer: impl Fn(usize, &Go) -> u64 + Sync,
) -> (u64, Timing) {
    let go = Go {
        start: Barrier::new(writers + 1),
        stop: AtomicBool::new(false),
    };
    thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|i| {
                let (go, writer) = (&go, &writer);
                s.spawn(move || writer(i, go))
            })
            .collect();
        go.start.wait();
        let (t0, cpu0) = (Instant::now(), process_cpu_time());
        thread::sleep(window);
        go.stop.store(true, Relaxed);
        let adds = handles.into_iter().map(|h| h.join().expect("writer")).sum();
        let timing = Timing {
            wall: t0.elapsed(),
            cpu: process_cpu_time() - cpu0,
        };
        (adds, timing)
    })
}

/// One round of `peer` with `writers` writers: (adds made, adds the counter reads, time).
fn round(peer: Peer, writers: usize, window: Duration) -> (u64, u64, Timing) {
    match peer {
        Peer::Pcpu => {
            let machine = Machine::new(writers);
            let counter = machine.alloc().expect("alloc");
            let (adds, time) = timed(writers, window, |cpu, go| {
                let _bound = machine.bind(cpu).expect("bind");
                go.run(|| counter.add(1))
            });
            (adds, counter.fetch(), time)
        }
        Peer::SharedAtomic => {
            let shared = AtomicU64::new(0);
            let (adds, time) = timed(writers, window, |_, go| {
                go.run(|| {
                    shared.fetch_add(1, Relaxed);
                })
            });
            (adds, shared.load(Relaxed), time)
        }
        Peer::Mutex => {
            let shared = Mutex::new(0u64);
            let (adds, time) = timed(writers, window, |_, go| {
                go.run(|| *shared.lock().expect("lock") += 1)
            });
            (adds, shared.into_inner().expect("lock"), time)
        }
        Peer::Racy => {
            let shared = AtomicU64::new(0);
            let (adds, time) = timed(writers, window, |_, go| {
                go.run(|| shared.store(shared.load(Relaxed) + 1, Relaxed))
            });
            (adds, shared.load(Relaxed), time)
        }
        Peer::PaddedStripes => {
            let stripes: Vec<CachePadded<AtomicU64>> = (0..writers)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect();
            let (adds, time) = timed(writers, window, |i, go| {
                let mine = &stripes[i];
                go.run(|| {
                    mine.fetch_add(1, Relaxed);
                })
            });
            (adds, stripes.iter().map(|s| s.load(Relaxed)).sum(), time)
        }
        Peer::FastCounter => {
            let counter = fast_counter::ConcurrentCounter::new(writers);
            let (adds, time) = timed(writers, window, |_, go| go.run(|| counter.add(1)));
            (adds, counter.sum() as u64, time)
        }
        Peer::ThreadLocal => {
            let locals: ThreadLocal<AtomicU64> = ThreadLocal::new();
            let (adds, time) = timed(writers, window, |_, go| {
                go.run(|| {
                    locals.get_or(|| AtomicU64::new(0)).fetch_add(1, Relaxed);
                })
            });
            (adds, locals.iter().map(|a| a.load(Relaxed)).sum(), time)
        }
    }
}

/// Runs every peer at every writer count, `rounds` times interleaved, and records the
/// median throughput (and the racy peer's median loss).
pub fn run(sink: &mut Sink, quick: bool) {
    let (rounds, window) = if quick {
        (3, Duration::from_millis(30))
    } else {
        (9, Duration::from_millis(200))
    };
    sink.record("meta", "throughput rounds", "-", rounds, "");
    sink.record("meta", "throughput window", "-", window.as_millis(), "ms");
    let mut rates = vec![vec![Vec::new(); WRITERS.len()]; Peer::ALL.len()];
    let mut shares = rates.clone();
    let mut losses = vec![Vec::new(); WRITERS.len()];
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let mut pcpu_checked = 0u64;
    for r in 0..rounds {
        for (w, &writers) in WRITERS.iter().enumerate() {
            for k in 0..Peer::ALL.len() {
                let p = (k + r) % Peer::ALL.len();
                let peer = Peer::ALL[p];
                let (adds, counted, time) = round(peer, writers, window);
                if peer == Peer::Racy {
                    losses[w].push(1.0 - counted as f64 / adds as f64);
                } else {
                    // Exactness, in every round: the bench fails on a lost or extra add.
                    assert_eq!(
                        counted,
                        adds,
                        "{} lost adds at {writers} writers",
                        peer.name()
                    );
                    if peer == Peer::Pcpu {
                        pcpu_checked += 1;
                    }
                }
                let wall = time.wall.as_secs_f64();
                rates[p][w].push(adds as f64 / wall);
                // The share of the cores the writers could use that they got: below 1 when
                // other work took CPU time (or, for the mutex, when writers slept in it).
                let usable = writers.min(cores) as f64 * wall;
                shares[p][w].push(time.cpu.as_secs_f64() / usable);
            }
        }
        eprintln!("throughput: round {} of {rounds} done", r + 1);
    }
    for (p, peer) in Peer::ALL.iter().enumerate() {
        for (w, &writers) in WRITERS.iter().enumerate() {
            let rate = median(&mut rates[p][w]);
            sink.record("throughput", peer.name(), writers, rate, "adds/s");
            let share = median(&mut shares[p][w]);
            sink.record("cpu share", peer.name(), writers, share, "fraction");
        }
    }
    for (w, &writers) in WRITERS.iter().enumerate() {
        let worst = losses[w].iter().copied().fold(0.0, f64::max);
        let racy = Peer::Racy.name();
        sink.record("lost", racy, writers, median(&mut losses[w]), "fraction");
        sink.record("lost max", racy, writers, worst, "fraction");
    }
    sink.record(
        "exact",
        Peer::Pcpu.name(),
        "-",
        pcpu_checked,
        "rounds checked",
    );
}

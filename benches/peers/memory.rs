//! Memory per counter on a 64-CPU machine, computed from each design's layout and checked
//! against the heap bytes it really takes (a counting global allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::mem::size_of;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Barrier, Mutex};

use crossbeam_utils::CachePadded;
use pcpu_counter::Zone;
use thread_local::ThreadLocal;

use crate::harness::Sink;
use crate::reads::ALLOC_CPUS;

/// The system allocator, counting the bytes live on the heap.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The heap bytes `make` leaves live (what it returns keeps them), and what it returned.
fn heap_of<T>(make: impl FnOnce() -> T) -> (usize, T) {
    let before = LIVE.load(Relaxed);
    let made = make();
    (LIVE.load(Relaxed).saturating_sub(before), made)
}

/// A `ThreadLocal<AtomicU64>` that `threads` threads have each added to.
fn thread_local_used(threads: usize) -> ThreadLocal<AtomicU64> {
    let locals = ThreadLocal::new();
    // All threads alive at once: an exited thread's id (and bucket entry) would be reused.
    let all_in = Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                locals.get_or(|| AtomicU64::new(0)).fetch_add(1, Relaxed);
                all_in.wait();
            });
        }
    });
    locals
}

pub fn run(sink: &mut Sink) {
    let n = ALLOC_CPUS;
    let mut record = |name: &str, computed: usize, measured: f64| {
        sink.record("memory", name, n, computed, "bytes computed");
        sink.record("memory", name, n, measured, "bytes measured");
    };

    // This crate: one 8-byte slot per CPU. A zone of 1024 counters, divided by 1024 (the
    // metadata, a baseline word and about 1.02 bitmap bits per counter, is the only extra).
    const COUNTERS: usize = 1024;
    let (bytes, zone) = heap_of(|| Zone::with_capacity(n, COUNTERS).expect("zone"));
    assert_eq!(zone.capacity(), COUNTERS);
    record("pcpu-counter", 8 * n, bytes as f64 / COUNTERS as f64);
    drop(zone);

    record(
        "AtomicU64 (shared)",
        size_of::<AtomicU64>(),
        size_of::<AtomicU64>() as f64,
    );
    record(
        "Mutex<u64>",
        size_of::<Mutex<u64>>(),
        size_of::<Mutex<u64>>() as f64,
    );
    record("racy +=", size_of::<u64>(), size_of::<u64>() as f64);

    let stripe = size_of::<CachePadded<AtomicU64>>();
    let (bytes, stripes) = heap_of(|| -> Vec<CachePadded<AtomicU64>> {
        (0..n)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect()
    });
    record("CachePadded stripes", n * stripe, bytes as f64);
    drop(stripes);

    let (bytes, fast) = heap_of(|| fast_counter::ConcurrentCounter::new(n));
    let fast_size = size_of::<fast_counter::ConcurrentCounter>();
    record("fast-counter", n * stripe, (bytes + fast_size) as f64);
    drop(fast);

    // ThreadLocal: warm the crate's thread-id registry first, so that only the counter's own
    // buckets are counted. Its entries are an `AtomicU64` and a flag, unpadded: 16 bytes.
    // Thread id `t` lives in bucket `log2(t + 1)`, of `2^bucket` entries, and a bucket is
    // allocated whole: ids 0..n need buckets 0..=log2(n), `2^(log2(n) + 1) - 1` entries.
    drop(thread_local_used(n));
    let (bytes, locals) = heap_of(|| thread_local_used(n));
    assert_eq!(
        locals.iter().map(|a| a.load(Relaxed)).sum::<u64>(),
        n as u64
    );
    let size = size_of::<ThreadLocal<AtomicU64>>();
    record(
        "ThreadLocal<AtomicU64>",
        size + 16 * ((1 << (n.ilog2() + 1)) - 1),
        (bytes + size) as f64,
    );
}

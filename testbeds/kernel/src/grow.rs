//! The growth check (x86_64 and riscv64): the installed zone grows past its first blocks into
//! chunks from a source the kernel owns ([`ArenaChunks`], a bump allocator with a free list
//! on a static arena), to 100,000 live counters at once, while every CPU churns.
//!
//! The phases, every started CPU at once, after the protocol's:
//!
//! 1. CPU 0 alone: `zone.grow_from(&ARENA)`; it fills the first blocks with live counters of
//!    its set, then allocates [`LONG`] long-lived counters (in the first chunk).
//! 2. Every CPU allocates its set of live counters (together [`LIVE`]) through the source
//!    (`Wait::WaitOk`), adding a value of its own to each; every [`CHURN_EVERY`] of them it
//!    churns: allocates [`HELD`] counters (`Wait::NoWait`), checks each reads 0, adds to each
//!    and to the long-lived counters, checks each reads exactly what it added, frees them.
//!    Each CPU allocating its own set keeps every vCPU working: spinning at a barrier while
//!    one CPU allocates them all took as much host time.
//! 3. After a barrier (all [`LIVE`] are live at once, counted), every CPU checks and frees its
//!    set, churning as in 2: the chunks empty and go back to the source, bar the spare.
//! 4. CPU 0 allocates [`AGAIN_CHUNKS`] chunks' worth of counters: they come from the long-lived
//!    counters' chunk, the spare and chunks the source hands out again off its free list, all
//!    holding old counts; each must read 0.
//!
//! Then CPU 0 checks exact sums: every long-lived counter equals what the CPUs added to it
//! (in total and in each CPU's slot), no counter was bad, `in_use` and `capacity` are back
//! to what they were, and the source got back every chunk it handed out but the spare. The
//! broken build `pcpu_counter_broken="chunk_slot_not_cleared"` (run `x86_64-grow-broken`)
//! must print `FAIL grow bad counters`: a reused chunk slot keeps its old count.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering};

use pcpu_counter::freebsd::{counter_u64_alloc, global_zone, CounterU64, Wait};
use pcpu_counter::ChunkSource;
use pcpu_counter_testbed_protocol as protocol;

use crate::console::println;

/// Live counters the CPUs hold at once (the zone's first blocks, then chunks), each CPU its
/// share.
pub const LIVE: usize = 100_000;
/// Long-lived counters every CPU adds to.
const LONG: usize = 8;
/// Churn: a round every this many live counters allocated or freed, of this many counters.
const CHURN_EVERY: usize = 256;
const HELD: usize = 64;
/// Phase 4: chunks' worth of counters allocated again after the live ones were freed.
const AGAIN_CHUNKS: usize = 8;

/// Bytes of the kernel's chunk arena: room for [`LIVE`] counters (x86_64: 512 slots in chunks
/// of 20.5 KiB, 4 KiB aligned; riscv64: 128 in 5.2 KiB, 1 KiB aligned: about 4.8 MiB either
/// way), the churn's and the alignment gaps.
const ARENA_BYTES: usize = 8 << 20;

/// The arena: in the kernel's `.bss`, so in RAM the boot code maps (x86_64: the identity map
/// of the first 4 GiB, the image being at 1 MiB; riscv64: paging is off) and cleared at boot.
#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; ARENA_BYTES]>);

// SAFETY: its bytes are only reached as chunks, each handed to one owner at a time by
// `ArenaChunks` under its lock.
unsafe impl Sync for Arena {}

static ARENA_MEMORY: Arena = Arena(UnsafeCell::new([0; ARENA_BYTES]));

/// A chunk given back: its first words, on the free list.
struct FreeChunk {
    next: *mut FreeChunk,
    size: usize,
}

/// The allocator's state, under its lock.
struct ArenaState {
    /// Bytes of the arena bumped past.
    used: usize,
    /// Chunks given back, most recent first.
    free: *mut FreeChunk,
}

// SAFETY: the free list's chunks are the arena's, reached only under the lock.
unsafe impl Send for ArenaState {}

/// A kernel's chunk source: first fit from the chunks given back (size and alignment
/// honoured), else bumped from the arena; `None` when the arena is used up. It never blocks,
/// so `wait` changes nothing. It counts the chunks it hands out, takes back and hands out
/// again.
pub struct ArenaChunks {
    state: spin::Mutex<ArenaState>,
    taken: AtomicU64,
    given_back: AtomicU64,
    reused: AtomicU64,
}

/// The kernel's source for the installed zone.
pub static ARENA: ArenaChunks = ArenaChunks {
    state: spin::Mutex::new(ArenaState {
        used: 0,
        free: ptr::null_mut(),
    }),
    taken: AtomicU64::new(0),
    given_back: AtomicU64::new(0),
    reused: AtomicU64::new(0),
};

impl ArenaChunks {
    /// A chunk off the free list that fits `layout`, unlinked.
    fn take_free(state: &mut ArenaState, layout: Layout) -> Option<NonNull<u8>> {
        let mut link: *mut *mut FreeChunk = &mut state.free;
        // SAFETY: `link` points at the list head or at a `next` field of a chunk on the list;
        // the list's chunks are given back and untouched by anyone else (the lock is held).
        unsafe {
            while !(*link).is_null() {
                let chunk = *link;
                if (*chunk).size >= layout.size() && (chunk as usize).is_multiple_of(layout.align())
                {
                    *link = (*chunk).next;
                    return NonNull::new(chunk.cast());
                }
                link = ptr::addr_of_mut!((*chunk).next);
            }
        }
        None
    }

    /// (handed out, taken back, handed out again off the free list).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.taken.load(Ordering::Relaxed),
            self.given_back.load(Ordering::Relaxed),
            self.reused.load(Ordering::Relaxed),
        )
    }
}

// SAFETY: a chunk is `layout.size()` bytes of the arena at a multiple of `layout.align()`
// (bumped past, or a chunk given back with at least that size at such an address); each is
// handed out once until `free_chunk` takes it back.
unsafe impl ChunkSource for ArenaChunks {
    fn alloc_chunk(&self, layout: Layout, _wait: bool) -> Option<NonNull<[u8]>> {
        let mut state = self.state.lock();
        let chunk = match Self::take_free(&mut state, layout) {
            Some(chunk) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                chunk
            }
            None => {
                let start = ARENA_MEMORY.0.get() as usize;
                let at = (start + state.used).checked_next_multiple_of(layout.align())?;
                let end = at.checked_add(layout.size())?;
                if end > start + ARENA_BYTES {
                    return None;
                }
                state.used = end - start;
                NonNull::new(at as *mut u8)?
            }
        };
        self.taken.fetch_add(1, Ordering::Relaxed);
        Some(NonNull::slice_from_raw_parts(chunk, layout.size()))
    }

    unsafe fn free_chunk(&self, chunk: NonNull<u8>, layout: Layout) {
        let mut state = self.state.lock();
        let node = chunk.as_ptr().cast::<FreeChunk>();
        // SAFETY: the chunk is ours again (the caller's contract), at least 64-byte aligned
        // and larger than a `FreeChunk`.
        unsafe {
            node.write(FreeChunk {
                next: state.free,
                size: layout.size(),
            })
        };
        state.free = node;
        self.given_back.fetch_add(1, Ordering::Relaxed);
    }
}

/// A cell written by one CPU and read by others only after a barrier.
struct Shared<T>(UnsafeCell<T>);

// SAFETY: each cell has one writer per phase, and other CPUs read it only after a barrier
// (release/acquire) that follows the writes.
unsafe impl<T> Sync for Shared<T> {}

/// The live counters, each CPU's set a range of them (only that CPU touches its range).
static LIVE_COUNTERS: Shared<[Option<CounterU64>; LIVE]> =
    Shared(UnsafeCell::new([const { None }; LIVE]));
/// The long-lived counters, allocated by CPU 0 in phase 1.
static LONG_COUNTERS: Shared<[Option<CounterU64>; LONG]> =
    Shared(UnsafeCell::new([const { None }; LONG]));
/// Written by each CPU for itself, read by CPU 0 after a barrier: what it added to each
/// long-lived counter, its bad counters, its live counters after phase 2.
static ADDED: [Shared<[u64; LONG]>; protocol::MAX_CPUS] =
    [const { Shared(UnsafeCell::new([0; LONG])) }; protocol::MAX_CPUS];
static BAD: [Shared<u64>; protocol::MAX_CPUS] =
    [const { Shared(UnsafeCell::new(0)) }; protocol::MAX_CPUS];
static HOLDS: [Shared<u64>; protocol::MAX_CPUS] =
    [const { Shared(UnsafeCell::new(0)) }; protocol::MAX_CPUS];

/// What one CPU works with: its set, its records, the long-lived counters.
struct Cpu {
    cpu: usize,
    /// Its range of [`LIVE_COUNTERS`]; counter `i` of it gets [`live_value`]`(cpu, i)`.
    set: &'static mut [Option<CounterU64>],
    added: &'static mut [u64; LONG],
    bad: &'static mut u64,
    long: &'static [Option<CounterU64>; LONG],
    /// Churn rounds done.
    rounds: u64,
}

/// The value CPU `cpu` adds to counter `i` of its set: no other CPU's or counter's.
const fn live_value(cpu: usize, i: usize) -> u64 {
    ((cpu as u64 + 1) << 40) | i as u64
}

/// The growth check on CPU `cpu` (every started CPU calls it, after the protocol's phases).
pub fn run(cpu: usize) {
    let n = protocol::ncpus();
    let zone = global_zone().expect("installed");
    let per_cpu = LIVE.div_ceil(n);
    let start = (cpu * per_cpu).min(LIVE);
    let len = per_cpu.min(LIVE - start);
    // SAFETY: the CPUs' ranges of `LIVE_COUNTERS` are disjoint, and each touches only its
    // own; each writes only its own `ADDED`, `BAD` and `HOLDS` cells, read by CPU 0 after
    // the barriers below.
    let (set, added, bad) = unsafe {
        let first = LIVE_COUNTERS
            .0
            .get()
            .cast::<Option<CounterU64>>()
            .add(start);
        (
            core::slice::from_raw_parts_mut(first, len),
            &mut *ADDED[cpu].0.get(),
            &mut *BAD[cpu].0.get(),
        )
    };
    protocol::barrier(cpu);

    // Phase 1: CPU 0 alone.
    let before = Before {
        in_use: zone.in_use(),
        capacity: zone.capacity(),
    };
    let mut filled = 0;
    if cpu == 0 {
        if let Err(e) = zone.grow_from(&ARENA) {
            println!("FAIL grow grow_from: {e:?}");
            *bad += 1;
        }
        filled = (before.capacity - before.in_use).min(len);
        for (i, slot) in set.iter_mut().enumerate().take(filled) {
            *slot = counter_u64_alloc(Wait::WaitOk);
            if let Some(counter) = slot {
                counter.add(live_value(0, i) as i64);
            }
        }
        // SAFETY: only CPU 0 runs; the others read the cell after the barrier.
        let long = unsafe { &mut *LONG_COUNTERS.0.get() };
        for slot in long.iter_mut() {
            *slot = counter_u64_alloc(Wait::WaitOk);
        }
    }
    protocol::barrier(cpu);
    // SAFETY: written by CPU 0 before the barrier, only read from here on.
    let long = unsafe { &*LONG_COUNTERS.0.get() };
    let mut me = Cpu {
        cpu,
        set,
        added,
        bad,
        long,
        rounds: 0,
    };

    // Phase 2: every CPU allocates its set, churning.
    for i in filled..me.set.len() {
        me.set[i] = counter_u64_alloc(Wait::WaitOk);
        match &me.set[i] {
            Some(counter) => counter.add(live_value(cpu, i) as i64),
            None => *me.bad += 1,
        }
        if i % CHURN_EVERY == 0 {
            me.churn();
        }
    }
    let holds = me.set.iter().filter(|c| c.is_some()).count() as u64;
    // SAFETY: this CPU's own cell.
    unsafe { *HOLDS[cpu].0.get() = holds };
    protocol::barrier(cpu);
    let (mut live_at_once, mut in_use_at_peak) = (0, 0);
    if cpu == 0 {
        // SAFETY: every CPU wrote its cell before the barrier.
        live_at_once = (0..n).map(|c| unsafe { *HOLDS[c].0.get() }).sum::<u64>();
        in_use_at_peak = zone.in_use();
    }
    protocol::barrier(cpu);

    // Phase 3: every CPU checks and frees its set, churning.
    for i in 0..me.set.len() {
        if let Some(counter) = me.set[i].take() {
            *me.bad += (counter.fetch() != live_value(cpu, i)) as u64;
        }
        if i % CHURN_EVERY == 0 {
            me.churn();
        }
    }
    let rounds = me.rounds;
    protocol::barrier(cpu);

    // Phase 4: CPU 0 takes chunks again (the long-lived counters' chunk, the spare, then
    // chunks the source took back), in its emptied set.
    if cpu == 0 {
        let again = AGAIN_CHUNKS * zone.max_run();
        for (h, slot) in me.set.iter_mut().take(again).enumerate() {
            *slot = fresh(Wait::WaitOk, live_value(0, h), me.bad);
        }
        for (h, slot) in me.set.iter_mut().take(again).enumerate() {
            if let Some(counter) = slot.take() {
                *me.bad += (counter.fetch() != live_value(0, h)) as u64;
            }
        }
        let values = finish(zone, long, n, live_at_once, in_use_at_peak, before);
        protocol::report("grow", &values, n);
        let (taken, given_back, reused) = ARENA.counts();
        let layout = zone.chunk_layout().expect("the zone grows");
        println!(
            "INFO grow: {live_at_once} live counters at once on {n} CPUs, in the first blocks and \
             chunks of {} bytes (align {}, {} slots) from the kernel's arena; the source handed \
             out {taken} chunks ({reused} of them again, off its free list) and took back \
             {given_back}; {rounds} churn rounds of {HELD} on CPU 0",
            layout.size(),
            layout.align(),
            zone.max_run()
        );
    }
    protocol::barrier(cpu);
}

/// A new counter that must read 0 (counted bad if it does not, or if there is none), with
/// `value` added.
fn fresh(wait: Wait, value: u64, bad: &mut u64) -> Option<CounterU64> {
    let counter = counter_u64_alloc(wait);
    match &counter {
        Some(c) => {
            *bad += (c.fetch() != 0) as u64;
            c.add(value as i64);
        }
        None => *bad += 1,
    }
    counter
}

impl Cpu {
    /// One churn round: allocate `HELD` fresh counters (`Wait::NoWait`), add a value of this
    /// round's to each and `cpu + 1` to a long-lived counter for each, check and free them.
    fn churn(&mut self) {
        let (cpu, round) = (self.cpu, self.rounds);
        self.rounds += 1;
        // Bit 39 set: no live counter's value.
        let value = |h: usize| ((cpu as u64 + 1) << 40) | (1 << 39) | (round << 8) | h as u64;
        let mut held: [Option<CounterU64>; HELD] = [const { None }; HELD];
        for (h, slot) in held.iter_mut().enumerate() {
            *slot = fresh(Wait::NoWait, value(h), self.bad);
            let j = h % LONG;
            if let Some(counter) = &self.long[j] {
                counter.add(cpu as i64 + 1);
                self.added[j] += cpu as u64 + 1;
            }
        }
        for (h, counter) in held.iter_mut().enumerate() {
            if let Some(counter) = counter.take() {
                *self.bad += (counter.fetch() != value(h)) as u64;
            }
        }
    }
}

/// The zone's `in_use` and `capacity` before the check.
struct Before {
    in_use: usize,
    capacity: usize,
}

/// CPU 0, after every phase: frees the long-lived counters after checking them, and returns
/// the check's values.
fn finish(
    zone: &pcpu_counter::Zone<'_>,
    long: &[Option<CounterU64>; LONG],
    n: usize,
    live_at_once: u64,
    in_use_at_peak: usize,
    before: Before,
) -> [(&'static str, u64, u64); 9] {
    // SAFETY: every CPU's cells were written before the last barrier.
    let added = |cpu: usize, j: usize| unsafe { (*ADDED[cpu].0.get())[j] };
    let mut sums = 0u64;
    let mut slots = 0u64;
    for (j, counter) in long.iter().enumerate() {
        let Some(counter) = counter else { continue };
        let total: u64 = (0..n).map(|cpu| added(cpu, j)).sum();
        sums += (counter.fetch() == total) as u64;
        slots += (0..n)
            .filter(|&cpu| counter.cpu_slot(cpu) == Ok(added(cpu, j)))
            .count() as u64;
    }
    // SAFETY: only CPU 0 runs now (the others wait at the last barrier); the long-lived
    // counters are dropped (freed) here, once.
    unsafe { (*LONG_COUNTERS.0.get()).iter_mut().for_each(|c| *c = None) };
    // SAFETY: as above.
    let bad: u64 = (0..n).map(|cpu| unsafe { *BAD[cpu].0.get() }).sum();
    let (taken, given_back, reused) = ARENA.counts();
    [
        ("live counters at once", LIVE as u64, live_at_once),
        (
            "in_use with every set live",
            (before.in_use + LIVE + LONG) as u64,
            in_use_at_peak as u64,
        ),
        (
            "bad counters (not fresh, not the value added, or none)",
            0,
            bad,
        ),
        ("long-lived counters exact", LONG as u64, sums),
        ("long-lived CPU slots exact", (LONG * n) as u64, slots),
        ("in_use after", before.in_use as u64, zone.in_use() as u64),
        (
            "capacity after (the first blocks)",
            before.capacity as u64,
            zone.capacity() as u64,
        ),
        (
            "chunks given back (all but the spare)",
            taken.saturating_sub(1),
            given_back,
        ),
        ("chunks handed out again", 1, (reused > 0) as u64),
    ]
}

// SPDX-License-Identifier: BSD-2-Clause
//! Counters that need no borrow: [`RseqStaticCounter`] (a `static`, allocated on first use from
//! the process-wide zone) and [`RseqOwnedCounter`] (a counter that keeps its zone alive).

use core::mem::ManuallyDrop;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::{fast, RseqCounter, RseqZone};
use crate::Error;

/// A per-CPU counter declared as a `static`, in one line:
///
/// ```
/// use pcpu_counter::rseq::RseqStaticCounter;
///
/// static HITS: RseqStaticCounter = RseqStaticCounter::new();
/// static BY_STATUS: [RseqStaticCounter; 4] = [const { RseqStaticCounter::new() }; 4];
///
/// HITS.inc();
/// BY_STATUS[2].add(3);
/// assert_eq!((HITS.fetch(), BY_STATUS[2].fetch()), (1, 3));
/// ```
///
/// Its slot is allocated from the process-wide zone ([`process_zone`](super::process_zone))
/// at its first use (any method), once, and kept for the life of the process; from then on
/// it adds as an [`RseqCounter`] does. An array of them, as above, allocates each element at its
/// own first use.
///
/// # When no slot can be had
/// The process-wide zone grows by `mmap` ([`RseqZone::grow`]), so a first use gets a slot
/// whatever the number of counters in use. A static counter whose first use finds no chunk
/// can be mapped (`mmap` fails: an address-space limit, no memory) or the zone cannot be
/// made (an unknown `PCPU_COUNTER_RSEQ` value) does not panic: it counts with one shared
/// `AtomicU64` instead, a locked add per add, slower under contention but exact, and
/// [`error`](RseqStaticCounter::error) says why. A counter declared as a `static` sits on paths
/// that cannot handle a failure (a hot path, a library's internals, a signal handler): a
/// panic there because memory ran out would be worse than a slower counter that still
/// counts right.
///
/// # Signal handlers
/// The first use allocates (it takes the zone's lock): use the counter once (`fetch`)
/// before a signal handler can be the first to touch it. After that every method is
/// async-signal-safe, as [`RseqCounter`]'s are.
pub struct RseqStaticCounter {
    /// [`UNSET`] before the first use, [`SPILLED`] when counting on `spill`, else the add
    /// word of its counter in the process-wide zone (which is never freed).
    word: AtomicUsize,
    /// The count when no slot could be had.
    spill: AtomicU64,
}

/// An [`RseqStaticCounter`] with no slot yet (a counter word is an address in a zone's mapping,
/// never 0 or 1).
const UNSET: usize = 0;
/// An [`RseqStaticCounter`] counting on its own atomic.
const SPILLED: usize = 1;
// The fast path refuses both: they are below any counter word.
const _: () = assert!(UNSET < fast::ADDR_LIMIT && SPILLED < fast::ADDR_LIMIT);

impl RseqStaticCounter {
    /// A counter reading 0, with no slot yet (it is allocated on first use).
    pub const fn new() -> RseqStaticCounter {
        RseqStaticCounter {
            word: AtomicUsize::new(UNSET),
            spill: AtomicU64::new(0),
        }
    }

    /// The add word, allocating the slot now if this is the first use ([`SPILLED`] when the
    /// counter counts on its atomic).
    #[inline(always)]
    fn word(&self) -> usize {
        // Acquire: the slot's clearing by `alloc` happens before this thread's adds to it.
        match self.word.load(Ordering::Acquire) {
            UNSET => self.first_use(),
            word => word,
        }
    }

    /// Allocates the slot (or settles on the atomic), once: a thread that loses the race
    /// frees its slot and takes the winner's.
    #[cold]
    #[inline(never)]
    fn first_use(&self) -> usize {
        let counter = RseqCounter::new();
        let word = counter.as_ref().map_or(SPILLED, RseqCounter::word);
        match self
            .word
            .compare_exchange(UNSET, word, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                // The slot is the static's for the life of the process.
                core::mem::forget(counter);
                word
            }
            // Broken on purpose (test only): the loser's first add goes to its own slot,
            // which it frees right after (the counter drops here), so that add is lost.
            #[cfg(pcpu_counter_broken = "static_first_use_keeps_own_slot")]
            Err(_) => word,
            #[cfg(not(pcpu_counter_broken = "static_first_use_keeps_own_slot"))]
            Err(theirs) => theirs,
        }
    }

    /// The per-CPU counter as a view, `None` when the counter spills to its atomic.
    fn counter(&self) -> Option<ManuallyDrop<RseqCounter<'static>>> {
        let word = self.word();
        let zone = super::process_zone().ok().filter(|_| word != SPILLED)?;
        // SAFETY: a word other than SPILLED is the word of a counter of the process-wide
        // zone that was forgotten, so it stays allocated for the life of the process.
        Some(unsafe { RseqCounter::view(zone, word) })
    }

    /// Adds `v` (which may be negative), as [`RseqCounter::add`]: two loads (the counter's word
    /// and the process's) and the critical section.
    #[inline(always)]
    pub fn add(&self, v: i64) {
        let word = self.word.load(Ordering::Acquire);
        // SAFETY: UNSET and SPILLED lie below the address limit (the fast path refuses
        // them); any other word is the word of a counter of the process-wide zone, allocated
        // for the life of the process.
        if unsafe { fast::try_add(word, v) } {
            return;
        }
        self.add_cold(v)
    }

    /// The add off the fast path: the first use, the atomic, or the rseq slow path.
    #[cold]
    #[inline(never)]
    fn add_cold(&self, v: i64) {
        match self.counter() {
            Some(c) => c.add(v),
            None => {
                self.spill.fetch_add(v as u64, Ordering::Relaxed);
            }
        }
    }

    /// Adds 1.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1)
    }

    /// The count since the last zero, as [`RseqCounter::fetch`].
    pub fn fetch(&self) -> u64 {
        match self.counter() {
            Some(c) => c.fetch(),
            None => self.spill.load(Ordering::Relaxed),
        }
    }

    /// The count read as signed, as [`RseqCounter::fetch_i64`].
    pub fn fetch_i64(&self) -> i64 {
        self.fetch() as i64
    }

    /// Resets the counter to 0, losslessly, as [`RseqCounter::zero`].
    pub fn zero(&self) {
        self.fetch_and_zero();
    }

    /// Returns the count since the last zero and zeroes it, as one step.
    pub fn fetch_and_zero(&self) -> u64 {
        match self.counter() {
            Some(c) => c.fetch_and_zero(),
            None => self.spill.swap(0, Ordering::Relaxed),
        }
    }

    /// Why the counter counts with one shared atomic instead of per-CPU slots:
    /// [`Error::OutOfMemory`] when the process-wide zone's slots were all in use at its first
    /// use and a chunk for more could not be mapped, or the error that making that zone gave.
    /// `None` when it is per-CPU (this call allocates its slot if it had none yet).
    pub fn error(&self) -> Option<Error> {
        if self.word() != SPILLED {
            return None;
        }
        Some(match super::process_zone() {
            Err(e) => e,
            // The zone grows, so its alloc failed for a chunk alone.
            Ok(zone) => Error::OutOfMemory {
                bytes: zone.chunk_layout().size(),
            },
        })
    }
}

impl Default for RseqStaticCounter {
    fn default() -> Self {
        RseqStaticCounter::new()
    }
}

impl core::fmt::Debug for RseqStaticCounter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RseqStaticCounter")
            .field("value", &self.fetch())
            .field("error", &self.error())
            .finish()
    }
}

/// A counter of a zone of one's own that keeps the zone alive (it holds an [`Arc`] of it):
/// no borrow, so it can live in a `static`, a thread-local, a struct with no lifetime, or
/// be moved to another thread, and the zone is unmapped when its last counter and the last
/// other `Arc` are dropped. It derefs to [`RseqCounter`] for the add and the reads.
///
/// ```
/// use pcpu_counter::rseq::{RseqOwnedCounter, RseqZone};
/// use std::sync::Arc;
///
/// let zone = Arc::new(RseqZone::new(64).unwrap());
/// let sent = RseqOwnedCounter::new(&zone).unwrap();
/// drop(zone); // `sent` keeps it
/// std::thread::spawn(move || sent.add(2)).join().unwrap();
/// ```
pub struct RseqOwnedCounter {
    /// Dropped first (it frees its slot in the zone), in `drop`.
    counter: ManuallyDrop<RseqCounter<'static>>,
    zone: Arc<RseqZone>,
}

impl RseqOwnedCounter {
    /// A counter of `zone` reading 0; fails as [`RseqZone::alloc`]: [`Error::ZoneFull`] when
    /// every slot is in use, or in a zone that grows [`Error::OutOfMemory`] when no chunk
    /// can be mapped.
    pub fn new(zone: &Arc<RseqZone>) -> Result<RseqOwnedCounter, Error> {
        let counter = zone.alloc()?;
        // SAFETY: the counter borrows the zone in the `Arc`'s allocation, which does not move
        // and lives at least as long as the clone of the `Arc` stored beside the counter; the
        // counter is dropped before that clone (`drop`), and its `'static` never leaves this
        // type: `RseqCounter` has no method that returns the borrow.
        let counter =
            unsafe { core::mem::transmute::<RseqCounter<'_>, RseqCounter<'static>>(counter) };
        Ok(RseqOwnedCounter {
            counter: ManuallyDrop::new(counter),
            zone: Arc::clone(zone),
        })
    }

    /// The zone the counter belongs to.
    pub fn zone(&self) -> &Arc<RseqZone> {
        &self.zone
    }
}

impl core::ops::Deref for RseqOwnedCounter {
    type Target = RseqCounter<'static>;

    fn deref(&self) -> &RseqCounter<'static> {
        &self.counter
    }
}

impl Drop for RseqOwnedCounter {
    fn drop(&mut self) {
        // SAFETY: dropped once, here, while `self.zone` still keeps the zone alive.
        unsafe { ManuallyDrop::drop(&mut self.counter) };
    }
}

impl core::fmt::Debug for RseqOwnedCounter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (*self.counter).fmt(f)
    }
}

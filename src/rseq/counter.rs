// SPDX-License-Identifier: BSD-2-Clause
//! The user-space counter handle and its add.

use core::mem::ManuallyDrop;

use super::fast::{self, imp};
use super::registration::{self, Config, Path, CPU_ID_OFFSET, MM_CID_OFFSET};
use super::RseqZone;

/// A per-CPU counter of an [`RseqZone`] (see the [module docs](super)); dropping it frees the
/// slot.
///
/// Two words: the zone (for the reads, the slow path and the free) and the packed word the
/// add reads (the slot's address and the block stride). [`add`](RseqCounter::add) may be called
/// from any thread, and from signal handlers, with no binding or setup.
pub struct RseqCounter<'z> {
    zone: &'z RseqZone,
    /// The add's word: the slot in block 0 and the stride's shift (`fast::counter_word`).
    word: usize,
}

impl<'z> RseqCounter<'z> {
    /// The handle of the slot at `off`, just allocated and cleared in `zone`, which it owns.
    pub(crate) fn new_in(zone: &'z RseqZone, off: usize) -> Self {
        RseqCounter {
            zone,
            word: zone.counter_word(off),
        }
    }

    /// The counter whose add word is `word` in `zone`, as a view that frees nothing.
    ///
    /// # Safety
    /// `word` is the word of a counter of `zone` that stays allocated while the view lives.
    pub(super) unsafe fn view(zone: &'z RseqZone, word: usize) -> ManuallyDrop<Self> {
        ManuallyDrop::new(RseqCounter { zone, word })
    }

    /// The add's word, kept by an [`RseqStaticCounter`](super::RseqStaticCounter) (which then forgets
    /// the counter: its slot is never freed).
    pub(super) fn word(&self) -> usize {
        self.word
    }

    /// Adds `v` (which may be negative) to the slot of the current CPU (or concurrency ID).
    ///
    /// On the rseq path this is one restartable sequence whose commit is one non-locked add
    /// (x86_64 `add qword ptr [slot], v`; aarch64 `ldr; add; str`): a preemption, migration
    /// or signal inside it restarts it. See [`path`](super::path) for the others.
    #[inline(always)]
    pub fn add(&self, v: i64) {
        add(self.zone, self.word, v)
    }

    /// Adds 1.
    #[inline(always)]
    pub fn inc(&self) {
        self.add(1)
    }

    /// The sum over all blocks since the last zero (the core's
    /// [`fetch`](crate::Counter::fetch)).
    pub fn fetch(&self) -> u64 {
        self.zone.core().fetch(self.offset())
    }

    /// The signed count since the last zero: [`fetch`](RseqCounter::fetch) read as two's
    /// complement, for counters whose adds may be negative (a gauge, a balance). The sum is
    /// kept modulo 2^64 either way, so `fetch_i64` is exact while the true total lies in
    /// `i64`'s range.
    pub fn fetch_i64(&self) -> i64 {
        self.fetch() as i64
    }

    /// Resets the counter to 0, losslessly (the core's [`zero`](crate::Counter::zero)).
    pub fn zero(&self) {
        self.fetch_and_zero();
    }

    /// Returns the count since the last zero and zeroes it, as one step.
    pub fn fetch_and_zero(&self) -> u64 {
        self.zone.core().fetch_and_zero(self.offset())
    }

    /// The raw value of block `block`'s slot (`nslots` is the shared block).
    pub fn block_slot(&self, block: usize) -> Result<u64, crate::Error> {
        self.zone.core().slot_value(block, self.offset())
    }

    /// The slot's offset in every block: block `i`'s slot is at
    /// `zone.layout().base + i * zone.stride() + offset`, wrapping (a counter of a chunk
    /// that lies below the zone's first mapping has a "negative" offset; see
    /// [`RseqZone::grow`]).
    pub fn offset(&self) -> usize {
        fast::slot0(self.word).wrapping_sub(self.zone.slot0(0))
    }
}

impl Drop for RseqCounter<'_> {
    fn drop(&mut self) {
        self.zone.core().free_run(self.offset(), 1);
    }
}

/// The add of the counter whose word is `word` in `zone`: the fast path, else [`add_slow`].
#[inline(always)]
pub(super) fn add(zone: &RseqZone, word: usize, v: i64) {
    // SAFETY: `word` is a live counter's word of `zone`, whose shift is not 0 only when the
    // zone has the blocks the process word says (`RseqZone::counter_word`); on the rseq paths
    // only rseq adds write those blocks.
    if !unsafe { fast::try_add(word, v) } {
        add_slow(zone, word, v)
    }
}

/// Everything but the fast path: a zone with fewer blocks than the possible CPUs, an index
/// past the process word's blocks, a thread to register, a thread whose registration failed
/// (locked add on the shared block), an own registration with `mm_cid`, or the fallback
/// (locked add on `sched_getcpu()`'s block).
#[cold]
#[inline(never)]
fn add_slow(zone: &RseqZone, word: usize, v: i64) {
    let cfg = zone.config();
    let (nslots, shift, slot0) = (
        zone.nslots(),
        zone.stride().trailing_zeros(),
        fast::slot0(word),
    );
    let slot = |block: usize| (slot0 + (block << shift)) as *mut u64;
    // SAFETY: the shared block (`nslots`) is written only by locked adds.
    let add_shared = || unsafe { locked_add(slot(nslots), v) };
    match cfg.path {
        Path::Rseq {
            glibc_registered: true,
            ..
        } => {
            // SAFETY: glibc registered every thread before it ran any code (a failed
            // registration of a new thread is fatal in glibc); the slots `slot0 + (i <<
            // shift)`, `i < nslots`, are this counter's, which on this path only rseq adds
            // write.
            let done = unsafe { try_add::<false>(cfg, nslots, shift, slot0, v) };
            if !done {
                add_shared()
            }
        }
        Path::Rseq { .. } => {
            // SAFETY: the registration is checked in the section; the slots as above.
            let try_own = || unsafe { try_add::<true>(cfg, nslots, shift, slot0, v) };
            // Registered already (an own registration with `mm_cid` always comes here), else
            // registered now, else (or with the index out of range) the shared block.
            let registered_now = || registration::register_current_thread(cfg.rseq_offset);
            if !(try_own() || registered_now() && try_own()) {
                add_shared()
            }
        }
        Path::Fallback { .. } | Path::Unusable { .. } => {
            // SAFETY: sched_getcpu has no preconditions (and is async-signal-safe).
            let cpu = unsafe { libc::sched_getcpu() };
            let block = if cpu >= 0 && (cpu as usize) < nslots {
                cpu as usize
            } else {
                nslots
            };
            // SAFETY: `block <= nslots` is a block of the zone; on the fallback path every
            // add to every block is locked.
            unsafe { locked_add(slot(block), v) }
        }
    }
}

/// A locked add, the same on every arch: the slow path's add to the shared block (a thread
/// the rseq section cannot serve) and to every block on the fallback path, where adds of
/// several threads may meet on one slot.
///
/// # Safety
/// `slot` is a live, aligned slot.
#[inline(always)]
unsafe fn locked_add(slot: *mut u64, v: i64) {
    // SAFETY: per the caller.
    unsafe { core::sync::atomic::AtomicU64::from_ptr(slot) }
        .fetch_add(v as u64, core::sync::atomic::Ordering::Relaxed);
}

impl core::fmt::Debug for RseqCounter<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RseqCounter")
            .field("offset", &self.offset())
            .field("value", &self.fetch())
            .finish()
    }
}

/// The arch's section for the process's index field (`cfg`'s).
///
/// # Safety
/// As the arch's `try_add`, with the thread pointer offset and index field of `cfg`.
unsafe fn try_add<const CHECK_REGISTERED: bool>(
    cfg: &Config,
    nslots: usize,
    shift: u32,
    slot0: usize,
    v: i64,
) -> bool {
    let at = cfg.rseq_offset + cfg.index_offset as isize;
    // SAFETY: per the caller; `at` is the offset of the field `index_offset` names.
    unsafe {
        if cfg.index_offset == MM_CID_OFFSET {
            imp::try_add::<CHECK_REGISTERED, MM_CID_OFFSET>(at, nslots, shift, slot0, v)
        } else {
            imp::try_add::<CHECK_REGISTERED, CPU_ID_OFFSET>(at, nslots, shift, slot0, v)
        }
    }
}
